"""From stored trials to cells (one target at one point) and comparisons between targets.

Invalid trials never enter a cell's value while a valid one exists. A cell with no valid
trial still shows the median of its invalid ones, flagged, so the user sees the number and
why it cannot be trusted instead of a silent gap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from regtrack import stats
from regtrack.config import Thresholds
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
# Metrics whose regressions fail `regtrack ci`; the others are reported with verdicts.
GATING = ("throughput", "instructions_per_op")


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
    """One row per (workload, point, target): median of valid trials, counts, spread, and
    the valid values by repetition (what paired intervals are built from)."""
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
        by_rep = {
            int(r): float(v)
            for r, v in zip(valid["repetition"], valid[metric.column], strict=True)
            if pd.notna(v)
        }
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
                "by_rep": by_rep,
            }
        )
    return pd.DataFrame(out)


def _labels(store: Store, run_id: int) -> list[str]:
    return [t["label"] for t in store.targets(run_id)]


def compare(
    store: Store,
    run_id: int,
    baseline: str | None = None,
    thresholds: Thresholds | None = None,
    metrics: tuple[Metric, ...] = METRICS,
) -> dict[str, Any]:
    """Every other target of a run against ``baseline`` (default: the first target).

    Trials of one run were interleaved, so repetition r of the baseline and of a
    candidate were measured side by side and can be paired (``[verdict] method``).
    """
    targets = _labels(store, run_id)
    frame = trials_frame(store, run_id)
    if frame.empty:
        raise BadInput(f"run {run_id} has no trials to compare")
    baseline = baseline or targets[0]
    if baseline not in targets:
        raise BadInput(
            f"baseline {baseline!r} is not a version of run {run_id}: "
            f"its versions are {', '.join(targets)}"
        )
    thresholds = thresholds or Thresholds()
    result = _compare(
        frame,
        targets,
        baseline,
        paired=thresholds.method == "paired",
        thresholds=thresholds,
        metrics=metrics,
    )
    result["run_id"] = run_id
    return result


def compare_runs(
    store: Store,
    baseline_run: int,
    baseline_label: str,
    candidate_run: int,
    candidate_label: str,
    thresholds: Thresholds | None = None,
    metrics: tuple[Metric, ...] = METRICS,
) -> dict[str, Any]:
    """A candidate of one run against a stored baseline of another (unpaired intervals:
    they were not measured side by side)."""
    for run_id, label in ((baseline_run, baseline_label), (candidate_run, candidate_label)):
        if label not in _labels(store, run_id):
            raise BadInput(f"{label!r} is not a version of run {run_id}")
    base = trials_frame(store, baseline_run)
    cand = trials_frame(store, candidate_run)
    base = base[base["target"] == baseline_label].copy()
    cand = cand[cand["target"] == candidate_label].copy()
    if base.empty or cand.empty:
        raise BadInput("the stored baseline or the candidate has no trials to compare")
    shown_base = (
        baseline_label if baseline_label != candidate_label else f"{baseline_label} (stored)"
    )
    base["target"] = shown_base
    frame = pd.concat([base, cand], ignore_index=True)
    result = _compare(
        frame,
        [shown_base, candidate_label],
        shown_base,
        paired=False,
        thresholds=thresholds,
        metrics=metrics,
    )
    result["run_id"] = candidate_run
    result["baseline_run_id"] = baseline_run
    return result


def _compare(
    frame: pd.DataFrame,
    targets: list[str],
    baseline: str,
    *,
    paired: bool,
    thresholds: Thresholds | None,
    metrics: tuple[Metric, ...],
) -> dict[str, Any]:
    thresholds = thresholds or Thresholds()
    candidates = [t for t in targets if t != baseline]
    tables = {m.name: cells(frame, m) for m in metrics}
    tables = {name: table for name, table in tables.items() if not table.empty}
    if not tables:
        raise BadInput("no measured values to compare")
    # Bonferroni: the gating metrics' cells form one family, so a sweep of many cells
    # does not multiply false alarms; every other metric is a family of its own.
    family = {
        name: len(table[["workload", "point"]].drop_duplicates()) * len(candidates)
        for name, table in tables.items()
    }
    gating = sum(n for name, n in family.items() if name in GATING)
    records: list[dict[str, Any]] = []
    for metric in metrics:
        table = tables.get(metric.name)
        if table is None:
            continue
        cells_in_family = gating if metric.name in GATING else family[metric.name]
        confidence = 1 - (1 - stats.CONFIDENCE) / max(1, cells_in_family)
        threshold = thresholds.for_metric(metric.name)
        indexed = {(r.workload, r.point, r.target): r for r in table.itertuples()}
        points = table[["workload", "point", "point_order"]].drop_duplicates()
        for p in points.sort_values(["workload", "point_order"]).itertuples():
            base = indexed.get((p.workload, p.point, baseline))
            for candidate in candidates:
                cand = indexed.get((p.workload, p.point, candidate))
                if base is None or cand is None:
                    continue
                records.append(
                    _record(
                        metric, p, baseline, candidate, base, cand, paired, confidence, threshold
                    )
                )
    cell_frame = pd.concat(tables.values(), ignore_index=True)
    return {
        "baseline": baseline,
        "targets": targets,
        "metrics": list(tables),
        "cells": cell_frame,
        "comparisons": records,
        "method": "paired-t" if paired else "welch-t",
        "family_cells": gating,
    }


def _record(
    metric: Metric,
    p: Any,
    baseline: str,
    candidate: str,
    base: Any,
    cand: Any,
    paired: bool,
    confidence: float,
    threshold: float,
) -> dict[str, Any]:
    if paired:
        reps = sorted(set(base.by_rep) & set(cand.by_rep))
        change = stats.paired(
            [base.by_rep[r] for r in reps], [cand.by_rep[r] for r in reps], confidence
        )
    else:
        change = stats.unpaired(list(base.by_rep.values()), list(cand.by_rep.values()), confidence)
    if change is not None:
        estimate = change.estimate_pct
    elif base.value and cand.value is not None:
        estimate = 100.0 * (cand.value / base.value - 1.0)
    else:
        estimate = None
    verdict = stats.verdict(change, threshold, metric.higher_is_better)
    problems = sorted(set(base.problems) | set(cand.problems))
    if change is None:
        problems.append("fewer than 2 valid repetitions on each side: no interval")
    return {
        "workload": p.workload,
        "point": p.point,
        "baseline": baseline,
        "candidate": candidate,
        "metric": metric.name,
        "unit": metric.unit,
        "higher_is_better": metric.higher_is_better,
        "baseline_value": base.value,
        "candidate_value": cand.value,
        "change_pct": estimate,
        "ci_low_pct": change.low_pct if change else None,
        "ci_high_pct": change.high_pct if change else None,
        "confidence": confidence,
        "threshold_pct": threshold,
        "verdict": verdict,
        "extra_repetitions": (
            stats.extra_repetitions(change, threshold) if verdict == "inconclusive" else None
        ),
        "n_valid": change.n if change else 0,
        "method": change.method if change else None,
        "n_valid_baseline": base.n_valid,
        "n_valid_candidate": cand.n_valid,
        "n_invalid_baseline": base.n_invalid,
        "n_invalid_candidate": cand.n_invalid,
        "spread_pct_baseline": _none_if_nan(base.spread_pct),
        "spread_pct_candidate": _none_if_nan(cand.spread_pct),
        "trusted": bool(base.trusted and cand.trusted),
        "problems": problems,
    }


def _none_if_nan(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


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


def gate(result: dict[str, Any]) -> dict[str, Any]:
    """The CI decision from a comparison's gating metrics.

    ``regression`` if any gating cell is a regression; ``not measured`` if no gating cell
    had valid trials on both sides; ``inconclusive`` if some cell could not be decided;
    otherwise ``no regression``.
    """
    gating = [r for r in result["comparisons"] if r["metric"] in GATING]
    by_verdict: dict[str, list[dict[str, Any]]] = {}
    for r in gating:
        by_verdict.setdefault(r["verdict"], []).append(r)
    if by_verdict.get("regression"):
        outcome = "regression"
    elif not any(r["n_valid"] for r in gating):
        outcome = "not measured"
    elif by_verdict.get("inconclusive"):
        outcome = "inconclusive"
    else:
        outcome = "no regression"
    return {"outcome": outcome, "cells": gating, "by_verdict": by_verdict}
