"""What the HTML report shows, as data derived from the store (flows/report.py) and
rendered by output/report, which never opens the database or computes a number.

A run's line of the index (RunSummary) is kept between reports (results.analysis_cache),
so a report after a new run derives one run's line, not every run's."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pydantic

from regtrack.analysis import metrics
from regtrack.analysis.bisect_records import Attribution
from regtrack.analysis.commands import CommandShare
from regtrack.analysis.commit_history import CommitStep
from regtrack.analysis.histograms import Distribution
from regtrack.analysis.records import ComparisonResult, ServerFacts
from regtrack.analysis.slo import SloCapacity
from regtrack.plan.latency_plan import Slo
from regtrack.results.records import LoadedRun, StoredBisection


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    """A run in a line: its versions, what it measured, how many trials were valid, its
    verdicts and what its servers ran with."""

    id: int
    created_at: str
    status: str
    status_detail: str = ""
    versions: list[dict[str, str]] = field(default_factory=list)  # label, version, spec
    workloads: list[str] = field(default_factory=list)
    metric: str = "throughput"
    runtime: str = "native"
    n_trials: int = 0
    n_invalid: int = 0
    verdicts: dict[str, int] = field(default_factory=dict)  # gating verdict -> points
    forced: list[str] = field(default_factory=list)  # a ci gate made with --force: how unlike
    server: ServerFacts = field(default_factory=ServerFacts)

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "server": self.server.to_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunSummary:
        """What a report stored, validated field by field (pydantic: nested facts too);
        a value of another shape raises ValueError and the caller derives the line again."""
        return _SUMMARY.validate_python(data)


_SUMMARY = pydantic.TypeAdapter(RunSummary)


def summarize(
    measured: LoadedRun, result: ComparisonResult | None, server: ServerFacts
) -> RunSummary:
    """The line of a run from its stored record and trials, its comparison (None: nothing
    to compare) and its servers' facts (analysis.comparison.server_facts)."""
    run, trials = measured.run, measured.trials
    verdicts = (
        Counter(r.verdict for r in result.comparisons if r.metric in metrics.GATING)
        if result is not None
        else Counter()
    )
    return RunSummary(
        id=run.id,
        created_at=run.created_at,
        status=run.status,
        status_detail=run.status_detail,
        versions=[
            {"label": t.label, "version": t.redis_version, "spec": t.spec} for t in run.targets
        ],
        workloads=sorted(set(trials["workload"])) if len(trials) else [],
        metric=run.metric,
        runtime=run.runtime,
        n_trials=len(trials),
        n_invalid=int((~trials["valid"].astype(bool)).sum()) if len(trials) else 0,
        verdicts=dict(verdicts),
        forced=list(run.printed.forced),
        server=server,
    )


@dataclass(frozen=True, kw_only=True)
class RunPage:
    """What a run's page shows besides its line: the run as loaded (its command, versions,
    machine, load generator and trials), its comparison (None: nothing to compare), the
    functions whose costs moved and the per-command breakdown."""

    run: LoadedRun
    result: ComparisonResult | None
    summary: RunSummary
    attribution: list[Attribution] = field(default_factory=list)
    commands: list[CommandShare] = field(default_factory=list)
    # Open-loop trials: each version's merged histogram per point, and the capacity at
    # the run's latency target (--slo) when it had one.
    latency: list[Distribution] = field(default_factory=list)
    slo: tuple[Slo, list[SloCapacity]] | None = None


@dataclass(frozen=True, kw_only=True)
class ReportData:
    """Everything one report shows: every run's line (newest first), the history points
    with their changes, along commits too, the pages of the runs asked for, and every
    bisection with the runs it measured."""

    database: str
    summaries: list[RunSummary]
    history: pd.DataFrame  # analysis.history.with_changes
    by_commit: pd.DataFrame  # analysis.commit_history.series of the history
    commit_steps: list[CommitStep]  # analysis.commit_history.steps of by_commit
    pages: list[RunPage]
    bisections: list[StoredBisection]
