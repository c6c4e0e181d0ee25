"""One change over a sweep's points: per-block log ratios pooled into one interval.

Blocks are seed-matched pairs (or repetitions); the points of a sweep are fixed effects
and the block is the shared random effect, so one value per block carries the sweep
(analysis/sequential.py holds the intervals valid under repeated looks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from regtrack.analysis import sequential, stats
from regtrack.analysis.interval import Change
from regtrack.analysis.metrics import GATING, Metric
from regtrack.analysis.records import PooledComparison


def values(rows: pd.DataFrame, metric: Metric, label: str, key: str) -> dict[Any, dict]:
    """point -> block -> log of ``label``'s valid, positive values (one pass in plain
    Python: a comparison asks this of every metric, pair and workload)."""
    out: dict[Any, dict[str, float]] = {}
    columns = (rows[c].tolist() for c in ("target", "valid", "point", key, metric.column))
    for target, valid, point, block, value in zip(*columns, strict=True):
        if target == label and valid and value > 0:  # NaN > 0 is False
            out.setdefault(point, {})[block] = math.log(float(value))
    return out


def ratios(
    rows: pd.DataFrame, metric: Metric, baseline: str, candidate: str, key: str | None
) -> dict[str, dict[Any, float]]:
    """point -> block -> log(candidate / baseline), for blocks valid on both sides."""
    if key is None:
        return {}
    base, cand = values(rows, metric, baseline, key), values(rows, metric, candidate, key)
    out: dict[str, dict[Any, float]] = {}
    for point, by_block in cand.items():
        for block, value in by_block.items():
            if block in base.get(point, {}):
                out.setdefault(point, {})[block] = value - base[point][block]
    return out


@dataclass(frozen=True)
class Pair:
    """What one answer of a comparison is about: a metric of a workload, candidate against
    baseline."""

    metric: Metric
    workload: str
    baseline: str
    candidate: str


@dataclass(frozen=True)
class Judging:
    """How an interval is computed and judged: at ``alpha``, by ``method`` (sequential.py)
    at this ``look``, widened by the runs' ``shift`` across runs, against
    ``threshold_pct``."""

    alpha: float
    threshold_pct: float
    method: str = "t"
    look: sequential.Look | None = None
    shift: sequential.Shift | None = None


@dataclass(frozen=True)
class Blocks:
    """The trials of one workload and their seed-matched blocks: ``ratios`` (point -> block
    -> log ratio, from ``ratios()``) paired by ``key``; None: not paired (Welch)."""

    rows: pd.DataFrame
    ratios: dict[str, dict[Any, float]]
    key: str | None


def pooled(
    pair: Pair,
    blocks: Blocks,
    points: list[str],
    judging: Judging,
    excluded: dict[str, str] | None = None,
) -> PooledComparison:
    """One change over the sweep's gating ``points``, from blocks (sequential.block_values),
    and its verdict (``excluded``: the points left out, and why)."""
    metric = pair.metric
    if blocks.key is not None:
        change, n = _paired(blocks, blocks.key, points, judging)
    else:
        change, n = _unpaired(pair, blocks.rows, points, judging)
    verdict, waits = seeds_enough(
        metric, stats.verdict(change, judging.threshold_pct, metric.higher_is_better), n
    )
    return PooledComparison(
        workload=pair.workload,
        baseline=pair.baseline,
        candidate=pair.candidate,
        metric=metric.name,
        unit=metric.unit,
        higher_is_better=metric.higher_is_better,
        change_pct=change.estimate_pct if change else None,
        ci_low_pct=change.low_pct if change else None,
        ci_high_pct=change.high_pct if change else None,
        mde_pct=change.mde_pct if change else None,
        confidence=1 - judging.alpha,
        n_blocks=n,
        points=tuple(points),
        method=change.method if change else None,
        paired_by=blocks.key,
        excluded=excluded or {},
        threshold_pct=judging.threshold_pct,
        verdict=verdict,
        gating=metric.name in GATING,
        blocks_for_no_change=waits,
    )


def _paired(
    blocks: Blocks, key: str, points: list[str], judging: Judging
) -> tuple[Change | None, int]:
    """The sequential interval of the blocks' mean log ratio over the points, blocks in
    the order they were measured, and the number of blocks (an interval needs two)."""
    by_block: dict[Any, dict[str, float]] = {}
    for point in points:
        for block, value in blocks.ratios.get(point, {}).items():
            by_block.setdefault(block, {})[point] = value
    firsts = first_seqs(blocks.rows, key)
    order = [
        b
        for b in sorted(by_block, key=lambda b: firsts.get(b, 0))
        if any(math.isfinite(v) for v in by_block[b].values())
    ]
    numbered = {i: by_block[b] for i, b in enumerate(order)}
    per_block = sequential.block_values(numbered, points)
    change = sequential.interval(
        per_block, judging.alpha, method=judging.method, look=judging.look,
        hosts=block_hosts(blocks.rows, key, order), shift=judging.shift,
    )  # fmt: skip
    return change, len(per_block)


def _unpaired(
    pair: Pair, rows: pd.DataFrame, points: list[str], judging: Judging
) -> tuple[Change | None, int]:
    """No seed-matched blocks (a stored baseline without seeds): each side's repetitions
    averaged over the points, then a Welch interval of the two (one look only), and the
    repetitions of the smaller side."""
    sides = []
    for label in (pair.baseline, pair.candidate):
        logs = values(rows, pair.metric, label, "repetition")
        reps: dict[Any, list[float]] = {}
        for point in points:
            for rep, value in logs.get(point, {}).items():
                reps.setdefault(rep, []).append(value)
        sides.append([math.exp(sum(v) / len(v)) for v in reps.values() if len(v) == len(points)])
    change = stats.unpaired(sides[0], sides[1], 1 - judging.alpha, judging.shift)
    return change, min(len(sides[0]), len(sides[1]))


def seeds_enough(metric: Metric, verdict: str, n_blocks: int | None) -> tuple[str, int | None]:
    """`no change` on too few seed-matched blocks is not said yet: it stays inconclusive,
    with the number of blocks it waits for (Metric.min_blocks_no_change), else None."""
    needed = metric.min_blocks_no_change
    if verdict == "no change" and (n_blocks or 0) < needed:
        return "inconclusive", needed
    return verdict, None


def block_hosts(rows: pd.DataFrame, key: str, blocks: list[Any]) -> list[str] | None:
    """The host that measured each block, when a merged run's blocks come from several
    (each block was measured on one host: bench/shards.py); None for one host."""
    if "host" not in rows or rows["host"].dropna().nunique() < 2:
        return None
    first = rows.dropna(subset=["host"]).groupby(key)["host"].first()
    return [str(first.get(b, "")) for b in blocks]


def first_seqs(rows: pd.DataFrame, key: str) -> dict[Any, int]:
    """Each block's first trial (its lowest seq): the order blocks were measured in."""
    out: dict[Any, int] = {}
    for block, seq in zip(rows[key].tolist(), rows["seq"].tolist(), strict=True):
        if block not in out or seq < out[block]:
            out[block] = int(seq)
    return out
