"""Execute a plan: start each server pinned, set up, measure, validate, store each trial.

Every trial is stored the moment it ends, valid or not. Whatever stops the run (a failure,
Ctrl-C, SIGTERM) stops the servers and leaves the run marked with what happened.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import redis

from regtrack import serverstats, workloads
from regtrack.config import RunSettings, Workload
from regtrack.cpus import CpuPlan
from regtrack.errors import CannotMeasure, Interrupted
from regtrack.loadgen import redis_benchmark
from regtrack.loadgen.base import LoadgenBinary
from regtrack.plan import PlannedTrial, Visit, interleave, trial_count
from regtrack.procs import CpuTimes, contention_pct
from regtrack.records import TrialRecord
from regtrack.runtimes.base import RunningServer
from regtrack.runtimes.native import native_server
from regtrack.store import Store
from regtrack.versions import Target


@dataclass
class Progress:
    """Callbacks the presentation layer hooks into; the runner never prints."""

    started: Callable[[int], None] = lambda total: None
    phase: Callable[[str], None] = lambda text: None
    trial_done: Callable[[TrialRecord], None] = lambda record: None


@dataclass
class Job:
    """Everything one run needs, decided before the first server starts."""

    targets: list[Target]
    workload: Workload
    settings: RunSettings
    cpus: CpuPlan
    loadgen: LoadgenBinary
    points: list[workloads.Point] = field(init=False)

    def __post_init__(self) -> None:
        self.points = workloads.points(self.workload)

    def visits(self) -> list[Visit]:
        return interleave([t.label for t in self.targets], self.points, self.settings.repetitions)

    def config(self) -> dict[str, Any]:
        return {
            "settings": self.settings.model_dump(),
            "workload": self.workload.model_dump(),
            "cpus": self.cpus.as_dict(),
            "targets": [t.as_dict() for t in self.targets],
            "points": [p.label for p in self.points],
        }


def _start(job: Job, target: Target):
    if not target.binary:
        raise CannotMeasure(f"version {target.label}: no redis-server binary to run")
    return native_server(target.binary, job.cpus.server, timeout=job.settings.server_start_timeout)


def preflight(job: Job, store: Store, run_id: int, progress: Progress) -> dict[str, int]:
    """Start each target once, record what it reports, and fail before measuring anything."""
    ids: dict[str, int] = {}
    for position, target in enumerate(job.targets):
        progress.phase(f"checking {target.label}")
        with _start(job, target) as server:
            identity = server.server_identity()
        ids[target.label] = store.add_target(run_id, position, target, identity)
    return ids


def measure(job: Job, server: RunningServer, planned: PlannedTrial) -> TrialRecord:
    """One trial: warm-up (not recorded), server counters, timed run, counters, validity."""
    params = planned.point.params
    record = TrialRecord(
        seq=planned.seq,
        repetition=planned.repetition,
        target_label=planned.target,
        workload=planned.point.workload,
        point=planned.point.label,
        params=params,
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    host, port, cpus = server.host, server.port, job.cpus.client
    warm = redis_benchmark.warm_up(job.loadgen, host, port, cpus, params, job.settings.warmup)
    record.warmup_s = warm.seconds
    if warm.rate is None:
        failed = warm.failure
        assert failed is not None
        record.argv, record.raw_output, record.exit_code = (
            failed.argv,
            failed.raw_output,
            failed.exit_code,
        )
        record.mark_invalid(f"warm-up failed: {failed.problem}")
        if not server.alive():
            record.mark_invalid("the server exited during the warm-up")
        return record

    client = server.client()
    try:
        before = serverstats.snapshot(client)
        server_cpus_before = CpuTimes.read(job.cpus.server)
        client_cpus_before = CpuTimes.read(job.cpus.client)
        result = redis_benchmark.run_for(
            job.loadgen, host, port, cpus, params, job.settings.duration, warm.rate
        )
        server_cpus_after = CpuTimes.read(job.cpus.server)
        client_cpus_after = CpuTimes.read(job.cpus.client)
        after = serverstats.snapshot(client) if server.alive() else None
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        record.mark_invalid(f"lost the server during the trial: {exc}")
        return record
    finally:
        client.close()

    record.argv, record.raw_output, record.exit_code = (
        result.argv,
        result.raw_output,
        result.exit_code,
    )
    record.requests = result.requests
    record.wall_s = result.wall_s
    record.ops_per_sec = result.ops_per_sec
    record.latency_ms = result.latency_ms
    record.client_cpu_pct = result.client_cpu_pct
    record.steal_pct = max(
        server_cpus_after.steal_pct_since(server_cpus_before),
        client_cpus_after.steal_pct_since(client_cpus_before),
    )
    record.valid = True
    if result.problem:
        record.mark_invalid(result.problem)
    if after is None:
        record.mark_invalid("the server exited during the trial")
        return record

    delta = serverstats.delta(before, after)
    record.server_stats = delta
    record.server_cpu_pct = delta["server_cpu_pct"]
    record.keyspace_hits = int(delta["keyspace_hits"])
    record.keyspace_misses = int(delta["keyspace_misses"])
    record.error_replies = int(delta["error_replies"])
    command = str(params["command"]).lower()
    record.server_calls = int(delta["commands"].get(command, {}).get("calls", 0))
    for problem in workloads.reply_problems(planned.point, delta):
        record.mark_invalid(problem)
    if not result.problem and record.server_calls < result.requests:
        record.mark_invalid(
            f"the server counted {record.server_calls} {command.upper()} calls, "
            f"the load generator claims {result.requests}"
        )
    record.contention_pct = max(
        contention_pct(
            server_cpus_before,
            server_cpus_after,
            delta["server_cpu_s"],
            result.wall_s,
            len(job.cpus.server),
        ),
        contention_pct(
            client_cpus_before, client_cpus_after, result.client_cpu_s, result.wall_s, len(cpus)
        ),
    )
    if record.contention_pct > job.settings.contention_limit_pct:
        record.mark_invalid(
            f"contended: other processes used {record.contention_pct:.0f}% of the pinned CPUs "
            f"(limit {job.settings.contention_limit_pct:.0f}%), so stop other work on this machine"
        )
    capacity = 100.0 * min(int(params.get("threads", 1)), len(job.cpus.client))
    threshold = job.settings.client_bound_cpu_pct * capacity / 100.0
    if record.client_cpu_pct >= threshold:
        record.mark_invalid(
            f"client-bound: the load generator used {record.client_cpu_pct:.0f}% CPU "
            f"(limit {threshold:.0f}%), so this measures the client, not Redis"
        )
    return record


def execute(job: Job, store: Store, run_id: int, progress: Progress | None = None) -> str:
    """Run every visit of the plan; returns the run's final status."""
    progress = progress or Progress()
    visits = job.visits()
    by_label = {t.label: t for t in job.targets}
    try:
        target_ids = preflight(job, store, run_id, progress)
        progress.started(trial_count(visits))
        for visit in visits:
            _run_visit(job, store, run_id, visit, by_label[visit.target], target_ids, progress)
    except (KeyboardInterrupt, Interrupted):
        store.finish_run(run_id, "interrupted", "stopped by the user; measured trials are kept")
        raise
    except CannotMeasure as exc:
        store.finish_run(run_id, "failed", str(exc))
        raise
    except BaseException as exc:
        store.finish_run(run_id, "failed", f"{type(exc).__name__}: {exc}")
        raise
    store.finish_run(run_id, "complete")
    return "complete"


def _run_visit(
    job: Job,
    store: Store,
    run_id: int,
    visit: Visit,
    target: Target,
    target_ids: dict[str, int],
    progress: Progress,
) -> None:
    progress.phase(f"rep {visit.repetition + 1}: starting {target.label}")
    with _start(job, target) as server:
        progress.phase(f"rep {visit.repetition + 1}: populating {target.label}")
        client = server.client()
        try:
            workloads.populate(client, job.workload)
        finally:
            client.close()
        for planned in visit.trials:
            progress.phase(
                f"rep {visit.repetition + 1}/{job.settings.repetitions} · {target.label} · "
                f"{planned.point.label}"
            )
            start = time.monotonic()
            record = measure(job, server, planned)
            record.server_stats.setdefault("trial_elapsed_s", time.monotonic() - start)
            store.add_trial(run_id, target_ids[target.label], record)
            progress.trial_done(record)
            if not server.alive():
                raise CannotMeasure(
                    f"redis-server of {target.label} exited during {planned.point.label}; "
                    "the trials measured so far are stored"
                )
