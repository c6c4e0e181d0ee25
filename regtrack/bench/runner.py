"""Execute a plan: start each server pinned, set up, measure, store each trial at once.

Every trial is stored the moment it ends, valid or not. Whatever stops the run (a failure,
Ctrl-C, SIGTERM) stops the servers and leaves the run marked with what happened.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis

from regtrack.bench import driver_trial, failing_loadgen, latency_trial, lifecycle_trial, trial
from regtrack.bench.callgrind import protocol
from regtrack.bench.callgrind.protocol import Callgrind
from regtrack.bench.job import Job
from regtrack.bench.measuring import Measuring
from regtrack.bench.plan import PlannedTrial, Visit, trial_count
from regtrack.bench.runtimes.base import RunningServer
from regtrack.bench.servers import ServerDied, serve, set_up
from regtrack.core import interrupts
from regtrack.core.errors import CannotMeasure
from regtrack.core.records import FunctionCost, InvalidReason, LoadSpec, Progress, TrialRecord
from regtrack.results.store import Store
from regtrack.targets.versions import Target
from regtrack.workloads import points
from regtrack.workloads.driver import DriverWorkload
from regtrack.workloads.lifecycle import LifecycleWorkload


def preflight(
    job: Job, measuring: Measuring, store: Store, run_id: int, progress: Progress
) -> dict[str, int]:
    """Start each target once, record what it reports, and fail before measuring anything."""
    ids: dict[str, int] = {}
    for position, target in enumerate(job.targets):
        progress.phase(f"checking {target.label}")
        with measuring.plain_server(job, target, run_id) as server:
            identity = server.server_identity()
        if server.access.level == "open":
            progress.note(
                f"warning: {target.label} (Redis {server.version}) knows no ACL users, so "
                "while it runs any local user can CONFIG SET it; measure it only on a "
                "machine nobody else uses"
            )
        points.check_version(job.workload, target.label, server.version)
        ids[target.label] = store.add_target(run_id, position, target, identity)
    return ids


def _finish(store: Store, run_id: int, status: str, detail: str) -> None:
    """Record how a run ended, unless the database is what failed (then the first error
    is the one to show, and the run stays 'running' until resumed)."""
    with contextlib.suppress(CannotMeasure):
        store.finish_run(run_id, status, detail)


def remaining(visits: list[Visit], done: set[int]) -> list[Visit]:
    """The plan without the trials already stored (for --resume); empty visits dropped."""
    out = []
    for visit in visits:
        left = tuple(t for t in visit.trials if t.seq not in done)
        if left:
            out.append(dataclasses.replace(visit, trials=left))
    return out


@dataclass
class BlockRule:
    """When a run adds repetitions: until ``needed()`` says no mode needs more (every
    answer is in), the time budget would be overrun by another block, or
    ``max_repetitions`` is reached.

    Blocks are ``step`` repetitions (2: A B then B A, balanced against drift); the runner
    asks ``needed`` after each block (which modes' metrics are still undecided; later
    blocks measure only those) and never decides anything itself."""

    needed: Callable[[Store, int], tuple[str, ...]]
    budget_s: float
    max_repetitions: int
    step: int = 2
    stopped: str = ""  # why it stopped: decided, budget, max-repetitions
    modes: tuple[str, ...] = ()  # what the next block measures


def execute(
    job: Job,
    measuring: Measuring,
    store: Store,
    run_id: int,
    progress: Progress | None = None,
    resume: bool = False,
    sequential: BlockRule | None = None,
) -> str:
    """Run every visit of the plan (only the trials not stored yet, when resuming) through
    ``measuring``, adding blocks of repetitions while ``sequential`` asks for them;
    returns the run's final status: complete, or incomplete when a server died."""
    progress = progress or Progress()
    visits = job.visits()
    if resume:
        visits = remaining(visits, store.trial_seqs(run_id))
    lost: list[str] = []
    failing = failing_loadgen.SameFailure(frozenset(t.label for t in job.targets))
    try:
        if resume:
            target_ids = {t["label"]: t["id"] for t in store.targets(run_id)}
        else:
            target_ids = preflight(job, measuring, store, run_id, progress)
        total = trial_count(visits)
        progress.started(total)
        started = time.monotonic()
        while True:
            for visit in visits:
                interrupts.check()
                died = _one_visit(job, measuring, store, run_id, visit, target_ids, progress)
                lost.extend([died] if died else [])
                failing_loadgen.check(failing, store, run_id, visit)
            if sequential is None or not _another_block(
                job, store, run_id, sequential, started, progress
            ):
                break
            first = job.settings.repetitions
            job = job.extended(first + sequential.step, sequential.modes)
            store.update_config(run_id, job.config())
            visits = job.visits(first)
            total += trial_count(visits)
            progress.started(total)
    except KeyboardInterrupt:
        _finish(store, run_id, "interrupted", "stopped by the user; measured trials are kept")
        raise
    except CannotMeasure as exc:
        _finish(store, run_id, "failed", str(exc))
        raise
    except BaseException as exc:
        _finish(store, run_id, "failed", f"{type(exc).__name__}: {exc}")
        raise
    return _finished(job, store, run_id, lost)


def _one_visit(
    job: Job,
    measuring: Measuring,
    store: Store,
    run_id: int,
    visit: Visit,
    target_ids: dict[str, int],
    progress: Progress,
) -> str | None:
    """Measure one visit; the server death that cut it short, if one did (the run goes on
    without the rest of that visit)."""
    by_label = {t.label: t for t in job.targets}
    try:
        if visit.together:
            measuring.paired_visit(job, store, run_id, visit, by_label, target_ids, progress)
        else:
            target = by_label[visit.target]
            measuring.visit(job, store, run_id, visit, target, target_ids, progress)
    except ServerDied as exc:
        progress.note(f"{exc}; the rest of that visit is skipped, the run goes on")
        return str(exc)
    return None


def _finished(job: Job, store: Store, run_id: int, lost: list[str]) -> str:
    """The run's status once every visit was tried: complete, or incomplete with what
    is missing and why (servers that died), which --resume measures."""
    missing = trial_count(remaining(job.visits(), store.trial_seqs(run_id)))
    if missing:
        detail = (
            f"{missing} planned trials not measured ({'; '.join(dict.fromkeys(lost))}); "
            f"regtrack run --resume {run_id} measures them"
        )
        store.finish_run(run_id, "incomplete", detail)
        return "incomplete"
    store.finish_run(run_id, "complete")
    return "complete"


def _another_block(
    job: Job, store: Store, run_id: int, rule: BlockRule, started: float, progress: Progress
) -> bool:
    """Whether to measure one more block: not decided, within budget and cap."""
    reps = job.settings.repetitions
    rule.modes = rule.needed(store, run_id)
    if not rule.modes:
        rule.stopped = "decided"
        return False
    if reps + rule.step > rule.max_repetitions:
        rule.stopped = "max-repetitions"
        progress.note(f"undecided after {reps} repetitions, the most allowed (--max-repetitions)")
        return False
    elapsed = time.monotonic() - started
    per_block = elapsed / max(1, reps) * rule.step
    if elapsed + per_block > rule.budget_s:
        rule.stopped = "budget"
        progress.note(
            f"undecided after {reps} repetitions ({elapsed / 60:.1f} min); another block "
            f"(~{per_block / 60:.1f} min) would overrun the {rule.budget_s / 60:.0f} min budget"
        )
        return False
    progress.note(
        f"undecided after {reps} repetitions: measuring {rule.step} more ({', '.join(rule.modes)})"
    )
    return True


def _trial(
    job: Job,
    server: RunningServer,
    session: Callgrind | None,
    planned: PlannedTrial,
    specs: list[LoadSpec],
    mode: str,
) -> tuple[TrialRecord, list[FunctionCost] | None]:
    """One trial's record (and its function costs, under callgrind). A server that died,
    or that refuses us (max clients, a stalled server timing out), makes an invalid
    trial that says why; other failures are the environment's."""
    try:
        if isinstance(job.workload, LifecycleWorkload) and session is None:
            return _lifecycle_trial(job, server, planned), None
        if isinstance(job.workload, DriverWorkload) and session is None:
            return driver_trial.driver_trial(
                job.context, job.loadgen, server, planned, job.workload
            ), None
        if mode == latency_trial.MODE:
            return _latency_trial(job, server, planned, specs), None
        if session is None:
            return trial.throughput_trial(job.context, server, planned, specs), None
        record, profile = protocol.instruction_trial(job.context, server, planned, specs, session)
        return record, protocol.function_costs(profile, session.weights) if profile else None
    except (redis.RedisError, CannotMeasure, OSError) as exc:
        alive = server.alive()
        if alive and not isinstance(exc, redis.RedisError):
            raise
        code = InvalidReason.SERVER_DIED if not alive else InvalidReason.SERVER_REFUSED
        record = trial.new_record(planned, mode)
        record.mark_invalid(code, " ".join(str(exc).split())[:200])
        return record, None


def _latency_trial(
    job: Job, server: RunningServer, planned: PlannedTrial, specs: list[LoadSpec]
) -> TrialRecord:
    """An open-loop trial at its point's rate, the same arrivals for every version of a
    repetition (the engine's seed is the repetition's)."""
    assert job.latency is not None and job.engine is not None, "a plan with latency trials"
    offered = latency_trial.offered(job.latency, job.settings.seed_offset or 0, planned)
    return latency_trial.latency_trial(job.context, job.engine, server, planned, specs, offered)


def _lifecycle_trial(job: Job, server: RunningServer, planned: PlannedTrial) -> TrialRecord:
    """A lifecycle's capacity (a throughput visit) or its task latency at the point's
    rate (a latency visit), the same arrivals for every version of a repetition."""
    assert job.engine is not None and isinstance(job.workload, LifecycleWorkload)
    arrivals = lifecycle_trial.arrivals_of(job, planned)
    return lifecycle_trial.lifecycle_trial(
        job.context, job.engine, server, planned, job.workload, arrivals
    )


def run_visit(
    job: Job,
    store: Store,
    run_id: int,
    visit: Visit,
    target: Target,
    target_ids: dict[str, int],
    progress: Progress,
) -> None:
    """One server process (one visit): start it pinned, set it up, run its planned trials,
    store each. The real Measuring's visit (bench/real.py); tests/fakebench.py models it."""
    rep = f"rep {visit.repetition + 1}/{job.settings.repetitions}"
    under = " under callgrind" if visit.mode == "instructions" else ""
    progress.phase(f"{rep} · starting {target.label}{under}")
    seed = job.seed(visit.repetition)
    with serve(job, target, visit.mode, run_id, seed) as (server, session):
        progress.phase(f"{rep} · setting up {target.label}{under}")
        # Open-loop trials send their keys as the engine spells them (as memtier does).
        tool = job.engine.name if visit.mode == latency_trial.MODE and job.engine else None
        saved = set_up(job, server, f"redis-server of {target.label}{under}", tool)
        for planned in visit.trials:
            progress.phase(f"{rep} · {target.label} · {planned.point.label}{under}")
            specs = points.load_specs(job.workload, planned.point, tool or job.loadgen.name, saved)
            if server.delay is not None:
                server.delay.window()  # the trial's window starts here
            record, functions = _trial(job, server, session, planned, specs, visit.mode)
            if server.delay is not None:
                server.delay.judge(record)
            record.seed = seed
            died = not server.alive()
            if died:
                trial.mark_died(record, f"redis-server of {target.label} exited during the trial")
            store.add_trial(run_id, target_ids[target.label], record, functions)
            progress.trial_done(record)
            interrupts.check()
            if died:
                raise ServerDied(
                    f"redis-server of {target.label} exited during {planned.point.label}{under}"
                )
