"""Comparisons between targets: per-point cells side by side and one pooled answer per metric.

Within a run, versions are compared block by block (seed-matched pairs); across runs
(a stored baseline), by seed where the runs share seeds, else unpaired.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from regtrack.analysis import pooling, run_shift, sequential, stats, syscall_breakdown
from regtrack.analysis.cells import by_mode, cells, rows_for
from regtrack.analysis.gate import disagreements
from regtrack.analysis.interval import Change
from regtrack.analysis.metrics import ALPHA, GATING, METRIC_BY_NAME, METRICS, Metric
from regtrack.analysis.records import (
    ComparisonResult,
    PointComparison,
    PooledComparison,
    ServerFacts,
)
from regtrack.core.errors import BadInput
from regtrack.core.records import InvalidReason
from regtrack.core.settings import Thresholds
from regtrack.results.records import AlikeRuns, LoadedRun, StoredRun
from regtrack.workloads import server_config


def comparison_settings(
    run: StoredRun,
    baseline: str | None,
    thresholds: Thresholds | None,
    fallback: Thresholds,
) -> tuple[str | None, Thresholds]:
    """The baseline and thresholds a run's verdicts are computed with: what the caller
    asks for, else what the run stored when its command printed verdicts (so the report
    and a later `compare` say what the terminal said), else ``fallback``."""
    stored = run.printed  # thresholds None: none stored, or from another version
    return baseline or stored.baseline, thresholds or stored.thresholds or fallback


def compare(
    run: LoadedRun,
    baseline: str | None = None,
    thresholds: Thresholds | None = None,
    metrics: tuple[Metric, ...] = METRICS,
) -> ComparisonResult:
    """Every other target of a run against ``baseline`` (default: the first target).

    Trials of one run were interleaved, so repetition r of the baseline and of a
    candidate were measured side by side and can be paired (``[verdict] method``).
    """
    targets = run.run.labels
    frame = run.trials
    if frame.empty:
        raise BadInput(f"run {run.id} has no trials to compare")
    baseline = baseline or targets[0]
    if baseline not in targets:
        raise BadInput(
            f"baseline {baseline!r} is not a version of run {run.id}: "
            f"its versions are {', '.join(targets)}"
        )
    thresholds = thresholds or Thresholds()
    design = Design(paired=True, method=_method(run.run), rounds=run.run.rounds)
    result = _compare(frame, targets, baseline, design, thresholds, metrics)
    # A run merged from shards (regtrack merge): the hosts its blocks were measured on.
    hosts = tuple(sorted(frame["host"].dropna().unique())) if "host" in frame else ()
    return dataclasses.replace(result, run_id=run.id, hosts=hosts, server=server_facts(run.run))


def compare_runs(
    baseline_run: LoadedRun,
    baseline_label: str,
    candidate_run: LoadedRun,
    candidate_label: str,
    alike: AlikeRuns,
    thresholds: Thresholds | None = None,
    metrics: tuple[Metric, ...] = METRICS,
) -> ComparisonResult:
    """A candidate of one run against a stored baseline of another. Blocks pair by seed
    where the two runs share seeds (one took the other's seed offset: `ci --baseline-run`,
    a bisection's steps), else intervals are unpaired; every interval carries the two
    runs' shifts (analysis/run_shift.py, from ``alike``: the runs measured like the
    candidate's): they were not measured side by side."""
    for loaded, label in ((baseline_run, baseline_label), (candidate_run, candidate_label)):
        if label not in loaded.run.labels:
            raise BadInput(f"{label!r} is not a version of run {loaded.id}")
    base = baseline_run.trials
    cand = candidate_run.trials
    base = base[base["target"] == baseline_label].copy() if not base.empty else base
    cand = cand[cand["target"] == candidate_label].copy() if not cand.empty else cand
    if base.empty or cand.empty:
        raise BadInput("the stored baseline or the candidate has no trials to compare")
    shown_base = (
        baseline_label if baseline_label != candidate_label else f"{baseline_label} (stored)"
    )
    base["target"] = shown_base
    base, cand = syscall_breakdown.alike(base, cand)
    frame = pd.concat([base, cand], ignore_index=True)
    seeded = _block_key(frame) == "seed" and bool(set(base["seed"]) & set(cand["seed"]))
    shifts = run_shift.for_runs(alike, tuple(m.name for m in metrics))
    design = Design(paired=seeded, method=_method(candidate_run.run), shifts=shifts)
    result = _compare(frame, [shown_base, candidate_label], shown_base, design, thresholds, metrics)
    facts = server_facts(candidate_run.run)
    without = {k: v for k, v in facts.server_without.items() if k == candidate_label}
    return dataclasses.replace(
        result,
        run_shifts=shifts,
        run_id=candidate_run.id,
        baseline_run_id=baseline_run.id,
        server=dataclasses.replace(facts, server_without=without),
    )


def server_facts(run: StoredRun) -> ServerFacts:
    """What every output says of a run's servers (records.ServerFacts)."""
    table = dict(run.server)
    without = {t.label: server_config.skipped(table, t.server_config) for t in run.targets}
    return ServerFacts(
        server_config=table,
        server_without={label: names for label, names in without.items() if names},
        server_data=run.server_data.to_json() if run.server_data else None,
    )


def _method(run: StoredRun) -> str:
    """The interval a run's design allows: one look at planned repetitions (t), or a
    sequential gate that looked after every block (t-spending, regtrack.analysis.sequential)."""
    return "t-spending" if run.design == "sequential" else "t"


@dataclass(frozen=True)
class Design:
    """How a comparison's trials were measured, so how they are compared: ``paired`` by
    block (side by side, or seed-matched across runs), the interval ``method`` the run's
    design allows, the repetitions after each merge round of a sharded run (``rounds``),
    and each metric's run shift across runs (``shifts``)."""

    paired: bool
    method: str = "t"
    rounds: tuple[int, ...] = ()
    shifts: dict[str, run_shift.RunShift] | None = None


def _compare(
    frame: pd.DataFrame,
    targets: list[str],
    baseline: str,
    design: Design,
    thresholds: Thresholds | None,
    metrics: tuple[Metric, ...],
) -> ComparisonResult:
    """Per metric and candidate: one pooled answer over the sweep (what gates), and one
    record per point (where a change lives), both from seed-matched blocks.

    Multiplicity: the gating metrics share alpha (Bonferroni over metrics and candidates);
    within a metric the pooled test comes first and a point may be called a regression or
    an improvement only when the pooled test found that change (gatekeeping, then
    Bonferroni over the points), so correlated points never multiply false alarms.
    """
    thresholds = thresholds or Thresholds()
    candidates = [t for t in targets if t != baseline]
    modes = by_mode(frame)
    tables = {m.name: cells(modes, m) for m in metrics}
    tables = {name: table for name, table in tables.items() if not table.empty}
    if not tables:
        raise BadInput("no measured values to compare")
    gating_metrics = [name for name in tables if name in GATING]
    key = _block_key(frame) if design.paired else None
    records: list[PointComparison] = []
    pooled: list[PooledComparison] = []
    for metric in metrics:
        table = tables.get(metric.name)
        if table is None:
            continue
        family = (len(gating_metrics) if metric.name in GATING else 1) * max(1, len(candidates))
        judging = _judging(metric, ALPHA / family, thresholds, design)
        rows = rows_for(modes, metric)
        indexed = {(r.workload, r.point, r.target): r for r in table.itertuples()}
        points = table[["workload", "point", "point_order"]].drop_duplicates()
        for workload, wpoints in points.sort_values(["workload", "point_order"]).groupby(
            "workload", sort=False
        ):
            wrows = rows[rows["workload"] == workload]
            for candidate in candidates:
                pair = pooling.Pair(metric, workload, baseline, candidate)
                top, at_points = _answers(pair, wrows, wpoints, indexed, key, judging, design)
                pooled.append(top)
                records += at_points
    cell_frame = pd.concat(tables.values(), ignore_index=True)
    return ComparisonResult(
        syscalls=_syscalls(modes, candidates, baseline) if "syscalls_per_op" in tables else (),
        baseline=baseline,
        targets=tuple(targets),
        metrics=tuple(tables),
        cells=cell_frame,
        comparisons=tuple(records),
        pooled=tuple(pooled),
        disagreements=tuple(disagreements(records)),
        method=design.method if key else "welch-t",
        alpha=ALPHA,
        thresholds=thresholds,
    )


def _syscalls(
    modes: dict[str, pd.DataFrame], candidates: list[str], baseline: str
) -> tuple[syscall_breakdown.SyscallBreakdown, ...]:
    """Each candidate's syscalls by name against the baseline's, per workload, from the
    trials syscalls per op were read from."""
    rows = rows_for(modes, METRIC_BY_NAME["syscalls_per_op"])
    if rows.empty:
        return ()
    found = (
        syscall_breakdown.breakdown(rows, str(workload), baseline, candidate)
        for workload in rows["workload"].unique()
        for candidate in candidates
    )
    return tuple(b for b in found if b is not None)


def _judging(
    metric: Metric, alpha: float, thresholds: Thresholds, design: Design
) -> pooling.Judging:
    """How ``metric``'s intervals are computed and judged, at its share of alpha."""
    shift = (design.shifts or {}).get(metric.name)
    return pooling.Judging(
        alpha=alpha,
        threshold_pct=thresholds.for_metric(metric.name),
        method=design.method,
        shift=shift.of_difference() if shift else None,
    )


def _answers(
    pair: pooling.Pair,
    rows: pd.DataFrame,
    points: pd.DataFrame,
    by_cell: dict[tuple[str, str, str], Any],
    key: str | None,
    judging: pooling.Judging,
    design: Design,
) -> tuple[PooledComparison, list[PointComparison]]:
    """One candidate's answers for one metric of one workload: the pooled one over the
    gating points, then one per point (``by_cell``: the metric's cells, by workload, point and
    target; ``points``: the workload's, in order), at the pooled alpha split over the
    gating points."""
    labels = list(points["point"])
    ratios = pooling.ratios(rows, pair.metric, pair.baseline, pair.candidate, key)
    excluded = _excluded_points(rows, pair.metric, pair.baseline, pair.candidate, labels)
    gating_points = [p for p in labels if p not in excluded]
    # The look is the candidate's: across runs (a stored baseline, a bisection's
    # ends) only the candidate's run adds blocks; its repetitions count the looks.
    look = _look(rows[rows["target"] == pair.candidate], design.rounds)
    judging = dataclasses.replace(judging, look=look)
    blocks = pooling.Blocks(rows, ratios, key)
    top = pooling.pooled(pair, blocks, gating_points, judging, excluded)
    at_point = dataclasses.replace(judging, alpha=judging.alpha / max(1, len(gating_points)))
    records = []
    for point in labels:
        base = by_cell.get((pair.workload, point, pair.baseline))
        cand = by_cell.get((pair.workload, point, pair.candidate))
        if base is not None and cand is not None:
            by_block = ratios.get(point) if key else None
            records.append(_record(pair, point, (base, cand), by_block, at_point, top))
    return top, records


def _block_key(frame: pd.DataFrame) -> str:
    """Blocks are seed-matched pairs: the seed when every trial has one (it also matches
    a stored baseline's repetition with a candidate's), else the repetition."""
    if "seed" in frame and frame["seed"].notna().all():
        return "seed"
    return "repetition"


def _excluded_points(
    rows: pd.DataFrame, metric: Metric, baseline: str, candidate: str, points: list[str]
) -> dict[str, str]:
    """Points that must not gate: the load generator was the bottleneck in some trial."""
    if metric.measured_by != "throughput":
        return {}
    counts = dict.fromkeys(points, 0)
    for target, point, reasons in zip(
        rows["target"].tolist(), rows["point"].tolist(), rows["reasons"].tolist(), strict=True
    ):
        if target in (baseline, candidate) and point in counts:
            counts[point] += any(r.code is InvalidReason.CLIENT_BOUND for r in reasons)
    return {
        point: f"client-bound in {n} trials: the load generator, not Redis, was measured"
        for point, n in counts.items()
        if n
    }


def _look(rows: pd.DataFrame, rounds: tuple[int, ...] = ()) -> sequential.Look | None:
    """Which look of a sequential gate this is: one per block of two repetitions that
    measured this metric, counted from the repetitions, not the valid blocks; for a run
    merged from shards (``rounds``: its repetitions after each merge round), one per round."""
    if rows.empty:
        return None
    if rounds:
        return sequential.Look(len(rounds), max(1, rounds[0]))
    return sequential.Look(math.ceil((int(rows["repetition"].max()) + 1) / 2))


def _record(
    pair: pooling.Pair,
    point: str,
    sides: tuple[Any, Any],
    ratios: dict[Any, float] | None,
    judging: pooling.Judging,
    pooled: PooledComparison,
) -> PointComparison:
    """One point's answer from its two cells (``sides``: the baseline's and the
    candidate's, rows of analysis.cells): a regression or an improvement only where
    ``pooled`` found that change."""
    metric, (base, cand), threshold = pair.metric, sides, judging.threshold_pct
    change = _point_change(sides, ratios, judging)
    estimate = change.estimate_pct if change else _of_medians(base.value, cand.value)
    verdict = stats.verdict(change, threshold, metric.higher_is_better)
    verdict, _ = pooling.seeds_enough(metric, verdict, change.n if change else 0)
    problems = sorted(set(base.problems) | set(cand.problems))
    if change is None:
        problems.append("fewer than 2 valid repetitions on each side: no interval")
    if verdict in ("regression", "improvement") and pooled.verdict != verdict:
        problems.append(f"not called at one point: the pooled change is {pooled.verdict}")
        verdict = "inconclusive"
    return PointComparison(
        workload=pair.workload,
        point=point,
        baseline=pair.baseline,
        candidate=pair.candidate,
        metric=metric.name,
        unit=metric.unit,
        higher_is_better=metric.higher_is_better,
        baseline_value=base.value,
        candidate_value=cand.value,
        server_busy_pct_baseline=_none_if_nan(base.server_busy_pct),
        server_busy_pct_candidate=_none_if_nan(cand.server_busy_pct),
        change_pct=estimate,
        ci_low_pct=change.low_pct if change else None,
        ci_high_pct=change.high_pct if change else None,
        mde_pct=change.mde_pct if change else None,
        confidence=1 - judging.alpha,
        threshold_pct=threshold,
        verdict=verdict,
        extra_repetitions=(
            stats.extra_repetitions(change, threshold) if verdict == "inconclusive" else None
        ),
        n_valid=change.n if change else 0,
        method=change.method if change else None,
        gating=point in pooled.points and pooled.gating,
        n_valid_baseline=base.n_valid,
        n_valid_candidate=cand.n_valid,
        n_invalid_baseline=base.n_invalid,
        n_invalid_candidate=cand.n_invalid,
        spread_pct_baseline=_none_if_nan(base.spread_pct),
        spread_pct_candidate=_none_if_nan(cand.spread_pct),
        trusted=bool(base.trusted and cand.trusted),
        problems=tuple(problems),
    )


def _point_change(
    sides: tuple[Any, Any], ratios: dict[Any, float] | None, judging: pooling.Judging
) -> Change | None:
    """A point's interval: from its seed-matched blocks' log ratios, else unpaired from
    each side's repetitions."""
    if ratios is not None:
        return sequential.interval(
            list(ratios.values()), judging.alpha, method=judging.method, look=judging.look,
            shift=judging.shift,
        )  # fmt: skip
    base, cand = sides
    return stats.unpaired(
        list(base.by_rep.values()), list(cand.by_rep.values()), 1 - judging.alpha, judging.shift
    )


def _of_medians(base: float | None, cand: float | None) -> float | None:
    """The change of the medians: what a point without an interval says."""
    return 100.0 * (cand / base - 1.0) if base and cand is not None else None


def _none_if_nan(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)
