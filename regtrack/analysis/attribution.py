"""Where a change in instructions (or simulated cycles) per operation went, per function.

The table Redis developers build by hand with perf when a release regresses: which
functions' cost per command grew, by how much, and what share of the total change that is.
With ``metric="cycles"`` (runs measured with --metric cycles) the cost is each function's
exclusive simulated cycles, and each row says how its misses per op moved: which function
now misses the cache, and how often.
"""

from __future__ import annotations

import pandas as pd

from regtrack.analysis.bisect_records import Attribution, FunctionShare
from regtrack.core.errors import BadInput
from regtrack.results.records import RunCosts

# The cost column each explain metric reads (results/stored_trials.StoredCost), and the
# misses shown beside simulated cycles.
COLUMN = {"instructions": "exclusive", "cycles": "cycles"}
MISSES = ("l1_misses", "ll_misses", "branch_misses")


def attribute(
    run: RunCosts,
    baseline: str,
    candidate: str,
    point: str | None = None,
    top: int = 15,
    baseline_run: RunCosts | None = None,
    metric: str = "instructions",
) -> list[Attribution]:
    """Which functions' instructions per operation changed, per point, reconciled to the total.

    Exclusive costs are used because they add up to the total (inclusive costs overlap).
    Per-op costs are averaged over valid instruction trials; a function absent from a trial
    counts as zero there, so sums of averages equal the average of totals. The baseline
    may come from another run (``baseline_run``, e.g. a bisection's steps): instruction
    counts do not drift between runs on one machine the way throughput does.
    """
    column = COLUMN[metric]
    run_id = run.run_id
    parts = []
    for label, side in ((baseline, baseline_run or run), (candidate, run)):
        if label not in side.labels:
            raise BadInput(
                f"{label!r} is not a version of run {side.run_id}: "
                f"its versions are {', '.join(side.labels)}"
            )
        if side.costs.empty:
            raise BadInput(
                f"run {side.run_id} has no instruction profiles: measure with --metric instructions"
            )
        mine = side.costs[side.costs["target"] == label]
        if column != "exclusive" and not mine.empty and mine[column].isna().all():
            raise BadInput(
                f"run {side.run_id} has no simulated cycles for {label!r}: measure with "
                "--metric cycles"
            )
        parts.append(mine)
    costs = pd.concat(parts, ignore_index=True)
    points = list(dict.fromkeys(costs.sort_values("point_order")["point"]))
    if point is not None:
        if point not in points:
            raise BadInput(
                f"point {point!r} is not in run {run_id}: its points are {', '.join(points)}"
            )
        points = [point]
    tables: list[Attribution] = []
    for p in points:
        here = costs[costs["point"] == p]
        per_op: dict[str, pd.DataFrame] = {}
        trials: dict[str, pd.DataFrame] = {}
        for label in (baseline, candidate):
            mine = here[here["target"] == label]
            trials[label] = mine.drop_duplicates("trial_id")
            n = trials[label]["trial_id"].nunique()
            if n == 0:
                raise BadInput(f"{label!r} has no valid instruction trial at {p} in run {run_id}")
            wanted = [column, *(MISSES if column == "cycles" else ())]
            values = mine[wanted].astype("float64").fillna(0.0)
            per_op[label] = (
                values.div(mine["server_calls"], axis=0).groupby(mine["function"]).sum() / n
            )
        base, cand = per_op[baseline], per_op[candidate]
        table = pd.DataFrame({"baseline": base[column], "candidate": cand[column]})
        table = table.fillna(0.0)
        table["diff"] = table["candidate"] - table["baseline"]
        moved = cand.sub(base, fill_value=0.0).reindex(table.index).fillna(0.0)
        total_base, total_cand = table["baseline"].sum(), table["candidate"].sum()
        total_diff = total_cand - total_base
        ranked = table.reindex(table["diff"].abs().sort_values(ascending=False).index)
        shown = ranked.head(top)
        rows: list[FunctionShare] = [
            {
                "function": name,
                "baseline_per_op": float(r["baseline"]),
                "candidate_per_op": float(r["candidate"]),
                "diff_per_op": float(r["diff"]),
                "share_pct": 100.0 * r["diff"] / total_diff if total_diff else None,
            }
            for name, r in shown.to_dict("index").items()
        ]
        if column == "cycles":
            for row in rows:
                found = moved.loc[row["function"]]
                row["misses_diff_per_op"] = {m: float(found[m]) for m in MISSES}
        rest = ranked.iloc[len(shown) :]
        rows.append(
            {
                "function": f"(other {len(rest)} functions)",
                "baseline_per_op": float(rest["baseline"].sum()),
                "candidate_per_op": float(rest["candidate"].sum()),
                "diff_per_op": float(rest["diff"].sum()),
                "share_pct": 100.0 * rest["diff"].sum() / total_diff if total_diff else None,
            }
        )
        tables.append(
            {
                "point": p,
                "workload": str(here["workload"].iloc[0]),
                "baseline": baseline,
                "candidate": candidate,
                "n_baseline": int(trials[baseline]["trial_id"].nunique()),
                "n_candidate": int(trials[candidate]["trial_id"].nunique()),
                "baseline_total": float(total_base),
                "candidate_total": float(total_cand),
                "diff_total": float(total_diff),
                "change_pct": 100.0 * total_diff / total_base if total_base else None,
                "functions": rows,
                "metric": metric,
            }
        )
    return tables
