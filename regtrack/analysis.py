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


METRICS = (
    Metric("ops_per_sec", "throughput", "ops/s", True),
    Metric("lat_p50_ms", "latency_p50", "ms", False),
    Metric("lat_p99_ms", "latency_p99", "ms", False),
)
METRIC_BY_NAME = {m.name: m for m in METRICS}


def trials_frame(store: Store, run_id: int) -> pd.DataFrame:
    rows = store.trials(run_id)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame["point_order"] = frame["params"].map(lambda p: p.get("pipeline", 0))
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


def cells(frame: pd.DataFrame, metric: Metric) -> pd.DataFrame:
    """One row per (workload, point, target): median of valid trials, counts, spread."""
    out = []
    for (workload, point, target), group in frame.groupby(
        ["workload", "point", "target"], sort=False
    ):
        valid = group[group["valid"]]
        source = valid if not valid.empty else group
        values = source[metric.column].dropna()
        out.append(
            {
                "workload": workload,
                "point": point,
                "point_order": int(group["point_order"].iloc[0]),
                "target": target,
                "metric": metric.name,
                "value": float(values.median()) if not values.empty else None,
                "min": float(values.min()) if not values.empty else None,
                "max": float(values.max()) if not values.empty else None,
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
                        "trusted": bool(base.trusted and cand.trusted),
                        "problems": sorted(set(base.problems) | set(cand.problems)),
                    }
                )
    return {
        "run_id": run_id,
        "baseline": baseline,
        "targets": targets,
        "cells": pd.concat(all_cells, ignore_index=True),
        "comparisons": records,
    }
