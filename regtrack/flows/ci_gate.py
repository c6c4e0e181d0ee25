"""The CI gate's measuring side: candidate against a baseline measured now or stored, until decided.

The baseline is measured alongside (interleaved, seed-matched) or taken from a stored run
that was measured alike (regtrack.results.comparability). Blocks of two repetitions are
added until every gating metric's pooled answer is decided or the budget runs out; the
decision itself is ``analysis.gate``'s. The command line presents what comes back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from regtrack.analysis import comparison, gate
from regtrack.analysis.records import ComparisonResult, GateContext, GateDecision
from regtrack.bench.job import Job
from regtrack.bench.measuring import Measuring
from regtrack.core import environment
from regtrack.core.records import Progress
from regtrack.core.settings import Thresholds, load_settings
from regtrack.flows import latency_baseline, orchestrate
from regtrack.flows.latency_baseline import StoredLatency
from regtrack.plan.latency_plan import LatencyPlan
from regtrack.plan.records import Printed, RunPurpose
from regtrack.results import baselines, comparability, loaded
from regtrack.results.records import LoadedRun, StoredRun
from regtrack.results.store import Store
from regtrack.targets.versions import VersionSpec, parse_spec


@dataclass
class StoredBaseline:
    """A baseline saved with `regtrack baseline save`: its name, run and label, and what
    its run offered open loop (the rates a latency gate offers the candidate)."""

    name: str
    run_id: int
    label: str
    run: StoredRun
    open_loop: StoredLatency


@dataclass
class GateRun:
    """What one gate measured and decided, for the command line to present."""

    store: Store
    run_id: int
    run: StoredRun  # as stored once measured: how it ended
    result: ComparisonResult
    decision: GateDecision
    context: GateContext


def specs(baseline: str | None, candidate: str) -> list[VersionSpec]:
    """Baseline and candidate as labelled specs; equal labels become baseline/candidate."""
    cand = parse_spec(candidate)
    if baseline is None:
        return [cand]
    base = parse_spec(baseline)
    if base.label == cand.label:
        base = VersionSpec("baseline", base.kind, base.value, base.text)
        cand = VersionSpec("candidate", cand.kind, cand.value, cand.text)
    return [base, cand]


def stored_baseline(db: str | None, name: str, latency: LatencyPlan | None) -> StoredBaseline:
    """The saved baseline NAME, read before anything is built: an unknown name, or a
    ``latency`` gate its run cannot offer the rates of, fails fast."""
    probe = Store.open(db or load_settings().database, create=False)
    try:
        saved = baselines.named(probe, name)
        stored = StoredBaseline(
            name,
            saved.run_id,
            saved.label,
            loaded.stored_run(probe, saved.run_id),
            latency_baseline.read(probe, name, saved.run_id, saved.label),
        )
    finally:
        probe.close()
    if latency is not None:
        latency_baseline.followed(latency, stored.open_loop)
    return stored


def run(
    job: Job,
    measuring: Measuring,
    stored: StoredBaseline | None,
    thresholds: Thresholds,
    force: bool,
    budget: str,
    max_repetitions: int,
    db: str | None,
    say: orchestrate.Say,
    progress: Callable[[], AbstractContextManager[Progress]],
    wait: bool = True,
) -> GateRun:
    """Measure until decided (or the budget is spent) and decide."""
    if stored is not None and job.latency is not None:  # the baseline's rates, not its own
        job = dataclasses.replace(
            job, latency=latency_baseline.followed(job.latency, stored.open_loop)
        )
    forced = _forced(job, stored, force)
    if stored is not None and job.latency is not None:
        say(latency_baseline.offered(job.latency, stored.open_loop))
    # Sequential on a shard too: `ci --merge` decides on every shard's blocks, with
    # intervals valid at every look (a later round may add blocks).
    purpose = RunPurpose(
        "sequential",
        Printed(job.targets[0].label, thresholds, tuple(forced)),
    )

    def compare(st: Store, rid: int) -> ComparisonResult:
        if stored is None:
            return comparison.compare(loaded.run(st, rid), job.targets[0].label, thresholds)
        return comparison.compare_runs(
            _at_points(loaded.run(st, stored.run_id), job),
            stored.label,
            loaded.run(st, rid),
            job.targets[-1].label,
            loaded.alike(st, rid),
            thresholds,
        )

    if stored is not None:  # blocks pair by seed with the stored run's: it has so many
        max_repetitions = min(max_repetitions, stored.run.repetitions)
        if job.settings.repetitions > max_repetitions:  # the first block too
            settings = job.settings.model_copy(update={"repetitions": max_repetitions})
            job = dataclasses.replace(job, settings=settings)
    rule = None
    if job.shard is None:  # a shard measures its fixed share of the plan
        rule = orchestrate.sequential_rule(
            job, budget, max(max_repetitions, job.settings.repetitions), compare
        )
    store, run_id, _ = orchestrate.measure(
        job, measuring, db, say, progress, wait=wait, sequential=rule, purpose=purpose
    )
    result = compare(store, run_id)
    measured = loaded.stored_run(store, run_id)
    context = _measured(
        measured,
        forced,
        baseline=job.targets[0].spec
        if stored is None
        else f"{stored.label} (stored baseline {stored.name!r}, run {stored.run_id})",
        candidate=job.targets[-1].spec,
        workload=job.workload.name,
        stopped=(rule.stopped or "budget") if rule else f"shard {job.shard.label}",
    )
    return GateRun(store, run_id, measured, result, gate.gate(result), context)


def _at_points(run: LoadedRun, job: Job) -> LoadedRun:
    """The stored run's trials at the points this gate measures. A point only the stored
    run has (a load not asked for, open-loop trials when the gate measures none, another
    pipeline) has no candidate to pair with: left in, it would be named in the pooled
    answer and keep its metric undecided until the budget ran out."""
    points = {p.label for p in job.points} | {p.label for p in job.latency_points()}
    trials = run.trials
    if trials.empty or trials["point"].isin(points).all():
        return run
    return dataclasses.replace(run, trials=trials[trials["point"].isin(points)].copy())


def _forced(job: Job, stored: StoredBaseline | None, force: bool) -> list[str]:
    """How the stored baseline was measured otherwise than this job ([]: alike); refused
    unless ``force``."""
    if stored is None:
        return []
    here = environment.capture(job.cpus, job.loadgen.as_dict())
    measured = comparability.key(job.config(), here, job.loadgen.as_dict())
    if job.latency is not None:  # its p99 is compared across runs: the engine that timed it
        measured = {**measured, **latency_baseline.engine_fact(job.latency)}
        base = {**stored.run.key, **latency_baseline.engine_fact(stored.open_loop.plan)}
    else:
        base = dict(stored.run.key)
    return comparability.refuse_unless_forced(
        f"baseline {stored.name!r}",
        base,
        measured,
        force,
        "Measure both here (--baseline-version SPEC)",
    )


def _measured(run: StoredRun, forced: list[str], **asked: str) -> GateContext:
    """The gate's context: what was asked (``asked``) and what the stored run says of
    itself (repetitions, seeds, environment)."""
    return GateContext(
        repetitions=run.repetitions,
        seeds=run.seeds,
        environment=run.environment.shown(),
        forced=tuple(forced),
        **asked,
    )


def decide_merged(store: Store, run_id: int, thresholds: Thresholds) -> GateRun:
    """The gate on a merged run (`ci --merge`): every shard's blocks, one decision."""
    measured = loaded.run(store, run_id)
    run = measured.run
    result = comparison.compare(measured, run.targets[0].label, thresholds)
    context = _measured(
        run,
        [],
        baseline=run.targets[0].spec,
        candidate=run.targets[-1].spec,
        workload=run.workload,
        stopped="merged",
    )
    return GateRun(store, run_id, run, result, gate.gate(result), context)
