"""One engine run over every version's server at once (a paired open-loop or lifecycle
point: bench/paired_latency.py, paired_lifecycle.py), with each server's counters and the
pinned CPUs read around it, as a throughput trial's are (bench/trial.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from regtrack.bench import kernel_calls, serverstats, trial
from regtrack.bench.loadgen.base import LoadgenResult
from regtrack.bench.paired import Side, shared_cpus
from regtrack.core.procs import CpuTimes
from regtrack.core.records import ServerDelta


def cpu_times(ctx: trial.Context) -> tuple[CpuTimes, CpuTimes]:
    """The server CPUs' and the client CPUs' times now (around a point's run)."""
    return CpuTimes.read(ctx.cpus.server), CpuTimes.read(ctx.cpus.client)


@dataclass(frozen=True)
class Around:
    """What one engine run over every side's server left on them: each server's counters
    (INFO deltas, syscalls before and after, and by name where the kernel counts them), the
    wall time, and whether other work shared the pinned CPUs (contention, steal)."""

    deltas: dict[str, ServerDelta]
    io: dict[str, tuple[tuple[int, int] | None, tuple[int, int] | None]]
    wall: float
    contended: float
    steal: float
    named: dict[str, dict[str, int] | None]  # each server's syscalls by name (None: not counted)


def engine_point(
    ctx: trial.Context, order: list[Side], run: Callable[[], list[LoadgenResult]]
) -> tuple[list[LoadgenResult], Around]:
    """``run`` (one engine run over ``order``'s servers: bench/paired_latency.py,
    paired_lifecycle.py) with every server's counters and the CPUs read around it; a
    RedisError, OSError or CannotMeasure is the caller's (a failed point)."""
    with contextlib.ExitStack() as stack:
        clients = {}
        for side in order:
            clients[side.target.label] = client = side.server.client(timeout=60)
            stack.callback(client.close)
        # opened first: hundreds of perf events take a while, kept out of the wall time
        kernel = kernel_calls.counters(stack, {s.target.label: s.server.pid for s in order})
        before = {label: serverstats.snapshot(c) for label, c in clients.items()}
        io_before = {s.target.label: trial.syscalls(s.server.pid) for s in order}
        named_before = {label: kernel_calls.reading(kernel, label) for label in clients}
        processes = trial.every_process(*(s.server for s in order))
        server_cpus, client_cpus = cpu_times(ctx)
        results = run()
        server_after, client_after = cpu_times(ctx)
        processes_after = trial.every_process(*(s.server for s in order))
        named = {
            label: kernel_calls.since(named_before[label], kernel_calls.reading(kernel, label))
            for label in clients
        }
        after = {label: serverstats.snapshot(c) for label, c in clients.items()}
        io_after = {s.target.label: trial.syscalls(s.server.pid) for s in order}
    first = order[0].target.label
    wall = after[first].at - before[first].at
    deltas = {label: serverstats.delta(before[label], after[label]) for label in before}
    contended, steal = shared_cpus(
        ctx.cpus, (server_cpus, server_after), (client_cpus, client_after),
        (processes, processes_after),
    )  # fmt: skip
    io = {label: (io_before[label], io_after[label]) for label in io_before}
    return results, Around(deltas, io, wall, contended, steal, named)
