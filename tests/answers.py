"""Records as analysis makes them, with only the fields a test is about set (the rest
plausible defaults): for tests of the gate and of what output says of an answer."""

from __future__ import annotations

from typing import Any

import pandas as pd

from regtrack.analysis.records import ComparisonResult, PointComparison, PooledComparison
from regtrack.core.settings import Thresholds

COMMON: dict[str, Any] = {
    "workload": "get-pipeline", "baseline": "a", "candidate": "b", "metric": "throughput",
    "unit": "ops/s", "higher_is_better": True, "change_pct": -8.0, "ci_low_pct": -11.0,
    "ci_high_pct": -5.0, "mde_pct": 4.0, "confidence": 0.975, "method": "t",
    "threshold_pct": 5.0, "verdict": "regression", "gating": True,
}  # fmt: skip


def pooled(**fields: Any) -> PooledComparison:
    values = {**COMMON, "n_blocks": 4, "points": ("pipeline=10",), "paired_by": "seed"}
    return PooledComparison(**{**values, **fields})


def point(**fields: Any) -> PointComparison:
    values = {
        **COMMON, "point": "pipeline=10", "baseline_value": 400_000.0,
        "candidate_value": 368_000.0, "server_busy_pct_baseline": 99.0,
        "server_busy_pct_candidate": 99.0, "extra_repetitions": None, "n_valid": 4,
        "n_valid_baseline": 4, "n_valid_candidate": 4, "n_invalid_baseline": 0,
        "n_invalid_candidate": 0, "spread_pct_baseline": 1.0, "spread_pct_candidate": 1.0,
        "trusted": True,
    }  # fmt: skip
    return PointComparison(**{**values, **fields})


def result(
    pooled: tuple[PooledComparison, ...] = (), points: tuple[PointComparison, ...] = ()
) -> ComparisonResult:
    return ComparisonResult(
        baseline="a",
        targets=("a", "b"),
        metrics=("throughput",),
        cells=pd.DataFrame(),
        comparisons=points,
        pooled=pooled,
        method="t",
        alpha=0.05,
        thresholds=Thresholds(),
        run_id=1,
    )
