"""The instruction trial: two windows of a fixed request count between callgrind's zero and dump.

The measured window and its evidence (INFO deltas, CPU, syscalls) are the trial's
(bench/trial.py); this module adds the callgrind side: instrumentation switched on only
for the trial, an unrecorded warm-up cycle, two dumps that must agree, merged costs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from regtrack.bench import kernel_calls, lifecycle_trial, loadgen, serverstats
from regtrack.bench.callgrind import control
from regtrack.bench.callgrind.profile import Profile, add_events, parse
from regtrack.bench.loadgen import driver, lifecycle
from regtrack.bench.loadgen.base import LoadgenResult
from regtrack.bench.plan import PlannedTrial
from regtrack.bench.runtimes.base import RunningServer
from regtrack.bench.trial import Context, measured_window, new_record
from regtrack.core import cycles
from regtrack.core.errors import CannotMeasure
from regtrack.core.procs import process_cpu_seconds, socket_count
from regtrack.core.records import (
    CacheSimFacts,
    FunctionCost,
    InvalidReason,
    LoadSpec,
    TrialRecord,
)
from regtrack.workloads.driver import DriverWorkload
from regtrack.workloads.lifecycle import LifecycleWorkload

# A window: the load generator's result, the server's CPU seconds in it, its operations.
Window = tuple[LoadgenResult, float | None, int]

# What a server counts while it waits (serverCron left out, hz 1: control.py): 550-1,800
# instructions per second idle with 10 clients connected (6.2.14, 7.0.15 and 8.0.6,
# benchmarks/results/idle_instructions.txt). A window charges its idle seconds at this
# bound, about three times the most seen, to the operations it counted; past
# MAX_TIME_DRIVEN_PCT of the count the trial is not judged (a server that mostly waits on
# a slow client, or a program that mostly sleeps).
TIME_DRIVEN_PER_S = 5_000.0
MAX_TIME_DRIVEN_PCT = 0.2
# A lifecycle's windows hold at least this many tasks (bench/loadgen/lifecycle.py).
MIN_TASKS = 200


@dataclass(frozen=True)
class Callgrind:
    """The callgrind session of a server started under valgrind."""

    control: str
    outdir: Path
    # --metric cycles: the cache and branch simulation is on, its events weighed by these
    weights: cycles.Weights | None = None


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
        control.instrument(session.control, session.outdir, pid, True, server.alive)
        result = _instruction_trial(ctx, server, record, specs, session)
        # Off again until the next trial: whatever runs between trials runs fast.
        control.instrument(session.control, session.outdir, pid, False, server.alive)
        return result
    except CannotMeasure as exc:
        if not _dies_within(server, 2.0):
            raise
        record.mark_invalid(
            InvalidReason.SERVER_DIED, f"redis-server exited during the trial ({exc})"
        )
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
    half = ctx.settings.instruction_requests // 2
    windows = _Windows(ctx, session, server, specs, server.client(timeout=120), half)
    windows.counter = kernel_calls.start(server.pid)
    try:
        warm = windows.warm_up(max(20_000, half // 2))
        if warm.problem:
            record.argv, record.raw_output, record.exit_code = (
                warm.argv,
                warm.raw_output,
                warm.exit_code,
            )
            record.mark_invalid(InvalidReason.WARMUP_FAILED, warm.problem)
            return record, None
        record.warmup_s = warm.wall_s
        window = measured_window(ctx, server, record, windows.both, count_calls=False)
        if windows.counter is not None and len(windows.calls) == 2:
            record.syscalls_by_name = _summed(windows.calls)
    finally:
        windows.control.close()
        if windows.counter is not None:
            windows.counter.close()
    measured = windows.measured
    if window is None or len(windows.dumps) != 2 or any(ops <= 0 for _, _, ops in measured):
        return record, None
    profiles = [parse(path) for path in windows.dumps]
    for path in windows.dumps:
        path.unlink(missing_ok=True)  # the costs go to the store; the dumps are large
    profile = _counted(ctx, record, profiles, measured)
    if session.weights is not None:
        record.cache_sim = simulated(profile, session.weights)
    return record, profile


@dataclass
class _Windows:
    """The zero/run/dump cycles of one instruction trial in one server under callgrind."""

    ctx: Context
    session: Callgrind
    server: RunningServer
    specs: list[LoadSpec]
    control: redis.Redis
    half: int  # requests per window
    measured: list[Window] = field(default_factory=list)
    dumps: list[Path] = field(default_factory=list)
    # The server's syscalls by name in each window, from zero to dump (not the dump's
    # own writes, nor vgdb's exchange): kernel_calls.py.
    counter: kernel_calls.Counter | None = None
    calls: list[dict[str, int]] = field(default_factory=list)

    @property
    def pid(self) -> int:
        assert self.server.pid is not None
        return self.server.pid

    def _load(self, requests: int) -> LoadgenResult:
        timeout = 120 + self.half / 200  # callgrind runs the server ~50x slower
        aim = self.ctx.aim(self.server)
        workload = self.ctx.workload
        if isinstance(workload, DriverWorkload):
            # the user's program, to its end: its task count is the window's (under
            # callgrind the server is ~50x slower, so its own time limit, not ours, applies)
            return driver.run(self.ctx.loadgen, workload.command, aim, workload.timeout_s)
        if isinstance(workload, LifecycleWorkload):
            # a task lifecycle: a fixed number of tasks at capacity, each task an operation
            tasks = max(MIN_TASKS, requests // lifecycle.REQUESTS_PER_TASK)
            arrivals = lifecycle.Arrivals(rate=None, tasks=tasks)
            # one producer and one consumer: each command alone in the server's event
            # loop, not batched as concurrency happened to batch them (a count per task
            # that repeats)
            alone = workload.model_copy(update={"producers": 1, "consumers": 1})
            (done,) = lifecycle.run(
                self.ctx.loadgen, [aim], alone.engine_document(), arrivals, seconds=1.0,
                warmup=0.0, timeout=timeout,
            )  # fmt: skip
            return done
        return loadgen.run(self.ctx.loadgen, aim, self.specs, requests=requests, timeout=timeout)

    def _fresh(self) -> None:
        """A task queue's window starts from the state every window starts from: emptied
        (and a lifecycle's setup run: its keys grow with its tasks, results kept for a day;
        a window later in a server would count its rehashes and larger structures), as a
        --driver trial does. Before zero: not counted."""
        workload = self.ctx.workload
        if isinstance(workload, LifecycleWorkload):
            lifecycle_trial.fresh(self.server, workload)
        elif isinstance(workload, DriverWorkload):
            self.control.flushall()

    def _gets(self) -> int:
        return serverstats.command_calls(self.control, "get") if self.ctx.counts_gets else 0

    def warm_up(self, requests: int) -> LoadgenResult:
        """The warm-up runs inside a zero/dump cycle of its own, whose dump is dropped:
        the first window measured after a server's first dump counts 1-2% more than every
        later one (seen with 7.0.15 under valgrind 3.19), so that window is the warm-up."""
        self._fresh()
        control.zero(self.session.control, self.session.outdir, self.pid, self.server.alive)
        warm = self._load(requests)
        if self.server.alive():
            serverstats.wait_idle(self.control)
            dump = control.dump(
                self.session.control, self.session.outdir, self.pid, self.server.alive
            )
            dump.unlink(missing_ok=True)
        return warm

    def one(self) -> LoadgenResult:
        """zero, run, let in-flight requests finish, dump: one clean window."""
        self._fresh()
        gets_before = self._gets()
        control.zero(self.session.control, self.session.outdir, self.pid, self.server.alive)
        sockets = socket_count(self.pid)
        calls_before = self.counter.read() if self.counter else None
        cpu_start = process_cpu_seconds(self.pid)
        result = self._load(self.half)
        cpu_end = process_cpu_seconds(self.pid)
        if not self.server.alive():
            return result
        if not serverstats.wait_sockets(self.pid, sockets, self.control):
            result.problem = result.problem or "load generator connections never closed"
        if self.counter is not None:
            calls = kernel_calls.since(calls_before, self.counter.read())
            if calls is not None:
                self.calls.append(calls)
        self.dumps.append(
            control.dump(self.session.control, self.session.outdir, self.pid, self.server.alive)
        )
        busy = cpu_end - cpu_start if cpu_start is not None and cpu_end is not None else None
        ops = self._gets() - gets_before if self.ctx.counts_gets else result.requests
        self.measured.append((result, busy, ops))
        return result

    def both(self) -> LoadgenResult:
        first = self.one()
        if first.problem or not self.server.alive():
            return first
        return loadgen.sequence([first, self.one()])


def _counted(
    ctx: Context, record: TrialRecord, profiles: list[Profile], windows: list[Window]
) -> Profile:
    """The two windows' counts into the record, judged: they must agree within the
    repeatability limit, and the server's idle time must not have counted a visible share
    of them (time-driven work)."""
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
            InvalidReason.NOT_REPEATABLE,
            f"the two windows in one server counted "
            f"{per_window[0]:,.1f} and {per_window[1]:,.1f} instructions/op "
            f"({record.instructions_repeat_pct:.2f}% apart, limit "
            f"{ctx.settings.repeatability_pct}%)",
        )
    busy = [b for _, b, _ in windows if b is not None]
    wall = sum(r.wall_s for r, _, _ in windows)
    if len(busy) == len(windows) and wall > 0:
        record.server_cpu_pct = 100.0 * sum(busy) / wall
    idle_s = wall * (1 - (record.server_cpu_pct or 0) / 100)
    timed_pct = 100.0 * TIME_DRIVEN_PER_S * max(0.0, idle_s) / max(1, profile.instructions)
    if timed_pct > MAX_TIME_DRIVEN_PCT:
        record.mark_invalid(
            InvalidReason.NOT_SATURATED,
            f"it used {record.server_cpu_pct or 0:.0f}% CPU under callgrind: its "
            f"{idle_s:.1f} idle seconds may have counted up to {timed_pct:.2f}% of the "
            f"instructions (time-driven work, at most {TIME_DRIVEN_PER_S:,.0f}/s), more "
            f"than {MAX_TIME_DRIVEN_PCT}%: give the windows more work "
            "(--instruction-requests) or a client that keeps the server busy",
        )
    return profile


def _summed(windows: list[dict[str, int]]) -> dict[str, int]:
    """Both windows' syscalls by name, added (their operations are added too)."""
    total: dict[str, int] = {}
    for calls in windows:
        for name, n in calls.items():
            total[name] = total.get(name, 0) + n
    return dict(sorted(total.items()))


def function_costs(profile: Profile, weights: cycles.Weights | None) -> list[FunctionCost]:
    """The costs stored per function: by symbol, each with its exclusive cycles at
    ``weights`` under the simulation."""
    costs = list(profile.by_key().values())
    if weights is not None:
        for cost in costs:
            cost.cycles = cycles.grouped(cost.exclusive_events).cycles(weights)
    return costs


def simulated(profile: Profile, weights: cycles.Weights) -> CacheSimFacts:
    """The simulation's events of a trial's merged profile, and its cycles at ``weights``;
    a dump without them (valgrind ignored the simulation) cannot measure cycles, nor one
    whose caches are not the pinned ones (the count would not be comparable)."""
    missing = [e for e in cycles.EVENTS if e not in profile.events]
    if missing:
        raise CannotMeasure(
            f"callgrind's dump has no {missing[0]} event: the cache and branch simulation "
            "did not run (--metric cycles needs valgrind's --cache-sim and --branch-sim)"
        )
    if profile.geometry != cycles.geometry_text():
        raise CannotMeasure(
            f"callgrind simulated other caches than asked ({profile.geometry or 'none'}; "
            f"asked {cycles.geometry_text()})"
        )
    totals = profile.totals
    counts = {e.lower(): int(totals.get(e, 0)) for e in cycles.EVENTS}
    return CacheSimFacts(
        **counts, cycles=cycles.grouped(totals).cycles(weights), geometry=profile.geometry
    )


def _merged(profiles: list[Profile]) -> Profile:
    """One profile whose totals and function costs are the sums of several."""
    merged = Profile(events=list(profiles[0].events), totals={}, caches=profiles[0].caches)
    for profile in profiles:
        for event, value in profile.totals.items():
            merged.totals[event] = merged.totals.get(event, 0) + value
        for ident, cost in profile.functions.items():
            into = merged.functions.setdefault(
                ident, FunctionCost(cost.function, cost.file, cost.object)
            )
            into.exclusive += cost.exclusive
            into.inclusive += cost.inclusive
            add_events(into, cost)
    return merged
