"""One trial against a running server: the measured window and the evidence around it.

Two kinds of trial share one window: the server's own counters (INFO deltas), CPU use of
the pinned CPUs, and the server's read/write syscalls are taken around every load
generator run. A throughput trial is warmed up and timed here; an instruction trial runs
a fixed request count between callgrind's zero and dump (callgrind/protocol.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis

from regtrack.bench import kernel_calls, loadgen, serverstats
from regtrack.bench.loadgen import builtin, redis_benchmark
from regtrack.bench.loadgen.base import Aim, LoadgenBinary, LoadgenResult
from regtrack.bench.plan import PlannedTrial
from regtrack.bench.runtimes.base import RunningServer
from regtrack.core import others, procs
from regtrack.core.cpus import CpuPlan
from regtrack.core.procs import CpuTimes, process_cpu_seconds
from regtrack.core.records import InvalidReason, LoadSpec, ServerDelta, TrialRecord
from regtrack.core.settings import RunSettings
from regtrack.workloads import points
from regtrack.workloads.driver import DriverWorkload
from regtrack.workloads.lifecycle import LifecycleWorkload
from regtrack.workloads.model import GetPipelineWorkload, Workload


@dataclass(frozen=True)
class Context:
    """What every trial of a run shares."""

    settings: RunSettings
    cpus: CpuPlan
    loadgen: LoadgenBinary
    workload: Workload

    def aim(self, server: RunningServer, cpus: tuple[int, ...] | None = None) -> Aim:
        """The load generator aimed at ``server``, pinned to the client CPUs (or ``cpus``,
        a duet side's)."""
        host, port = server.aimed_at
        floor = server.delay.rtt_us if server.delay is not None else 0
        return Aim(
            self.loadgen, host, port, cpus or self.cpus.client, server.alive, server.pid,
            reply_floor_us=floor,
        )  # fmt: skip

    @property
    def counts_gets(self) -> bool:
        """GET sweeps count operations on the server (GET calls); mixes trust the load
        generator's count, because commands inside scripts are counted by the server too."""
        return isinstance(self.workload, GetPipelineWorkload)


def syscalls(pid: int | None) -> tuple[int, int] | None:
    """(read, write) syscalls the process made so far, from /proc/<pid>/io."""
    if pid is None:
        return None
    try:
        fields = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/io").read_text().splitlines()
        )
        return int(fields["syscr"]), int(fields["syscw"])
    except (OSError, KeyError, ValueError):
        return None


def new_record(planned: PlannedTrial, mode: str) -> TrialRecord:
    return TrialRecord(
        seq=planned.seq,
        repetition=planned.repetition,
        target_label=planned.target,
        workload=planned.point.workload,
        point=planned.point.label,
        params=planned.point.params,
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        mode=mode,
    )


def mark_died(record: TrialRecord, detail: str) -> None:
    """Say the server died, once: whichever step noticed first wrote it."""
    if not record.has_reason(InvalidReason.SERVER_DIED):
        record.mark_invalid(InvalidReason.SERVER_DIED, detail)


def _reply_checks(
    ctx: Context, record: TrialRecord, delta: ServerDelta, result: LoadgenResult
) -> None:
    """The server's counters against what the load generator says it did."""
    if ctx.counts_gets:
        record.server_calls = int(delta.calls("get"))
        for problem in points.reply_problems(delta):
            record.mark_invalid(problem.code, problem.detail)
        if not result.problem and record.server_calls < result.requests:
            record.mark_invalid(
                InvalidReason.CALLS_SHORT,
                f"the server counted {record.server_calls} GET calls, "
                f"the load generator claims {result.requests}",
            )
        return
    assert not isinstance(ctx.workload, GetPipelineWorkload)
    record.server_calls = int(delta.total_calls)
    if isinstance(ctx.workload, DriverWorkload):
        return  # a user's library may answer errors by design (BUSYGROUP): kept, not judged
    if isinstance(ctx.workload, LifecycleWorkload):
        # no ratios to hold it to: a lifecycle's commands follow its tasks
        for problem in points.error_problems(delta):
            record.mark_invalid(problem.code, problem.detail)
        return
    for problem in points.mix_problems(ctx.workload, delta, result.requests_per_process):
        record.mark_invalid(problem.code, problem.detail)


@dataclass(frozen=True)
class _Evidence:
    """What is read of the server and the CPUs on each side of the load: INFO, the
    server's syscalls, the pinned CPUs' times, the server process's CPU time, and every
    process's (for the others' share of the pinned CPUs)."""

    stats: dict[str, Any] | None
    io: tuple[int, int] | None
    server_cpus: CpuTimes
    client_cpus: CpuTimes
    process_cpu_s: float | None
    processes: others.Snapshot

    @classmethod
    def before(cls, ctx: Context, server: RunningServer, client: redis.Redis) -> _Evidence:
        stats, io = serverstats.snapshot(client), syscalls(server.pid)
        server_cpus, client_cpus = CpuTimes.read(ctx.cpus.server), CpuTimes.read(ctx.cpus.client)
        processes = every_process(server)
        # The server's CPU time is read right around the load generator, so that the
        # share is of the measured run alone (not of callgrind's zero/dump round trips).
        cpu = process_cpu_seconds(server.pid) if server.pid else None
        return cls(stats, io, server_cpus, client_cpus, cpu, processes)

    @classmethod
    def after(cls, ctx: Context, server: RunningServer, client: redis.Redis) -> _Evidence:
        cpu = process_cpu_seconds(server.pid) if server.pid else None
        processes = every_process(server)
        server_cpus, client_cpus = CpuTimes.read(ctx.cpus.server), CpuTimes.read(ctx.cpus.client)
        io = syscalls(server.pid)
        stats = serverstats.snapshot(client) if server.alive() else None
        return cls(stats, io, server_cpus, client_cpus, cpu, processes)


def every_process(*servers: RunningServer) -> others.Snapshot:
    """Every process now, for the others' share of the pinned CPUs: regtrack's own and
    these servers' (ours wherever they run: a container's is not our child) are ours."""
    return others.Snapshot.read(s.pid for s in servers if s.pid)


def measured_window(
    ctx: Context,
    server: RunningServer,
    record: TrialRecord,
    run: Callable[[], LoadgenResult],
    count_calls: bool = True,
) -> LoadgenResult | None:
    """Run the load once with the server's evidence taken around it.

    Fills every figure of ``record`` both trial kinds share; returns the load generator's
    result, or None if the server was lost. ``count_calls``: the server's syscalls by name
    around the load (an instruction trial counts its windows itself, without its dumps).
    """
    client = server.client()
    counter = kernel_calls.start(server.pid) if count_calls else None
    try:
        calls_before = counter.read() if counter else None
        before = _Evidence.before(ctx, server, client)
        result = run()
        after = _Evidence.after(ctx, server, client)
        if counter:
            record.syscalls_by_name = kernel_calls.since(calls_before, counter.read())
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        record.mark_invalid(InvalidReason.SERVER_LOST, str(exc))
        return None
    finally:
        client.close()
        if counter:
            counter.close()
    _from_loadgen(record, result, before, after)
    if after.stats is None:
        record.mark_invalid(InvalidReason.SERVER_DIED, "redis-server exited during the trial")
        return None
    assert before.stats is not None
    delta = serverstats.delta(before.stats, after.stats)
    _from_server(ctx, record, result, delta, before, after)
    return result


def _from_loadgen(
    record: TrialRecord, result: LoadgenResult, before: _Evidence, after: _Evidence
) -> None:
    """What the load generator measured, and the steal both sides' CPUs saw."""
    record.argv, record.raw_output = result.argv, result.raw_output
    record.exit_code, record.requests = result.exit_code, result.requests
    record.wall_s = result.wall_s
    record.ops_per_sec = result.ops_per_sec
    record.latency_ms = result.latency_ms
    record.client_cpu_pct = result.client_cpu_pct
    record.per_command = result.per_command
    record.steal_pct = max(
        after.server_cpus.steal_pct_since(before.server_cpus),
        after.client_cpus.steal_pct_since(before.client_cpus),
    )
    record.valid = True
    if result.problem:
        record.mark_invalid(InvalidReason.LOADGEN_FAILED, result.problem)


def _from_server(
    ctx: Context,
    record: TrialRecord,
    result: LoadgenResult,
    delta: ServerDelta,
    before: _Evidence,
    after: _Evidence,
) -> None:
    """What the server says happened (INFO deltas, CPU, syscalls), and whether anything
    else ran on the pinned CPUs."""
    record.server_stats = delta.to_json()
    if delta.background_persistence:
        record.mark_invalid(
            InvalidReason.BACKGROUND_SAVE,
            "a background save or AOF rewrite ran during the trial (INFO persistence): its "
            "fork and disk writes are in the numbers; to measure without them, prevent "
            "rewrites (--server-config auto-aof-rewrite-percentage=0) or saves (save rules)",
        )
    cpu_start, cpu_end = before.process_cpu_s, after.process_cpu_s
    if cpu_start is not None and cpu_end is not None and result.wall_s > 0:
        record.server_cpu_pct = 100.0 * (cpu_end - cpu_start) / result.wall_s
    else:
        record.server_cpu_pct = delta.server_cpu_pct
    # Both shares over the load generator's measured window, when it can be placed: over
    # its whole life, its start-up and teardown (memtier spends ~1 s there) read as idle.
    window = procs.busiest_window(result.samples, result.measured_s or 0.0)
    if window is not None:
        record.client_cpu_pct = window[0]
        if window[1] is not None:
            record.server_cpu_pct = window[1]
    record.keyspace_hits = int(delta.keyspace_hits)
    record.keyspace_misses = int(delta.keyspace_misses)
    record.error_replies = int(delta.error_replies)
    if before.io and after.io:
        record.syscalls_read = after.io[0] - before.io[0]
        record.syscalls_write = after.io[1] - before.io[1]
    _reply_checks(ctx, record, delta, result)
    record.contention_pct = others.contended_pct(before.processes, after.processes, ctx.cpus)


def mark_contended(record: TrialRecord, limit_pct: float) -> None:
    """Other work on the pinned CPUs beyond ``limit_pct``: the trial's figures are not the
    server's alone."""
    if record.contention_pct is not None and record.contention_pct > limit_pct:
        record.mark_invalid(
            InvalidReason.CONTENDED,
            f"other processes used {record.contention_pct:.0f}% of the pinned CPUs "
            f"(limit {limit_pct:.0f}%), so stop other work on this machine",
        )


def judge_load(
    settings: RunSettings, record: TrialRecord, *, threads: int, client_cpus: int, saturates: bool
) -> None:
    """Mark a throughput trial invalid when it did not measure the server's capacity:
    other work on the pinned CPUs, a load generator out of CPU (its share of the CPUs its
    threads can use), or, for a workload meant to saturate, a server left idle."""
    limit = settings.contention_limit_pct
    mark_contended(record, limit)
    capacity = 100.0 * min(threads, client_cpus)
    threshold = settings.client_bound_cpu_pct * capacity / 100.0
    if (record.client_cpu_pct or 0) >= threshold:
        record.mark_invalid(
            InvalidReason.CLIENT_BOUND,
            f"the load generator used {record.client_cpu_pct:.0f}% CPU "
            f"(limit {threshold:.0f}%), so this measures the client, not Redis",
        )
    elif (
        saturates
        and record.valid
        and record.server_cpu_pct is not None
        and record.server_cpu_pct < settings.server_bound_cpu_pct
    ):
        # A saturation workload measures the server's capacity only when the server is the
        # bottleneck; the load generator was not (that would be client-bound) either.
        record.mark_invalid(
            InvalidReason.NOT_SERVER_BOUND,
            f"server busy {record.server_cpu_pct:.0f}%, load generator "
            f"{record.client_cpu_pct or 0:.0f}% (client-bound at {threshold:.0f}%): neither "
            "was saturated, so this is not the server's capacity (too few connections or "
            "too small a pipeline, or the machine was slowed from outside)",
        )


def throughput_trial(
    ctx: Context, server: RunningServer, planned: PlannedTrial, specs: list[LoadSpec]
) -> TrialRecord:
    """Warm-up (not recorded), then about ``duration`` seconds of load."""
    record = new_record(planned, "throughput")
    aim = ctx.aim(server)
    settings = ctx.settings
    timeout = 60 + 10 * (settings.duration + settings.warmup)
    if ctx.loadgen.name == redis_benchmark.NAME:
        # redis-benchmark runs a request count: the warm-up measures the rate that sizes it.
        warm = redis_benchmark.warm_up(aim, specs[0], settings.warmup)
        record.warmup_s = warm.seconds
        if warm.rate is None:
            failed = warm.failure
            assert failed is not None
            record.argv, record.raw_output = failed.argv, failed.raw_output
            record.exit_code = failed.exit_code
            record.mark_invalid(InvalidReason.WARMUP_FAILED, failed.problem or "")
            if not server.alive():
                record.mark_invalid(
                    InvalidReason.SERVER_DIED, "redis-server exited during the warm-up"
                )
            return record
        requests = redis_benchmark.requests_for(settings.duration, warm.rate)

        def run() -> LoadgenResult:
            return loadgen.run(ctx.loadgen, aim, specs, requests=requests, timeout=timeout)

    else:
        if settings.warmup > 0:
            warm_result = loadgen.run(
                ctx.loadgen, aim, specs, seconds=settings.warmup, timeout=timeout
            )
            record.warmup_s = warm_result.wall_s
            if warm_result.problem:
                record.argv, record.raw_output = warm_result.argv, warm_result.raw_output
                record.mark_invalid(InvalidReason.WARMUP_FAILED, warm_result.problem)
                return record

        def run() -> LoadgenResult:
            return loadgen.run(ctx.loadgen, aim, specs, seconds=settings.duration, timeout=timeout)

    if measured_window(ctx, server, record, run) is None:
        return record
    judge_load(
        settings,
        record,
        threads=sum(s.threads for s in specs),
        client_cpus=len(aim.cpus),
        saturates=points.saturates(ctx.workload),
    )
    if ctx.loadgen.name == builtin.NAME:
        record.mark_invalid(InvalidReason.BUILTIN_DRIVER, builtin.THROUGHPUT_DETAIL)
    return record
