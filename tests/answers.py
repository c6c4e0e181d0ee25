"""Records as analysis makes them, with only the fields a test is about set (the rest
plausible defaults): for tests of the gate and of what output says of an answer."""

from __future__ import annotations

from typing import Any

import pandas as pd

from regtrack.analysis.records import ComparisonResult, PointComparison, PooledComparison
from regtrack.core.settings import Thresholds
from regtrack.results.bisection_plan import BisectionPlan
from regtrack.results.records import StoredBisection

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


# A finished bisection as regtrack stores it (results/bisections.py): its request and
# facts, a log with every kind of entry, and an answer with one step confirmed side by
# side (no valid measurement), its explain table and the servers' facts.
GOOD, MID, BAD = "a" * 40, "b" * 40, "c" * 40
CHANGE = {"change_pct": 3.0, "ci_low_pct": 2.0, "ci_high_pct": 4.0, "mde_pct": 1.0,
          "verdict": "regression", "n_blocks": 6}  # fmt: skip
EXPLAIN = {"point": "pipeline=10", "workload": "get", "baseline": "aaaaaaa", "candidate": "bbbb",
           "n_baseline": 3, "n_candidate": 3, "baseline_total": 3500.0,
           "candidate_total": 3605.0, "diff_total": 105.0, "change_pct": 3.0,
           "functions": [{"function": "lookupKey", "baseline_per_op": 50.0,
                          "candidate_per_op": 155.0, "diff_per_op": 105.0,
                          "share_pct": 100.0}]}  # fmt: skip


def request(**asked: Any) -> dict[str, Any]:
    """A stored bisection's request (results.bisection_plan), its options as an older
    regtrack's: fewer than Options has."""
    return {
        "good": "v1", "bad": "v2", "metric": "instructions", "threshold": 1.0,
        "all_steps": False, "budget": "10m", "max_repetitions": 30,
        "options": {"workload": "get-pipeline", "metric": "instructions"}, **asked,
    }  # fmt: skip


BISECTION: dict[str, Any] = {
    "id": 7, "status": "done", "created_at": "today", "runs": (1, 2, 3),
    "config": {
        "request": request(),
        "commits": [GOOD, MID, BAD], "facts": {MID: {"subject": "slower get"}},
    },
    "log": [
        {"commit": GOOD, "run_id": 1, "role": "end"},
        {"commit": BAD, "run_id": 1, "role": "end"},
        {"commit": MID, "run_id": 2, "judged": "above the cut", "cut": 0.5, "share": 1.0,
         "decided": True, "vs_good": CHANGE},
        {"commit": MID, "judged": "skipped", "reason": "does not build: make failed"},
        {"commit": MID, "parent": GOOD, "confirm_run_id": 3, "change": None},
    ],
    "result": {
        "ends": CHANGE, "shares": {MID: 1.0}, "carried": 1.0, "more_may_be_left": False,
        "by_estimate": [], "skipped": [], "measured_commits": [GOOD, MID, BAD],
        "steps": [{"kind": "step", "last_good": GOOD, "first_bad": MID, "between": [],
                   "share": 1.0, "interval": [GOOD, BAD], "interval_share": 1.0,
                   "run_id": 3, "parent_run_id": 3, "change": None, "explain": [EXPLAIN]}],
        "server_config": {"appendonly": "no"}, "server_without": {}, "server_data": None,
    },
}  # fmt: skip


def stored_bisection(stored: dict[str, Any]) -> StoredBisection:
    """A StoredBisection of a document like BISECTION, read as results.bisections reads it."""
    plan = BisectionPlan.from_json(stored["config"])
    return StoredBisection(**{**stored, "config": plan, "log": tuple(stored["log"])})
