"""Answers read back from a stored database: a run's comparison, one across two runs, the
functions behind a change, the list of runs and a point's history. Each loads what it needs
from results and hands it to analysis, so a command only parses, calls one of these and
presents (compare, explain, history, and run's closing table).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

from regtrack.analysis import attribution, commit_history, comparison, histograms, history, slo
from regtrack.analysis.bisect_records import Attribution
from regtrack.analysis.commit_history import CommitStep
from regtrack.analysis.histograms import Distribution
from regtrack.analysis.metrics import METRIC_BY_NAME
from regtrack.analysis.records import ComparisonResult
from regtrack.analysis.slo import SloCapacity
from regtrack.core.errors import BadInput
from regtrack.core.settings import Thresholds, load_thresholds
from regtrack.plan.latency_plan import Slo
from regtrack.results import comparability, loaded
from regtrack.results.store import Store
from regtrack.results.stored_open_loop import open_loop
from regtrack.targets import commit_order


def compared(
    store: Store, run_id: int, baseline: str | None, thresholds: Thresholds
) -> ComparisonResult:
    """Every version of run ``run_id`` against ``baseline`` (default: its first)."""
    return comparison.compare(loaded.run(store, run_id), baseline, thresholds)


def within_run(
    store: Store, run_id: int, baseline: str | None, threshold: float | None
) -> ComparisonResult:
    """`compare`: at the baseline and thresholds the run printed, unless given."""
    asked = load_thresholds(threshold) if threshold is not None else None
    baseline, thresholds = printed_settings(store, run_id, baseline, asked)
    return compared(store, run_id, baseline, thresholds)


def printed_settings(
    store: Store, run_id: int, baseline: str | None = None, thresholds: Thresholds | None = None
) -> tuple[str | None, Thresholds]:
    """The baseline and thresholds run ``run_id``'s command printed its verdicts with,
    where not given (comparison.comparison_settings)."""
    run = loaded.stored_run(store, run_id)
    return comparison.comparison_settings(run, baseline, thresholds, load_thresholds(None))


def across_runs(
    store: Store,
    baseline_run: int,
    baseline: str | None,
    run_id: int,
    candidate: str | None,
    threshold: float | None,
    force: bool,
) -> ComparisonResult:
    """A candidate of run ``run_id`` against a baseline of run ``baseline_run``: refused
    where the runs were not measured alike, unless ``force`` (then said in the result)."""
    forced = comparability.refuse_unless_forced(
        f"run {baseline_run}",
        loaded.stored_run(store, baseline_run).key,
        loaded.stored_run(store, run_id).key,
        force,
        "Compare versions measured in one run",
    )
    result = comparison.compare_runs(
        loaded.run(store, baseline_run),
        baseline or store.targets(baseline_run)[0]["label"],
        loaded.run(store, run_id),
        candidate or store.targets(run_id)[0]["label"],
        loaded.alike(store, run_id),
        load_thresholds(threshold),
    )
    return dataclasses.replace(result, forced=tuple(forced))


def functions(
    store: Store,
    run_id: int | None,
    baseline: str,
    candidate: str,
    point: str | None,
    top: int,
    metric: str = "instructions",
) -> list[dict[str, Any]]:
    """`explain`: the functions whose instructions (or simulated cycles) per operation
    moved, per point."""
    costs = loaded.costs(store, run_id or store.latest_run_id())
    return attribution.attribute(costs, baseline, candidate, point, top, metric=metric)


def latency(store: Store, run_id: int | None) -> list[Distribution]:
    """`latency`: each version's open-loop latency per point, from the merged histograms
    of its valid trials."""
    run = run_id or store.latest_run_id()
    found = histograms.distributions(open_loop(store, run))
    if not found:
        raise BadInput(
            f"run {run} has no valid open-loop trial: measure with regtrack run --rate or --load"
        )
    return found


def slo_capacities(
    store: Store, run_id: int, baseline: str | None, thresholds: Thresholds
) -> tuple[Slo, list[SloCapacity]] | None:
    """Each version's capacity at the run's latency target (--slo), or None without one."""
    return slo.of_run(loaded.run(store, run_id), baseline, thresholds.throughput)


def behind_changes(
    store: Store, run_id: int, result: ComparisonResult, top: int = 5
) -> dict[str, list[Attribution]]:
    """Per candidate, the functions whose instructions per op moved at the first point
    (none for a run that did not count instructions, or a side with no valid trial)."""
    out: dict[str, list[Attribution]] = {}
    if "instructions_per_op" not in result.metrics:
        return out
    costs = loaded.costs(store, run_id)
    if costs.costs.empty:
        return out
    for candidate in result.targets:
        if candidate == result.baseline:
            continue
        first = next((r.point for r in result.comparisons if r.candidate == candidate), None)
        try:
            out[candidate] = attribution.attribute(costs, result.baseline, candidate, first, top)
        except BadInput:
            continue
    return out


@dataclass(frozen=True)
class RunLine:
    """One run as `compare --list` shows it."""

    id: int
    created_at: str
    status: str
    n_trials: int
    labels: tuple[str, ...]


def runs(store: Store) -> list[RunLine]:
    """Every run of the database, newest first."""
    return [
        RunLine(r.id, r.created_at, r.status, r.n_trials,
                tuple(t["label"] for t in store.targets(r.id)))
        for r in store.runs()
    ]  # fmt: skip


@dataclass(frozen=True)
class History:
    """A point's values along commits (with the steps found) or along runs."""

    by: Literal["commit", "run"]
    rows: pd.DataFrame
    unit: str
    steps: list[CommitStep] = dataclasses.field(default_factory=list)


def point_history(
    store: Store,
    metric: str,
    by: Literal["commit", "run"],
    workload: str | None = None,
    point: str | None = None,
) -> History:
    """`history`: the trusted values of ``metric``, narrowed to a workload and point."""
    frame = history.points(loaded.runs(store), (metric,))
    for column, wanted in (("workload", workload), ("point", point)):
        if wanted is not None and not frame.empty:
            frame = frame[frame[column] == wanted]
    if frame.empty:
        raise BadInput(f"no trusted {metric} values in {store.path} for that workload and point")
    unit = METRIC_BY_NAME[metric].unit
    if by == "run":
        return History("run", frame, unit)
    rows = commit_history.series(frame, commit_order.topological)
    if rows.empty:
        raise BadInput("no measured commits (tags, branches, commits, ranges): try --by run")
    return History("commit", rows, unit, commit_history.steps(rows))
