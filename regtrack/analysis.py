"""From stored trials to cells (one target at one point) and comparisons between targets.

Invalid trials never enter a cell's value while a valid one exists. A cell with no valid
trial still shows the median of its invalid ones, flagged, so the user sees the number and
why it cannot be trusted instead of a silent gap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from regtrack import sequential, stats
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
# The family-wise error rate of one comparison's gate (split over gating metrics).
ALPHA = 0.05


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
        busy = (
            source["server_cpu_pct"].dropna()
            if "server_cpu_pct" in source
            else pd.Series(dtype=float)
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
                "by_rep": by_rep,
                # how busy the server was (median share of its CPU): a throughput is the
                # server's capacity only when this is near 100%
                "server_busy_pct": float(busy.median()) if not busy.empty else None,
            }
        )
    return pd.DataFrame(out)


def _labels(store: Store, run_id: int) -> list[str]:
    return [t["label"] for t in store.targets(run_id)]


def comparison_settings(
    run: dict[str, Any],
    baseline: str | None,
    thresholds: Thresholds | None,
    fallback: Thresholds,
) -> tuple[str | None, Thresholds]:
    """The baseline and thresholds a run's verdicts are computed with: what the caller
    asks for, else what the run stored when its command printed verdicts (so the report
    and a later `compare` say what the terminal said), else ``fallback``."""
    stored = (run.get("config") or {}).get("comparison") or {}
    if thresholds is None:
        try:
            thresholds = Thresholds(**stored["thresholds"])
        except (KeyError, TypeError, ValueError):  # none stored, or from another version
            thresholds = fallback
    return baseline or stored.get("baseline"), thresholds


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
        paired=True,
        method=_method(store, run_id),
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
    seeded = _block_key(frame) == "seed"
    result = _compare(
        frame,
        [shown_base, candidate_label],
        shown_base,
        paired=seeded,
        method=_method(store, candidate_run),
        thresholds=thresholds,
        metrics=metrics,
    )
    result["run_id"] = candidate_run
    result["baseline_run_id"] = baseline_run
    return result


def _method(store: Store, run_id: int) -> str:
    """The interval a run's design allows: one look at planned repetitions (t), or a
    sequential gate that looked after every block (t-spending, regtrack.sequential)."""
    design = store.run(run_id)["config"].get("design", "fixed")
    return "t-spending" if design == "sequential" else "t"


def _compare(
    frame: pd.DataFrame,
    targets: list[str],
    baseline: str,
    *,
    paired: bool,
    method: str = "t",
    thresholds: Thresholds | None,
    metrics: tuple[Metric, ...],
) -> dict[str, Any]:
    """Per metric and candidate: one pooled answer over the sweep (what gates), and one
    record per point (where a change lives), both from seed-matched blocks.

    Multiplicity: the gating metrics share alpha (Bonferroni over metrics and candidates);
    within a metric the pooled test comes first and a point may be called a regression or
    an improvement only when the pooled test found that change (gatekeeping, then
    Bonferroni over the points), so correlated points never multiply false alarms.
    """
    thresholds = thresholds or Thresholds()
    candidates = [t for t in targets if t != baseline]
    tables = {m.name: cells(frame, m) for m in metrics}
    tables = {name: table for name, table in tables.items() if not table.empty}
    if not tables:
        raise BadInput("no measured values to compare")
    gating_metrics = [name for name in tables if name in GATING]
    key = _block_key(frame) if paired else None
    records: list[dict[str, Any]] = []
    pooled: list[dict[str, Any]] = []
    for metric in metrics:
        table = tables.get(metric.name)
        if table is None:
            continue
        family = (len(gating_metrics) if metric.name in GATING else 1) * max(1, len(candidates))
        alpha = ALPHA / family
        threshold = thresholds.for_metric(metric.name)
        rows = _rows_for(frame, metric)
        indexed = {(r.workload, r.point, r.target): r for r in table.itertuples()}
        points = table[["workload", "point", "point_order"]].drop_duplicates()
        for workload, wpoints in points.sort_values(["workload", "point_order"]).groupby(
            "workload", sort=False
        ):
            labels = list(wpoints["point"])
            wrows = rows[rows["workload"] == workload]
            for candidate in candidates:
                ratios = _ratios(wrows, metric, baseline, candidate, key)
                excluded = _excluded_points(wrows, metric, baseline, candidate, labels)
                gating_points = [p for p in labels if p not in excluded]
                look = _look(wrows)
                top = _pooled(
                    metric,
                    workload,
                    baseline,
                    candidate,
                    wrows,
                    ratios,
                    gating_points,
                    key,
                    alpha,
                    method,
                    look,
                )
                top.update(
                    excluded=excluded,
                    threshold_pct=threshold,
                    verdict=sequential.decide(
                        top.pop("interval"), threshold, metric.higher_is_better
                    ),
                    gating=metric.name in GATING,
                )
                pooled.append(top)
                for p in wpoints.itertuples():
                    base = indexed.get((workload, p.point, baseline))
                    cand = indexed.get((workload, p.point, candidate))
                    if base is None or cand is None:
                        continue
                    records.append(
                        _record(
                            metric,
                            p,
                            baseline,
                            candidate,
                            base,
                            cand,
                            ratios.get(p.point) if key else None,
                            alpha / max(1, len(gating_points)),
                            threshold,
                            top,
                            method,
                            look,
                        )
                    )
    cell_frame = pd.concat(tables.values(), ignore_index=True)
    return {
        "baseline": baseline,
        "targets": targets,
        "metrics": list(tables),
        "cells": cell_frame,
        "comparisons": records,
        "pooled": pooled,
        "method": method if key else "welch-t",
        "alpha": ALPHA,
    }


def _block_key(frame: pd.DataFrame) -> str:
    """Blocks are seed-matched pairs: the seed when every trial has one (it also matches
    a stored baseline's repetition with a candidate's), else the repetition."""
    if "seed" in frame and frame["seed"].notna().all():
        return "seed"
    return "repetition"


def _values(rows: pd.DataFrame, metric: Metric, label: str, key: str) -> dict[Any, dict]:
    valid = rows[(rows["target"] == label) & rows["valid"] & rows[metric.column].notna()]
    out: dict[Any, dict[str, float]] = {}
    for point, block, value in zip(valid["point"], valid[key], valid[metric.column], strict=True):
        if value > 0:
            out.setdefault(point, {})[block] = math.log(float(value))
    return out


def _ratios(
    rows: pd.DataFrame, metric: Metric, baseline: str, candidate: str, key: str | None
) -> dict[str, dict[Any, float]]:
    """point -> block -> log(candidate / baseline), for blocks valid on both sides."""
    if key is None:
        return {}
    base, cand = _values(rows, metric, baseline, key), _values(rows, metric, candidate, key)
    out: dict[str, dict[Any, float]] = {}
    for point, by_block in cand.items():
        for block, value in by_block.items():
            if block in base.get(point, {}):
                out.setdefault(point, {})[block] = value - base[point][block]
    return out


def _excluded_points(
    rows: pd.DataFrame, metric: Metric, baseline: str, candidate: str, points: list[str]
) -> dict[str, str]:
    """Points that must not gate: the load generator was the bottleneck in some trial."""
    out = {}
    both = rows[rows["target"].isin([baseline, candidate])]
    for point in points:
        reasons = both.loc[both["point"] == point, "invalid_reason"].dropna()
        n = sum("client-bound" in str(r) for r in reasons)
        if n and metric.modes[0] == "throughput":
            out[point] = f"client-bound in {n} trials: the load generator, not Redis, was measured"
    return out


def _pooled(
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
    look: int | None,
) -> dict[str, Any]:
    """One change over the sweep's gating points, from blocks (sequential.block_values)."""
    interval: Any
    if key is not None:
        by_block: dict[Any, dict[str, float]] = {}
        for point in points:
            for block, value in ratios.get(point, {}).items():
                by_block.setdefault(block, {})[point] = value
        order = sorted(by_block, key=lambda b: _first_seq(rows, key, b))
        numbered = {i: by_block[b] for i, b in enumerate(order)}
        values = sequential.block_values(numbered, points)
        interval = sequential.interval(values, alpha, method=method, look=look)
        n = len(values)
    else:
        # No seed-matched blocks (a stored baseline without seeds): each side's repetitions
        # averaged over the points, then a Welch interval of the two (one look only).
        sides = []
        for label in (baseline, candidate):
            logs = _values(rows, metric, label, "repetition")
            reps: dict[Any, list[float]] = {}
            for point in points:
                for rep, value in logs.get(point, {}).items():
                    reps.setdefault(rep, []).append(value)
            sides.append(
                [math.exp(sum(v) / len(v)) for v in reps.values() if len(v) == len(points)]
            )
        interval = stats.unpaired(sides[0], sides[1], 1 - alpha)
        n = min(len(sides[0]), len(sides[1]))
    return {
        "workload": workload,
        "point": "pooled",
        "baseline": baseline,
        "candidate": candidate,
        "metric": metric.name,
        "unit": metric.unit,
        "higher_is_better": metric.higher_is_better,
        "change_pct": interval.estimate_pct if interval else None,
        **_bounds(interval),
        "confidence": 1 - alpha,
        "n_blocks": n,
        "points": points,
        "method": interval.method if interval else None,
        "paired_by": key,
        "interval": interval,
    }


def _bounds(change: Any) -> dict[str, float | None]:
    """The interval's ends and minimum detectable effect (a Welch interval has none)."""
    return {
        "ci_low_pct": change.low_pct if change else None,
        "ci_high_pct": change.high_pct if change else None,
        "mde_pct": getattr(change, "mde_pct", None) if change else None,
    }


def _look(rows: pd.DataFrame) -> int | None:
    """Which look of a sequential gate this is: one per block of two repetitions that
    measured this metric, counted from the repetitions, not the valid blocks."""
    if rows.empty:
        return None
    return math.ceil((int(rows["repetition"].max()) + 1) / 2)


def _first_seq(rows: pd.DataFrame, key: str, block: Any) -> int:
    seqs = rows.loc[rows[key] == block, "seq"]
    return int(seqs.min()) if not seqs.empty else 0


def _record(
    metric: Metric,
    p: Any,
    baseline: str,
    candidate: str,
    base: Any,
    cand: Any,
    ratios: dict[Any, float] | None,
    alpha: float,
    threshold: float,
    pooled: dict[str, Any],
    method: str,
    look: int | None = None,
) -> dict[str, Any]:
    change: Any
    if ratios is not None:
        change = sequential.interval(list(ratios.values()), alpha, method=method, look=look)
    else:
        change = stats.unpaired(list(base.by_rep.values()), list(cand.by_rep.values()), 1 - alpha)
    if change is not None:
        estimate = change.estimate_pct
    elif base.value and cand.value is not None:
        estimate = 100.0 * (cand.value / base.value - 1.0)
    else:
        estimate = None
    verdict = sequential.decide(change, threshold, metric.higher_is_better)
    problems = sorted(set(base.problems) | set(cand.problems))
    if change is None:
        problems.append("fewer than 2 valid repetitions on each side: no interval")
    if verdict in ("regression", "improvement") and pooled["verdict"] != verdict:
        problems.append(f"not called at one point: the pooled change is {pooled['verdict']}")
        verdict = "inconclusive"
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
        "server_busy_pct_baseline": _none_if_nan(base.server_busy_pct),
        "server_busy_pct_candidate": _none_if_nan(cand.server_busy_pct),
        "change_pct": estimate,
        **_bounds(change),
        "confidence": 1 - alpha,
        "threshold_pct": threshold,
        "verdict": verdict,
        "extra_repetitions": (
            stats.extra_repetitions(change, threshold) if verdict == "inconclusive" else None
        ),
        "n_valid": change.n if change else 0,
        "method": change.method if change else None,
        "gating": p.point in pooled["points"] and pooled["gating"],
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
    """The CI decision from the pooled answers of the gating metrics.

    ``regression`` if any is a regression; ``not measured`` if none had blocks with valid
    trials on both sides; ``inconclusive`` if one could not be decided (its minimum
    detectable effect says how far the budget got); otherwise ``no regression``.
    """
    gating = [r for r in result["pooled"] if r["gating"]]
    by_verdict: dict[str, list[dict[str, Any]]] = {}
    for r in gating:
        by_verdict.setdefault(r["verdict"], []).append(r)
    if by_verdict.get("regression"):
        outcome = "regression"
    elif not any(r["n_blocks"] for r in gating):
        outcome = "not measured"
    elif by_verdict.get("inconclusive"):
        outcome = "inconclusive"
    else:
        outcome = "no regression"
    return {"outcome": outcome, "cells": gating, "by_verdict": by_verdict}


def undecided_modes(result: dict[str, Any]) -> tuple[str, ...]:
    """The trial modes whose gating metrics more repetitions could still decide; none once
    a regression is found (the gate has its answer) or every gating answer is in."""
    decision = gate(result)
    if decision["outcome"] in ("regression", "no regression", "not measured"):
        return ()
    modes = {METRIC_BY_NAME[r["metric"]].modes[0] for r in decision["by_verdict"]["inconclusive"]}
    return tuple(sorted(modes, reverse=True))
