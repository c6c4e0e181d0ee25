"""One trial against a running server: the measured window and the evidence around it.

Two kinds of trial share one window: the server's own counters (INFO deltas), CPU use of
the pinned CPUs, and the server's read/write syscalls are taken around every load
generator run. A throughput trial is warmed up and timed; an instruction trial runs a
fixed request count between callgrind's zero and dump.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis

from regtrack import loadgen, procs, serverstats, workloads
from regtrack.callgrind import control as callgrind
from regtrack.callgrind.profile import FunctionCost, Profile, parse
from regtrack.config import RunSettings
from regtrack.cpus import CpuPlan
from regtrack.errors import CannotMeasure
from regtrack.loadgen import builtin, redis_benchmark
from regtrack.loadgen.base import Aim, LoadgenBinary, LoadgenResult, LoadSpec
from regtrack.plan import PlannedTrial
from regtrack.procs import CpuTimes, contention_pct, process_cpu_seconds
from regtrack.records import TrialRecord
from regtrack.runtimes.base import RunningServer
from regtrack.workload_spec import GetPipelineWorkload, Workload

# Under callgrind, an idle Redis still runs ~1.2M instructions per second of time-driven
# work (serverCron etc.), about 0.8% of the count per GET when saturated at pipeline 10;
# at 60% busy that share grows to ~1.3%, the most we accept.
SATURATED_SERVER_CPU_PCT = 60.0


@dataclass(frozen=True)
class Context:
    """What every trial of a run shares."""

    settings: RunSettings
    cpus: CpuPlan
    loadgen: LoadgenBinary
    workload: Workload

    def aim(self, server: RunningServer) -> Aim:
        return Aim(
            self.loadgen, server.host, server.port, self.cpus.client, server.alive, server.pid
        )

    @property
    def counts_gets(self) -> bool:
        """GET sweeps count operations on the server (GET calls); mixes trust the load
        generator's count, because commands inside scripts are counted by the server too."""
        return isinstance(self.workload, GetPipelineWorkload)


@dataclass(frozen=True)
class Callgrind:
    """The callgrind session of a server started under valgrind."""

    control: str
    outdir: Path


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


def _reply_checks(
    ctx: Context, record: TrialRecord, delta: dict[str, Any], result: LoadgenResult
) -> None:
    """The server's counters against what the load generator says it did."""
    if ctx.counts_gets:
        record.server_calls = int(delta["commands"].get("get", {}).get("calls", 0))
        for problem in workloads.reply_problems(delta):
            record.mark_invalid(problem)
        if not result.problem and record.server_calls < result.requests:
            record.mark_invalid(
                f"the server counted {record.server_calls} GET calls, "
                f"the load generator claims {result.requests}"
            )
        return
    assert not isinstance(ctx.workload, GetPipelineWorkload)
    record.server_calls = int(sum(c.get("calls", 0) for c in delta["commands"].values()))
    for problem in workloads.mix_problems(ctx.workload, delta, result.requests_per_process):
        record.mark_invalid(problem)


def _window(
    ctx: Context,
    server: RunningServer,
    record: TrialRecord,
    run: Callable[[], LoadgenResult],
) -> LoadgenResult | None:
    """Run the load once with the server's evidence taken around it.

    Fills every figure of ``record`` both trial kinds share; returns the load generator's
    result, or None if the server was lost.
    """
    client = server.client()
    try:
        before = serverstats.snapshot(client)
        io_before = syscalls(server.pid)
        server_cpus_before = CpuTimes.read(ctx.cpus.server)
        client_cpus_before = CpuTimes.read(ctx.cpus.client)
        # The server's CPU time is read right around the load generator, so that the
        # share is of the measured run alone (not of callgrind's zero/dump round trips).
        cpu_start = process_cpu_seconds(server.pid) if server.pid else None
        result = run()
        cpu_end = process_cpu_seconds(server.pid) if server.pid else None
        server_cpus_after = CpuTimes.read(ctx.cpus.server)
        client_cpus_after = CpuTimes.read(ctx.cpus.client)
        io_after = syscalls(server.pid)
        after = serverstats.snapshot(client) if server.alive() else None
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        record.mark_invalid(f"lost the server during the trial: {exc}")
        return None
    finally:
        client.close()

    record.argv, record.raw_output = result.argv, result.raw_output
    record.exit_code, record.requests = result.exit_code, result.requests
    record.wall_s = result.wall_s
    record.ops_per_sec = result.ops_per_sec
    record.latency_ms = result.latency_ms
    record.client_cpu_pct = result.client_cpu_pct
    record.per_command = result.per_command
    record.steal_pct = max(
        server_cpus_after.steal_pct_since(server_cpus_before),
        client_cpus_after.steal_pct_since(client_cpus_before),
    )
    record.valid = True
    if result.problem:
        record.mark_invalid(result.problem)
    if after is None:
        record.mark_invalid("the server exited during the trial")
        return None

    delta = serverstats.delta(before, after)
    record.server_stats = delta
    if cpu_start is not None and cpu_end is not None and result.wall_s > 0:
        record.server_cpu_pct = 100.0 * (cpu_end - cpu_start) / result.wall_s
    else:
        record.server_cpu_pct = delta["server_cpu_pct"]
    # Both shares over the load generator's measured window, when it can be placed: over
    # its whole life, its start-up and teardown (memtier spends ~1 s there) read as idle.
    window = procs.busiest_window(result.samples, result.measured_s or 0.0)
    if window is not None:
        record.client_cpu_pct = window[0]
        if window[1] is not None:
            record.server_cpu_pct = window[1]
    record.keyspace_hits = int(delta["keyspace_hits"])
    record.keyspace_misses = int(delta["keyspace_misses"])
    record.error_replies = int(delta["error_replies"])
    if io_before and io_after:
        record.syscalls_read = io_after[0] - io_before[0]
        record.syscalls_write = io_after[1] - io_before[1]
    _reply_checks(ctx, record, delta, result)
    record.contention_pct = max(
        contention_pct(
            server_cpus_before,
            server_cpus_after,
            delta["server_cpu_s"],
            result.wall_s,
            len(ctx.cpus.server),
        ),
        contention_pct(
            client_cpus_before,
            client_cpus_after,
            result.client_cpu_s,
            result.wall_s,
            len(ctx.cpus.client),
        ),
    )
    return result


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
            record.mark_invalid(f"warm-up failed: {failed.problem}")
            if not server.alive():
                record.mark_invalid("the server exited during the warm-up")
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
                record.mark_invalid(f"warm-up failed: {warm_result.problem}")
                return record

        def run() -> LoadgenResult:
            return loadgen.run(ctx.loadgen, aim, specs, seconds=settings.duration, timeout=timeout)

    if _window(ctx, server, record, run) is None:
        return record
    limit = settings.contention_limit_pct
    if record.contention_pct is not None and record.contention_pct > limit:
        record.mark_invalid(
            f"contended: other processes used {record.contention_pct:.0f}% of the pinned CPUs "
            f"(limit {limit:.0f}%), so stop other work on this machine"
        )
    threads = sum(s.threads for s in specs)
    capacity = 100.0 * min(threads, len(aim.cpus))
    threshold = settings.client_bound_cpu_pct * capacity / 100.0
    if (record.client_cpu_pct or 0) >= threshold:
        record.mark_invalid(
            f"client-bound: the load generator used {record.client_cpu_pct:.0f}% CPU "
            f"(limit {threshold:.0f}%), so this measures the client, not Redis"
        )
    elif (
        workloads.saturates(ctx.workload)
        and record.valid
        and record.server_cpu_pct is not None
        and record.server_cpu_pct < settings.server_bound_cpu_pct
    ):
        # A saturation workload measures the server's capacity only when the server is the
        # bottleneck; the load generator was not (that would be client-bound) either.
        record.mark_invalid(
            f"not server-bound: server busy {record.server_cpu_pct:.0f}%, load generator "
            f"{record.client_cpu_pct or 0:.0f}% (client-bound at {threshold:.0f}%): neither "
            "was saturated, so this is not the server's capacity (too few connections or "
            "too small a pipeline, or the machine was slowed from outside)"
        )
    if ctx.loadgen.name == builtin.NAME:
        record.mark_invalid(builtin.THROUGHPUT_CAVEAT)
    return record


def instruction_trial(
    ctx: Context,
    server: RunningServer,
    planned: PlannedTrial,
    specs: list[LoadSpec],
    session: Callgrind,
) -> tuple[TrialRecord, Profile | None]:
    """See _instruction_trial; a server that dies mid-trial gives an invalid trial."""
    record = new_record(planned, "instructions")
    pid = server.pid
    assert pid is not None
    try:
        callgrind.instrument(session.control, session.outdir, pid, True, server.alive)
        result = _instruction_trial(ctx, server, record, specs, session)
        # Off again until the next trial: whatever runs between trials runs fast.
        callgrind.instrument(session.control, session.outdir, pid, False, server.alive)
        return result
    except CannotMeasure as exc:
        if not _dies_within(server, 2.0):
            raise
        record.mark_invalid(f"the server exited during the trial ({exc})")
        return record, None


def _dies_within(server: RunningServer, seconds: float) -> bool:
    """Whether the server is gone (or going): a tool failing at the moment the server is
    killed can notice before the server's exit is visible to us."""
    deadline = time.monotonic() + seconds
    while server.alive():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _instruction_trial(
    ctx: Context,
    server: RunningServer,
    record: TrialRecord,
    specs: list[LoadSpec],
    session: Callgrind,
) -> tuple[TrialRecord, Profile | None]:
    """Instructions per operation: two windows of a fixed request count in one server.

    An unrecorded warm-up first (first-touch allocations, code run once). Each window:
    zero callgrind, run half the requests, wait until the server has run every request
    still in flight when the load generator exited, dump. Instructions are divided by
    the operations of that window. The two windows of one process must agree within the
    repeatability limit, or the trial is not trusted. (Between server processes counts
    differ more, e.g. by the random seed of the command table's hash: that is the spread
    between repetitions, reported separately.)
    """
    aim = ctx.aim(server)
    half = ctx.settings.instruction_requests // 2
    timeout = 120 + half / 200  # callgrind runs the server ~50x slower
    pid = server.pid
    assert pid is not None
    control = server.client(timeout=120)

    def load(requests: int) -> LoadgenResult:
        return loadgen.run(ctx.loadgen, aim, specs, requests=requests, timeout=timeout)

    def operations(before: int, result: LoadgenResult) -> int:
        if ctx.counts_gets:
            return serverstats.command_calls(control, "get") - before
        return result.requests

    # The warm-up runs inside a zero/dump cycle of its own, whose dump is dropped: the
    # first window measured after a server's first dump counts 1-2% more than every
    # later one (seen with 7.0.15 under valgrind 3.19), so that window is the warm-up.
    callgrind.zero(session.control, session.outdir, pid, server.alive)
    warm = load(max(20_000, half // 2))
    if server.alive():
        serverstats.wait_idle(control)
        callgrind.dump(session.control, session.outdir, pid, server.alive).unlink(missing_ok=True)
    if warm.problem:
        control.close()
        record.argv, record.raw_output, record.exit_code = (
            warm.argv,
            warm.raw_output,
            warm.exit_code,
        )
        record.mark_invalid(f"warm-up failed: {warm.problem}")
        return record, None
    record.warmup_s = warm.wall_s

    windows: list[tuple[LoadgenResult, float | None, int]] = []
    dumps: list[Path] = []

    def one_window() -> LoadgenResult:
        """zero, run, let in-flight requests finish, dump: one clean window."""
        gets_before = serverstats.command_calls(control, "get") if ctx.counts_gets else 0
        callgrind.zero(session.control, session.outdir, pid, server.alive)
        cpu_start = process_cpu_seconds(pid)
        result = load(half)
        cpu_end = process_cpu_seconds(pid)
        if not server.alive():
            return result
        if not serverstats.wait_idle(control):
            result.problem = result.problem or "load generator connections never closed"
        dumps.append(callgrind.dump(session.control, session.outdir, pid, server.alive))
        busy = cpu_end - cpu_start if cpu_start is not None and cpu_end is not None else None
        windows.append((result, busy, operations(gets_before, result)))
        return result

    def run() -> LoadgenResult:
        first = one_window()
        if first.problem or not server.alive():
            return first
        return loadgen.sequence([first, one_window()])

    try:
        window = _window(ctx, server, record, run)
    finally:
        control.close()
    if window is None or len(dumps) != 2 or any(ops <= 0 for _, _, ops in windows):
        return record, None
    profiles = [parse(path) for path in dumps]
    for path in dumps:
        path.unlink(missing_ok=True)  # the costs go to the store; the dumps are large
    profile = _merged(profiles)
    ops = sum(o for _, _, o in windows)
    record.instructions = profile.instructions
    record.instructions_per_op = profile.instructions / ops
    record.server_calls = ops  # the count the instructions belong to
    per_window = [p.instructions / o for p, (_, _, o) in zip(profiles, windows, strict=True)]
    record.instructions_repeat_pct = (
        100.0 * abs(per_window[0] - per_window[1]) / (sum(per_window) / 2)
    )
    if record.instructions_repeat_pct > ctx.settings.repeatability_pct:
        record.mark_invalid(
            f"not repeatable: the two windows in one server counted "
            f"{per_window[0]:,.1f} and {per_window[1]:,.1f} instructions/op "
            f"({record.instructions_repeat_pct:.2f}% apart, limit "
            f"{ctx.settings.repeatability_pct}%)"
        )
    busy = [b for _, b, _ in windows if b is not None]
    wall = sum(r.wall_s for r, _, _ in windows)
    if len(busy) == len(windows) and wall > 0:
        record.server_cpu_pct = 100.0 * sum(busy) / wall
    if (record.server_cpu_pct or 0) < SATURATED_SERVER_CPU_PCT:
        record.mark_invalid(
            f"server not saturated: it used {record.server_cpu_pct or 0:.0f}% CPU under "
            "callgrind, so time-driven work (serverCron) inflates the count per operation"
        )
    return record, profile


def _merged(profiles: list[Profile]) -> Profile:
    """One profile whose totals and function costs are the sums of several."""
    merged = Profile(events=list(profiles[0].events), totals={})
    for profile in profiles:
        for event, value in profile.totals.items():
            merged.totals[event] = merged.totals.get(event, 0) + value
        for ident, cost in profile.functions.items():
            into = merged.functions.setdefault(
                ident, FunctionCost(cost.function, cost.file, cost.object)
            )
            into.exclusive += cost.exclusive
            into.inclusive += cost.inclusive
    return merged
