"""One change over a sweep's points: per-block log ratios pooled into one interval.

Blocks are seed-matched pairs (or repetitions); the points of a sweep are fixed effects
and the block is the shared random effect, so one value per block carries the sweep
(analysis/sequential.py holds the intervals valid under repeated looks).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from regtrack.analysis import sequential, stats
from regtrack.analysis.metrics import GATING, Metric
from regtrack.analysis.records import PooledComparison


def values(rows: pd.DataFrame, metric: Metric, label: str, key: str) -> dict[Any, dict]:
    valid = rows[(rows["target"] == label) & rows["valid"] & rows[metric.column].notna()]
    out: dict[Any, dict[str, float]] = {}
    for point, block, value in zip(valid["point"], valid[key], valid[metric.column], strict=True):
        if value > 0:
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


def pooled(
    metric: Metric,
    workload: str,
    baseline: str,
    candidate: str,
    rows: pd.DataFrame,
    ratios: dict[str, dict[Any, float]],
    points: list[str],
    key: str | None,
    alpha: float,
    method: str,
    look: sequential.Look | None,
    shift: sequential.Shift | None = None,
    *,
    threshold_pct: float,
    excluded: dict[str, str] | None = None,
) -> PooledComparison:
    """One change over the sweep's gating points, from blocks (sequential.block_values),
    and its verdict at ``threshold_pct`` (``excluded``: the points left out, and why)."""
    interval: stats.Change | None
    if key is not None:
        by_block: dict[Any, dict[str, float]] = {}
        for point in points:
            for block, value in ratios.get(point, {}).items():
                by_block.setdefault(block, {})[point] = value
        order = [
            b
            for b in sorted(by_block, key=lambda b: first_seq(rows, key, b))
            if any(math.isfinite(v) for v in by_block[b].values())
        ]
        numbered = {i: by_block[b] for i, b in enumerate(order)}
        blocks = sequential.block_values(numbered, points)
        interval = sequential.interval(
            blocks, alpha, method=method, look=look, hosts=block_hosts(rows, key, order),
            shift=shift,
        )  # fmt: skip
        n = len(blocks)
    else:
        # No seed-matched blocks (a stored baseline without seeds): each side's repetitions
        # averaged over the points, then a Welch interval of the two (one look only).
        sides = []
        for label in (baseline, candidate):
            logs = values(rows, metric, label, "repetition")
            reps: dict[Any, list[float]] = {}
            for point in points:
                for rep, value in logs.get(point, {}).items():
                    reps.setdefault(rep, []).append(value)
            sides.append(
                [math.exp(sum(v) / len(v)) for v in reps.values() if len(v) == len(points)]
            )
        interval = stats.unpaired(sides[0], sides[1], 1 - alpha, shift)
        n = min(len(sides[0]), len(sides[1]))
    verdict, waits = seeds_enough(
        metric, stats.verdict(interval, threshold_pct, metric.higher_is_better), n
    )
    return PooledComparison(
        workload=workload,
        baseline=baseline,
        candidate=candidate,
        metric=metric.name,
        unit=metric.unit,
        higher_is_better=metric.higher_is_better,
        change_pct=interval.estimate_pct if interval else None,
        **bounds(interval),
        confidence=1 - alpha,
        n_blocks=n,
        points=tuple(points),
        method=interval.method if interval else None,
        paired_by=key,
        excluded=excluded or {},
        threshold_pct=threshold_pct,
        verdict=verdict,
        gating=metric.name in GATING,
        blocks_for_no_change=waits,
    )


def seeds_enough(metric: Metric, verdict: str, n_blocks: int | None) -> tuple[str, int | None]:
    """`no change` on too few seed-matched blocks is not said yet: it stays inconclusive,
    with the number of blocks it waits for (Metric.min_blocks_no_change), else None."""
    needed = metric.min_blocks_no_change
    if verdict == "no change" and (n_blocks or 0) < needed:
        return "inconclusive", needed
    return verdict, None


def bounds(change: stats.Change | None) -> dict[str, float | None]:
    """The interval's ends and minimum detectable effect (a Welch interval has none), as
    the records' fields."""
    return {
        "ci_low_pct": change.low_pct if change else None,
        "ci_high_pct": change.high_pct if change else None,
        "mde_pct": change.mde_pct if change else None,
    }


def block_hosts(rows: pd.DataFrame, key: str, blocks: list[Any]) -> list[str] | None:
    """The host that measured each block, when a merged run's blocks come from several
    (each block was measured on one host: bench/shards.py); None for one host."""
    if "host" not in rows or rows["host"].dropna().nunique() < 2:
        return None
    first = rows.dropna(subset=["host"]).groupby(key)["host"].first()
    return [str(first.get(b, "")) for b in blocks]


def first_seq(rows: pd.DataFrame, key: str, block: Any) -> int:
    seqs = rows.loc[rows[key] == block, "seq"]
    return int(seqs.min()) if not seqs.empty else 0
