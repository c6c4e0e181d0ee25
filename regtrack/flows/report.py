"""Derive what the HTML report shows from the store: every run's line and history points
(read back from results.analysis_cache where nothing they depend on changed), and for the
runs whose pages are written, their comparison, function attribution and per-command
breakdown. output/report renders the result; it never opens the database.

One comparison per run feeds its index line, its run page and its history points.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from regtrack import __version__
from regtrack.analysis import (
    attribution,
    commands,
    commit_history,
    comparison,
    histograms,
    history,
    slo,
)
from regtrack.analysis.bisect_records import Attribution
from regtrack.analysis.histograms import Distribution
from regtrack.analysis.records import ComparisonResult
from regtrack.analysis.report_data import ReportData, RunPage, RunSummary, summarize
from regtrack.core.errors import BadInput
from regtrack.core.settings import Thresholds, load_thresholds
from regtrack.results import analysis_cache, bisections, loaded
from regtrack.results.records import HistoryPoint, LoadedRun, StoredRun
from regtrack.results.store import Store
from regtrack.results.stored_open_loop import open_loop
from regtrack.targets import commit_order

# Bumped when what a run's cached line or history points contain changes.
CACHE_FORMAT = 3  # 3: the line as data (analysis.report_data.RunSummary), not as shown
ATTRIBUTION_TOP = 10


def gather(store: Store, run_ids: list[int] | None = None) -> ReportData:
    """The report of every run, with pages for ``run_ids`` (default: every run)."""
    thresholds = load_thresholds(None)
    runs = store.runs()
    known = {r.id for r in runs}
    for run_id in run_ids or []:
        if run_id not in known:
            raise BadInput(f"run {run_id} is not in {store.path}: `regtrack compare --list`")
    wanted = set(run_ids) if run_ids else known
    cached, marks = analysis_cache.load(store), analysis_cache.trial_marks(store)
    summaries: list[RunSummary] = []
    points: list[HistoryPoint] = []
    pages: list[RunPage] = []
    stored = loaded.stored_runs(store, runs)
    for run in runs:
        settings = comparison.comparison_settings(stored[run.id], None, None, thresholds)
        key = _cache_key(stored[run.id], marks.get(run.id), settings)
        reused = None if run.id in wanted else _reused(cached.get(run.id), key)
        if reused is not None:
            summary, rows = reused
        else:
            measured = loaded.run(store, run.id)
            result = _compare(measured, *settings)
            server = comparison.server_facts(measured.run)
            summary = summarize(measured, result, server)
            rows = history.run_points(measured, known=result.cells if result else None)
            analysis_cache.save(store, run.id, key, summary.to_json(), rows)
            if run.id in wanted:
                pages.append(_page(store, measured, result, summary))
        summaries.append(summary)
        points += rows
    values = history.with_changes(points)
    by_commit = commit_history.series(values, commit_order.topological)
    return ReportData(
        database=str(store.path),
        summaries=summaries,
        history=values,
        by_commit=by_commit,
        commit_steps=commit_history.steps(by_commit),
        pages=pages,
        bisections=bisections.all_of(store),
    )


def _compare(
    run: LoadedRun, baseline: str | None, thresholds: Thresholds
) -> ComparisonResult | None:
    """The run's comparison as its command printed it (comparison.comparison_settings)."""
    try:
        return comparison.compare(run, baseline, thresholds)
    except BadInput:
        return None  # a run without trials (failed before measuring)


def _page(
    store: Store, run: LoadedRun, result: ComparisonResult | None, summary: RunSummary
) -> RunPage:
    page = RunPage(run=run, result=result, summary=summary)
    if result is None:
        return page
    return dataclasses.replace(
        page,
        attribution=_attribution(store, run.id, result),
        commands=commands.breakdown(loaded.command_stats(store, run.id)),
        latency=_latency(store, run.id),
        slo=slo.of_run(run, result.baseline, result.thresholds.throughput),
    )


def _latency(store: Store, run_id: int) -> list[Distribution]:
    """The run's open-loop histograms merged per version and point; none where one cannot
    be decoded (the page says nothing rather than fail the whole report)."""
    try:
        return histograms.distributions(open_loop(store, run_id))
    except BadInput:
        return []


def _attribution(store: Store, run_id: int, result: ComparisonResult) -> list[Attribution]:
    """The functions whose costs moved most, each candidate against the baseline."""
    costs = loaded.costs(store, run_id)
    if costs.costs.empty:
        return []
    found = []
    for candidate in result.targets:
        if candidate == result.baseline:
            continue
        try:
            found += attribution.attribute(costs, result.baseline, candidate, None, ATTRIBUTION_TOP)
        except BadInput:
            continue  # a side without valid instruction trials: the table says why
    return found


def _reused(
    cached: tuple[str, Any, list[HistoryPoint]] | None, key: str
) -> tuple[RunSummary, list[HistoryPoint]] | None:
    """A run's line and points as the last report derived them, if still current; a
    stored line of another shape (an older regtrack, a crafted file) is derived again
    (results.analysis_cache read the points as records already)."""
    if cached is None or cached[0] != key:
        return None
    try:
        return RunSummary.from_json(cached[1]), cached[2]
    except ValueError:  # pydantic.ValidationError
        return None


def _cache_key(run: StoredRun, marks: tuple[int, int] | None, settings: Any) -> str:
    """Everything a run's derived data depends on: its trials, status and comparison
    settings, its comparability key as derived now (a fact added to the key later moves
    its history series) and the regtrack that derived it."""
    baseline, thresholds = settings
    facts = [
        CACHE_FORMAT,
        __version__,
        run.status,
        list(marks or (0, 0)),
        baseline,
        thresholds.model_dump(),
        run.key,
    ]
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()
