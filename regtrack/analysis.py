"""From stored trials to cells (one target at one point) and comparisons between targets.

Invalid trials never enter a cell's value while a valid one exists. A cell with no valid
trial still shows the median of its invalid ones, flagged, so the user sees the number and
why it cannot be trusted instead of a silent gap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from regtrack.errors import BadInput
from regtrack.store import Store


@dataclass(frozen=True)
class Metric:
    column: str
    name: str
    unit: str
    higher_is_better: bool
    modes: tuple[str, ...] = ("throughput",)  # trial kinds it comes from, first found wins
    deterministic: bool = False  # counted, not timed: its spread is worth showing


METRICS = (
    Metric("ops_per_sec", "throughput", "ops/s", True),
    Metric("lat_p50_ms", "latency_p50", "ms", False),
    Metric("lat_p99_ms", "latency_p99", "ms", False),
    Metric("instructions_per_op", "instructions_per_op", "Ir/op", False, ("instructions",), True),
    Metric(
        "syscalls_per_op", "syscalls_per_op", "syscalls/op", False, ("throughput", "instructions")
    ),
)
METRIC_BY_NAME = {m.name: m for m in METRICS}


def trials_frame(store: Store, run_id: int) -> pd.DataFrame:
    rows = store.trials(run_id)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame["point_order"] = frame["params"].map(lambda p: p.get("pipeline", 0))
    calls = frame["server_calls"].where(frame["server_calls"] > 0)
    frame["syscalls_per_op"] = (frame["syscalls_read"] + frame["syscalls_write"]) / calls
    return frame


def _reasons(group: pd.DataFrame) -> list[str]:
    reasons = group.loc[~group["valid"], "invalid_reason"].dropna()
    # One line per kind of problem: drop the figures that differ trial to trial.
    kinds: dict[str, int] = {}
    for reason in reasons:
        for part in str(reason).split("; "):
            kind = part.split(":")[0]
            kinds[kind] = kinds.get(kind, 0) + 1
    return [f"{kind} ({n}x)" for kind, n in kinds.items()]


def _rows_for(frame: pd.DataFrame, metric: Metric) -> pd.DataFrame:
    for mode in metric.modes:
        rows = frame[frame["mode"] == mode]
        if not rows.empty and rows[metric.column].notna().any():
            return rows
    return frame.iloc[0:0]


def cells(frame: pd.DataFrame, metric: Metric) -> pd.DataFrame:
    """One row per (workload, point, target): median of valid trials, counts, spread."""
    out = []
    rows = _rows_for(frame, metric)
    for (workload, point, target), group in rows.groupby(
        ["workload", "point", "target"], sort=False
    ):
        valid = group[group["valid"]]
        source = valid if not valid.empty else group
        values = source[metric.column].dropna()
        value = float(values.median()) if not values.empty else None
        spread = (
            100.0 * (values.max() - values.min()) / value if value and len(values) > 1 else None
        )
        out.append(
            {
                "workload": workload,
                "point": point,
                "point_order": int(group["point_order"].iloc[0]),
                "target": target,
                "metric": metric.name,
                "value": value,
                "min": float(values.min()) if not values.empty else None,
                "max": float(values.max()) if not values.empty else None,
                "spread_pct": spread,
                "n_valid": len(valid),
                "n_invalid": int(len(group) - len(valid)),
                "trusted": not valid.empty,
                "problems": _reasons(group),
            }
        )
    return pd.DataFrame(out)


def compare(
    store: Store,
    run_id: int,
    baseline: str | None = None,
    metrics: tuple[Metric, ...] = METRICS,
) -> dict[str, Any]:
    """Comparisons of every other target against ``baseline`` (default: the first target)."""
    targets = [t["label"] for t in store.targets(run_id)]
    frame = trials_frame(store, run_id)
    if frame.empty:
        raise BadInput(f"run {run_id} has no trials to compare")
    baseline = baseline or targets[0]
    if baseline not in targets:
        raise BadInput(
            f"baseline {baseline!r} is not a version of run {run_id}: "
            f"its versions are {', '.join(targets)}"
        )
    candidates = [t for t in targets if t != baseline]
    records: list[dict[str, Any]] = []
    all_cells: list[pd.DataFrame] = []
    for metric in metrics:
        table = cells(frame, metric)
        if table.empty:
            continue
        all_cells.append(table)
        indexed = {(r.workload, r.point, r.target): r for r in table.itertuples()}
        points = table[["workload", "point", "point_order"]].drop_duplicates()
        for p in points.sort_values(["workload", "point_order"]).itertuples():
            base = indexed.get((p.workload, p.point, baseline))
            for candidate in candidates:
                cand = indexed.get((p.workload, p.point, candidate))
                if base is None or cand is None:
                    continue
                change = None
                if base.value and cand.value is not None:
                    change = 100.0 * (cand.value / base.value - 1.0)
                records.append(
                    {
                        "workload": p.workload,
                        "point": p.point,
                        "baseline": baseline,
                        "candidate": candidate,
                        "metric": metric.name,
                        "unit": metric.unit,
                        "higher_is_better": metric.higher_is_better,
                        "baseline_value": base.value,
                        "candidate_value": cand.value,
                        "change_pct": change,
                        "n_valid_baseline": base.n_valid,
                        "n_valid_candidate": cand.n_valid,
                        "n_invalid_baseline": base.n_invalid,
                        "n_invalid_candidate": cand.n_invalid,
                        "spread_pct_baseline": _none_if_nan(base.spread_pct),
                        "spread_pct_candidate": _none_if_nan(cand.spread_pct),
                        "trusted": bool(base.trusted and cand.trusted),
                        "problems": sorted(set(base.problems) | set(cand.problems)),
                    }
                )
    if not all_cells:
        raise BadInput(f"run {run_id} has no measured values to compare")
    cell_frame = pd.concat(all_cells, ignore_index=True)
    return {
        "run_id": run_id,
        "baseline": baseline,
        "targets": targets,
        "metrics": list(dict.fromkeys(cell_frame["metric"])),
        "cells": cell_frame,
        "comparisons": records,
    }


def _none_if_nan(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def attribution(
    store: Store,
    run_id: int,
    baseline: str,
    candidate: str,
    point: str | None = None,
    top: int = 15,
) -> list[dict[str, Any]]:
    """Which functions' instructions per operation changed, per point, reconciled to the total.

    Exclusive costs are used because they add up to the total (inclusive costs overlap).
    Per-op costs are averaged over valid instruction trials; a function absent from a trial
    counts as zero there, so sums of averages equal the average of totals.
    """
    labels = [t["label"] for t in store.targets(run_id)]
    for label in (baseline, candidate):
        if label not in labels:
            raise BadInput(
                f"{label!r} is not a version of run {run_id}: its versions are {', '.join(labels)}"
            )
    costs = pd.DataFrame(store.function_costs(run_id))
    if costs.empty:
        raise BadInput(
            f"run {run_id} has no instruction profiles: measure with --metric instructions"
        )
    costs = costs[costs["target"].isin([baseline, candidate])]
    points = list(dict.fromkeys(costs.sort_values("point_order")["point"]))
    if point is not None:
        if point not in points:
            raise BadInput(
                f"point {point!r} is not in run {run_id}: its points are {', '.join(points)}"
            )
        points = [point]
    tables = []
    for p in points:
        here = costs[costs["point"] == p]
        per_op: dict[str, pd.Series] = {}
        trials: dict[str, pd.DataFrame] = {}
        for label in (baseline, candidate):
            mine = here[here["target"] == label]
            trials[label] = mine.drop_duplicates("trial_id")
            n = trials[label]["trial_id"].nunique()
            if n == 0:
                raise BadInput(f"{label!r} has no valid instruction trial at {p} in run {run_id}")
            per_op[label] = (mine["exclusive"] / mine["server_calls"]).groupby(
                mine["function"]
            ).sum() / n
        table = pd.DataFrame({"baseline": per_op[baseline], "candidate": per_op[candidate]})
        table = table.fillna(0.0)
        table["diff"] = table["candidate"] - table["baseline"]
        total_base, total_cand = table["baseline"].sum(), table["candidate"].sum()
        total_diff = total_cand - total_base
        ranked = table.reindex(table["diff"].abs().sort_values(ascending=False).index)
        shown = ranked.head(top)
        rows = [
            {
                "function": name,
                "baseline_per_op": float(r["baseline"]),
                "candidate_per_op": float(r["candidate"]),
                "diff_per_op": float(r["diff"]),
                "share_pct": 100.0 * r["diff"] / total_diff if total_diff else None,
            }
            for name, r in shown.to_dict("index").items()
        ]
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
            }
        )
    return tables


DISAGREEMENT_PCT = 2.0


def disagreements(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Points where throughput and instructions per op tell different stories.

    Fewer instructions should mean more throughput; when a candidate is faster while
    executing more instructions per op (or slower with fewer), something callgrind cannot
    see is at work, typically syscalls or memory behaviour, and the user must know.
    """
    by_key: dict[tuple, dict[str, dict[str, Any]]] = {}
    for r in result["comparisons"]:
        by_key.setdefault((r["workload"], r["point"], r["candidate"]), {})[r["metric"]] = r
    out = []
    for (workload, point, candidate), metrics in by_key.items():
        tput, instr = metrics.get("throughput"), metrics.get("instructions_per_op")
        if not tput or not instr or not (tput["trusted"] and instr["trusted"]):
            continue  # an untrusted number is flagged already; it cannot disagree
        if tput["change_pct"] is None or instr["change_pct"] is None:
            continue
        faster = tput["change_pct"] > DISAGREEMENT_PCT
        slower = tput["change_pct"] < -DISAGREEMENT_PCT
        more = instr["change_pct"] > DISAGREEMENT_PCT
        fewer = instr["change_pct"] < -DISAGREEMENT_PCT
        if (faster and more) or (slower and fewer):
            sys_change = metrics.get("syscalls_per_op", {}).get("change_pct")
            out.append(
                {
                    "workload": workload,
                    "point": point,
                    "candidate": candidate,
                    "throughput_change_pct": tput["change_pct"],
                    "instructions_change_pct": instr["change_pct"],
                    "syscalls_change_pct": sys_change,
                }
            )
    return out
