"""Throughput paired in time: one visit of every target, the load moving between them.

A repetition's servers (one per target, the same seed) start together, pinned to the
server CPUs, and are set up alike. At each point every server gets its own load
generator, held paused (loadgen/held.py); after a warm-up, ``duration`` seconds of load
per server are measured in short windows that move the load from server to server
(bench/windows.py), so every slow or fast second of the host falls on all of them.
Each server's windows make its trial: ops/s, server and client CPU over its windows,
the server's counters over the point for errors and misses. The trials of one
repetition are then paired in time, and the analysis pairs them by repetition as before.

Only one server works at a time: the others sleep on the same CPUs (their serverCron
ticks are all they cost), and their load generators are stopped. Latency is not
measured here: a paused client would count its pause in its requests' latency.

A duet (``--pairing duet``, Job.duet) gives each server and its load generator CPUs of
their own (core/cpus.split_sides) and runs every load at once (windows.together); the
rest is the same.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import redis

from regtrack.bench import kernel_calls, serverstats, trial, windows
from regtrack.bench.job import Job
from regtrack.bench.loadgen.held import HeldLoad
from regtrack.bench.plan import PlannedTrial, Visit
from regtrack.bench.runtimes.base import RunningServer
from regtrack.bench.servers import ServerDied, plain_server, set_up
from regtrack.core import interrupts, others
from regtrack.core.cpus import CpuPlan
from regtrack.core.errors import CannotMeasure, Interrupted
from regtrack.core.procs import CpuTimes
from regtrack.core.records import InvalidReason, LoadSpec, Progress, ServerDelta, TrialRecord
from regtrack.results.store import Store
from regtrack.targets.versions import Target
from regtrack.workloads import points

METHOD = "paired in time"


@dataclass
class Side:
    """One target's server in a paired visit."""

    target: Target
    server: RunningServer
    saved: dict[str, str]


# One point of every side: a record per side (throughput here, open-loop latency in
# bench/paired_latency.py).
MeasurePoint = Callable[[Job, list[Side], list[PlannedTrial]], list[TrialRecord]]


def run_visit(
    job: Job,
    store: Store,
    run_id: int,
    visit: Visit,
    targets: dict[str, Target],
    target_ids: dict[str, int],
    progress: Progress,
    measure: MeasurePoint | None = None,
    tool: str | None = None,
) -> None:
    """Start every target's server, set each up (its keys as ``tool`` spells them), then
    measure point by point with ``measure`` (throughput windows by default), storing
    each point's trials (one per target) as soon as the point is done."""
    measure = measure or measure_point
    rep = f"rep {visit.repetition + 1}/{job.settings.repetitions}"
    seed = job.seed(visit.repetition)
    with contextlib.ExitStack() as stack:
        sides: list[Side] = []
        for label in visit.together:
            target = targets[label]
            progress.phase(f"{rep} · starting {label} (paired in time)")
            cpus = job.side_cpus()[label].server
            server = stack.enter_context(plain_server(job, target, run_id, seed, cpus))
            progress.phase(f"{rep} · setting up {label}")
            sides.append(
                Side(target, server, set_up(job, server, f"redis-server of {target.label}", tool))
            )
        by_point: dict[str, list[PlannedTrial]] = {}
        for planned in visit.trials:
            by_point.setdefault(planned.point.label, []).append(planned)
        for label, planned in by_point.items():
            progress.phase(f"{rep} · {label} · {' ⇄ '.join(visit.together)}")
            mine = [s for s in sides if s.target.label in {p.target for p in planned}]
            try:
                records = measure(job, mine, planned)
            except PointCut as cut:
                for record in cut.records:
                    record.seed = seed
                    store.add_trial(run_id, target_ids[record.target_label], record, None)
                progress.note(_cut_note(run_id, f"{rep} · {label}", cut.records))
                raise
            for side in mine:
                if not side.server.alive():  # died after its windows: not to be trusted
                    record = next(r for r in records if r.target_label == side.target.label)
                    trial.mark_died(
                        record, f"redis-server of {side.target.label} exited during the point"
                    )
            for record in records:
                record.seed = seed
                store.add_trial(run_id, target_ids[record.target_label], record, None)
                progress.trial_done(record)
            interrupts.check()
            dead = [s.target.label for s in sides if not s.server.alive()]
            if dead:
                raise ServerDied(f"redis-server of {dead[0]} exited during {label} (paired)")


def _cut_note(run_id: int, where: str, kept: list[TrialRecord]) -> str:
    """What a signal during a point cost: the part of it stored, and how to get the rest."""
    resume = f"regtrack run --resume {run_id} measures the point again"
    if not kept:
        return f"interrupted at {where} before its first whole group of windows: {resume}"
    shown = "; ".join(f"{r.target_label} {r.requests:,} requests" for r in kept)
    return (
        f"interrupted at {where}: its whole groups of windows are stored as interrupted "
        f"trials ({shown}; {kept[0].wall_s:.1f} s each), not compared; {resume}"
    )


def _lanes(
    stack: contextlib.ExitStack, job: Job, order: list[Side], specs_of: dict[str, list[LoadSpec]]
) -> list[windows.Lane]:
    """Each side's load, held and flowing, with a client of its server (closed by
    ``stack``); a load that never flows ends the point."""
    counted = points.counted_commands(job.workload)
    side_cpus = job.side_cpus()
    lanes = []
    for side in order:
        label = side.target.label
        client = side.server.client(timeout=60)
        stack.callback(client.close)
        load = HeldLoad(job.context.aim(side.server, side_cpus[label].client), specs_of[label])
        stack.callback(load.close)
        lane = windows.Lane(label, client, load, counted)
        problem = load.wait_flowing(lambda lane=lane: lane.reading().ops)
        if problem:
            raise windows.LoadLost(f"{label}: {problem}")
        lanes.append(lane)
    return lanes


def _from_windows(record: TrialRecord, total: windows.Totals, warmup: float) -> None:
    """A side's figures from its windows' totals: a valid trial until judged."""
    record.wall_s = total.seconds
    record.warmup_s = warmup
    record.requests = int(total.ops)
    record.ops_per_sec = total.ops_per_sec
    record.server_cpu_pct = total.pct(total.server_cpu_s)
    record.client_cpu_pct = total.pct(total.client_cpu_s)
    record.exit_code = 0
    record.valid = True


def shared_cpus(
    cpus: CpuPlan,
    server: tuple[CpuTimes, CpuTimes],
    client: tuple[CpuTimes, CpuTimes],
    processes: tuple[others.Snapshot, others.Snapshot],
) -> tuple[float, float]:
    """(contention, steal) on the pinned CPUs over the point. Every server and load
    generator of the point shares them; ``processes``' readings take theirs as ours."""
    contended = others.contended_pct(*processes, cpus)
    steal = max(server[1].steal_pct_since(server[0]), client[1].steal_pct_since(client[0]))
    return contended, steal


def measure_point(job: Job, sides: list[Side], planned: list[PlannedTrial]) -> list[TrialRecord]:
    """One point of every side, paired in time; a record per side, valid or not."""
    records = {p.target: trial.new_record(p, "throughput") for p in planned}
    order = [s for s in sides if s.target.label in records]
    ctx, settings = job.context, job.context.settings
    side_cpus = job.side_cpus()
    method = "duet" if job.duet else METHOD
    run_windows = windows.together if job.duet else windows.alternate
    specs_of = {
        s.target.label: points.load_specs(
            job.workload, planned[0].point, job.loadgen.name, s.saved
        )
        for s in order
    }  # fmt: skip
    measured: list[windows.Window] = []
    lanes: list[windows.Lane] = []
    groups = max(1, windows.groups_for(settings.duration, settings.window))
    with contextlib.ExitStack() as stack:
        try:
            lanes = _lanes(stack, job, order, specs_of)
            # opened before the warm-up: the measured windows start at once
            kernel = kernel_calls.counters(stack, {s.target.label: s.server.pid for s in order})
            window = settings.window
            warm = windows.groups_for(settings.warmup, window)
            run_windows(lanes, warm, window, interrupts.check, first_group=-warm)
            before = {lane.label: serverstats.snapshot(lane.client) for lane in lanes}
            io_before = _io(order, kernel)
            processes = trial.every_process(*(s.server for s in order))
            server_cpus = CpuTimes.read(ctx.cpus.server)
            client_cpus = CpuTimes.read(ctx.cpus.client)
            run_windows(lanes, groups, window, interrupts.check, into=measured)
            server_cpus_after = CpuTimes.read(ctx.cpus.server)
            client_cpus_after = CpuTimes.read(ctx.cpus.client)
            processes_after = trial.every_process(*(s.server for s in order))
            io_after = _io(order, kernel)
            after = {lane.label: serverstats.snapshot(lane.client) for lane in lanes}
        except (windows.LoadLost, redis.RedisError, OSError, CannotMeasure) as exc:
            return failed(records, order, exc)
        except KeyboardInterrupt as exc:
            kept = _cut_short(job, records, order, lanes, measured, groups)
            raise PointCut(str(exc), kept) from None
    deltas = {label: serverstats.delta(before[label], after[label]) for label in before}
    contended, steal = shared_cpus(
        ctx.cpus, (server_cpus, server_cpus_after), (client_cpus, client_cpus_after),
        (processes, processes_after),
    )  # fmt: skip
    table = windows.table(measured)
    for side in order:
        label = side.target.label
        record = records[label]
        total = windows.totals(measured, label)
        record.argv = [arg for argv in lanes[order.index(side)].load.argv for arg in argv]
        record.raw_output = f"[{method}: windows of every server at this point]\n{table}"
        _from_windows(record, total, settings.warmup)
        record.steal_pct, record.contention_pct = steal, contended
        (io0, named0), (io1, named1) = io_before[label], io_after[label]
        counters(ctx, record, deltas[label], io0, io1)
        record.syscalls_by_name = kernel_calls.since(named0, named1)
        trial.judge_load(
            settings,
            record,
            threads=sum(s.threads for s in specs_of[label]),
            client_cpus=len(side_cpus[label].client),
            saturates=points.saturates(job.workload),
        )
    return [records[p.target] for p in planned]


class PointCut(Interrupted):
    """A signal during a paired point, with the trials its whole window groups made:
    stored (as interrupted) before the run stops, so a Ctrl-C loses at most one group
    of windows (2 x servers x window seconds), not the point."""

    def __init__(self, signal_name: str, records: list[TrialRecord]):
        super().__init__(signal_name)
        self.records = records


def _cut_short(
    job: Job,
    records: dict[str, TrialRecord],
    order: list[Side],
    lanes: list[windows.Lane],
    measured: list[windows.Window],
    planned: int,
) -> list[TrialRecord]:
    """Each side's trial from the whole groups measured before the signal, marked
    interrupted (kept, never compared: shorter than planned); none if no group ended."""
    kept = windows.complete_groups(measured, len(order))
    done = len({w.group for w in kept})
    if not done:
        return []
    settings = job.context.settings
    table = windows.table(kept)
    out = []
    for side in order:
        label = side.target.label
        record = records[label]
        total = windows.totals(kept, label)
        _from_windows(record, total, settings.warmup)
        lane = next((lane for lane in lanes if lane.label == label), None)
        record.argv = [arg for argv in lane.load.argv for arg in argv] if lane else []
        record.raw_output = f"[{METHOD}: interrupted, the whole groups of windows]\n{table}"
        record.mark_invalid(
            InvalidReason.INTERRUPTED,
            f"stopped after {done} of {planned} groups of windows ({total.seconds:.1f} s of "
            f"{settings.duration:g} s measured): kept, not compared; --resume measures the "
            "point again",
        )
        out.append(record)
    return out


def _io(
    order: list[Side], kernel: dict[str, kernel_calls.Counter]
) -> dict[str, tuple[tuple[int, int] | None, dict[str, int] | None]]:
    """Each side's syscalls so far: /proc/PID/io's (read, write), and by name where the
    kernel counts them."""
    return {
        s.target.label: (trial.syscalls(s.server.pid), kernel_calls.reading(kernel, s.target.label))
        for s in order
    }


def counters(
    ctx: trial.Context,
    record: TrialRecord,
    delta: ServerDelta,
    io_before: tuple[int, int] | None,
    io_after: tuple[int, int] | None,
) -> None:
    """The server's own counters over the point: errors, misses, calls and syscalls."""
    record.server_stats = delta.to_json()
    record.keyspace_hits = int(delta.keyspace_hits)
    record.keyspace_misses = int(delta.keyspace_misses)
    record.error_replies = int(delta.error_replies)
    record.server_calls = int(delta.total_calls)
    if ctx.counts_gets:
        record.server_calls = int(delta.calls("get"))
        for problem in points.reply_problems(delta):
            record.mark_invalid(problem.code, problem.detail)
    else:
        for problem in points.error_problems(delta):
            record.mark_invalid(problem.code, problem.detail)
    if delta.background_persistence:
        record.mark_invalid(
            InvalidReason.BACKGROUND_SAVE,
            "a background save or AOF rewrite ran during the point (INFO persistence): "
            "its fork and disk writes are in the numbers",
        )
    if io_before and io_after:
        record.syscalls_read = io_after[0] - io_before[0]
        record.syscalls_write = io_after[1] - io_before[1]


def failed(
    records: dict[str, TrialRecord], order: list[Side], exc: BaseException
) -> list[TrialRecord]:
    """Every side's record marked with why the point could not be measured."""
    reason = " ".join(str(exc).split())[:200]
    for side in order:
        alive = side.server.alive()
        code = InvalidReason.WINDOWS_FAILED if alive else InvalidReason.SERVER_DIED
        records[side.target.label].mark_invalid(code, reason)
    return list(records.values())
