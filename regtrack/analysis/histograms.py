"""Open-loop latency histograms (HDR, as the engine keeps them per trial): decoded, merged
per version and point over the valid trials, and read as a percentile distribution, for
export (.hgrm) and the run page's charts.

A merged histogram is exact (the counts add), unlike a mean of trial percentiles; it
describes what the requests of all those trials felt together, so it is shown, while
verdicts come from the trial percentiles block by block (analysis/comparison.py).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hdrh.histogram import HdrHistogram

from regtrack.core.errors import BadInput
from regtrack.results.records import StoredOpenLoop

# Unit of the engine's histogram values, per unit of a millisecond.
PER_MS = {"ns": 1e6, "us": 1e3, "ms": 1.0}
# Percentiles of a distribution chart: nines from 0 to 99.999.
CHART_PERCENTILES = (0.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.999)


@dataclass(frozen=True)
class Distribution:
    """One version's latency at one point, from the merged histogram of its trials."""

    target: str
    point: str
    trials: int
    count: int
    offered_rate: float
    percentiles_ms: tuple[tuple[float, float], ...]  # (percentile, latency ms)
    max_ms: float
    histogram: HdrHistogram
    per_ms: float  # histogram values per millisecond (its unit's)


def decode(stored: StoredOpenLoop) -> HdrHistogram:
    """A trial's histogram; one line if what is stored is not one."""
    if stored.hdr_unit not in PER_MS:
        raise BadInput(f"trial {stored.trial_id}: histogram unit {stored.hdr_unit[:20]!r} unknown")
    try:
        return HdrHistogram.decode(stored.hdr)
    except Exception as exc:  # hdrh raises its own kinds, and zlib's, binascii's, ...
        raise BadInput(
            f"trial {stored.trial_id}: its latency histogram cannot be decoded "
            f"({type(exc).__name__}); it was not written by regtrack-openloop"
        ) from None


def distributions(trials: Iterable[StoredOpenLoop]) -> list[Distribution]:
    """Per version and point, in the order first measured: the valid trials' merged
    histogram and its percentiles."""
    groups: dict[tuple[str, str], list[StoredOpenLoop]] = {}
    for t in trials:
        if t.valid:
            groups.setdefault((t.target, t.point), []).append(t)
    return [_merged(target, point, group) for (target, point), group in groups.items()]


def _merged(target: str, point: str, group: Sequence[StoredOpenLoop]) -> Distribution:
    first = decode(group[0])
    merged = HdrHistogram(
        first.lowest_trackable_value, first.highest_trackable_value, first.significant_figures
    )
    scale = PER_MS[group[0].hdr_unit]
    for t in group:
        if PER_MS.get(t.hdr_unit) != scale:
            raise BadInput(f"trial {t.trial_id}: histograms of {target} mix units")
        merged.add(decode(t))
    return Distribution(
        target=target,
        point=point,
        trials=len(group),
        count=merged.get_total_count(),
        offered_rate=group[0].offered_rate,
        percentiles_ms=tuple(
            (p, merged.get_value_at_percentile(p) / scale) for p in CHART_PERCENTILES
        ),
        max_ms=merged.get_max_value() / scale,
        histogram=merged,
        per_ms=scale,
    )


def hgrm(distribution: Distribution) -> str:
    """The histogram's percentile distribution in HdrHistogram's .hgrm text, values in
    milliseconds (what HdrHistogram's plotter and wrk2 users read)."""
    out = io.BytesIO()
    distribution.histogram.output_percentile_distribution(out, distribution.per_ms)
    return out.getvalue().decode()


def curve(distribution: Distribution, ticks: int = 5) -> tuple[list[float], list[float]]:
    """The merged histogram's percentile distribution: percentiles (0-100) and their
    latencies in ms, ``ticks`` steps per halving of the distance to 100% (as .hgrm)."""
    percentiles, ms = [], []
    for item in distribution.histogram.get_percentile_iterator(ticks):
        if item.percentile_level_iterated_to >= 100.0:
            break
        percentiles.append(item.percentile_level_iterated_to)
        ms.append(item.value_iterated_to / distribution.per_ms)
    return percentiles, ms
