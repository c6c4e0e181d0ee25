"""Capacity at a latency SLO (--slo 'p99<=1ms'): per version, the highest offered rate
whose percentile stays within the target, with an interval, and its change between
versions.

The run offers every version the same grid of rates, interleaved (bench/plan.py), each
repetition a sweep. Per version and repetition, the capacity at the SLO is read where the
percentile crosses the target: between the last rate within it and the first beyond, by
interpolating the log of the percentile linearly in the rate (tail latency grows roughly
exponentially as a queue fills). Repetitions are the blocks: the change is the paired t
interval of the log ratios candidate / baseline over repetitions (stats.paired), as for
throughput. A repetition whose every rate stayed within the target (or none did) only
bounds the capacity: it is reported as a bound and left out of the interval.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pandas as pd

from regtrack.analysis import stats
from regtrack.analysis.interval import Change
from regtrack.core.errors import BadInput
from regtrack.plan.latency_plan import MODE as LATENCY_MODE
from regtrack.plan.latency_plan import TASK_LATENCY, Slo
from regtrack.results.records import LoadedRun


@dataclass(frozen=True)
class Sweep:
    """One repetition's open-loop trials of one version: (rate, percentile ms) pairs."""

    target: str
    repetition: int
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Crossing:
    """Where one sweep crossed the target: ``rate``, or a bound (``above``: every rate
    stayed within it; ``below``: none did)."""

    target: str
    repetition: int
    rate: float
    bound: str = ""  # "" | "at least" | "below"


@dataclass(frozen=True)
class SloCapacity:
    """A version's capacity at the SLO over its repetitions, and its change from the
    baseline's (None for the baseline, or when too few repetitions crossed)."""

    target: str
    median_rate: float | None
    crossings: tuple[Crossing, ...]
    change: Change | None
    verdict: str

    @property
    def bounded(self) -> int:
        return sum(1 for c in self.crossings if c.bound)


def of_run(
    run: LoadedRun, baseline: str | None, threshold_pct: float
) -> tuple[Slo, list[SloCapacity]] | None:
    """The run's latency target (--slo) and each version's capacity at it, against
    ``baseline`` (default: its first version); None without a target or a valid sweep."""
    if not run.run.slo:
        return None
    target = Slo.parse(run.run.slo)
    found = sweeps(run.trials, target)
    if not found:
        return None
    return target, capacities(found, target, baseline or run.run.labels[0], threshold_pct)


def sweeps(trials: pd.DataFrame, slo: Slo) -> list[Sweep]:
    """Each version's sweeps, one per repetition: the valid open-loop trials' offered
    rate and percentile (a trial the engine could not keep is no point of its sweep)."""
    rows = trials[trials["mode"].isin((LATENCY_MODE, TASK_LATENCY)) & trials["valid"]]
    out = []
    for (target, repetition), group in rows.groupby(["target", "repetition"], sort=False):
        points = tuple(
            (float(params["rate"]), float(value))
            for params, value in zip(group["params"], group[slo.column], strict=True)
            if "rate" in params and pd.notna(value)
        )
        out.append(Sweep(str(target), int(repetition), points))
    return out


def crossing(sweep: Sweep, slo: Slo) -> Crossing:
    """Where the sweep's percentile crosses the target (rates ascending)."""
    pts = sorted(p for p in sweep.points if p[1] > 0)
    if not pts:
        return Crossing(sweep.target, sweep.repetition, 0.0, "below")
    if pts[0][1] > slo.limit_ms:
        return Crossing(sweep.target, sweep.repetition, pts[0][0], "below")
    for (r0, p0), (r1, p1) in itertools.pairwise(pts):
        if p1 > slo.limit_ms:
            share = (math.log(slo.limit_ms) - math.log(p0)) / (math.log(p1) - math.log(p0))
            return Crossing(sweep.target, sweep.repetition, r0 + (r1 - r0) * share)
    return Crossing(sweep.target, sweep.repetition, pts[-1][0], "at least")


def capacities(
    sweeps: Iterable[Sweep], slo: Slo, baseline: str, threshold_pct: float
) -> list[SloCapacity]:
    """Each version's capacity at ``slo``, the baseline's first, with the change of every
    other from the baseline, paired by repetition."""
    by_target: dict[str, dict[int, Crossing]] = {}
    for sweep in sweeps:
        by_target.setdefault(sweep.target, {})[sweep.repetition] = crossing(sweep, slo)
    if baseline not in by_target:
        raise BadInput(f"no open-loop trial of the baseline {baseline} to read the SLO from")
    base = by_target[baseline]
    out = []
    for target in [baseline, *[t for t in by_target if t != baseline]]:
        mine = by_target[target]
        exact = [c.rate for c in mine.values() if not c.bound]
        change, verdict = None, ""
        if target != baseline:
            reps = sorted(r for r in mine if r in base and not mine[r].bound and not base[r].bound)
            change = stats.paired([base[r].rate for r in reps], [mine[r].rate for r in reps])
            verdict = stats.verdict(change, threshold_pct, higher_is_better=True)
        out.append(
            SloCapacity(
                target=target,
                median_rate=_median(exact),
                crossings=tuple(mine[r] for r in sorted(mine)),
                change=change,
                verdict=verdict,
            )
        )
    return out


def _median(values: Sequence[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
