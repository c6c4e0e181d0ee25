"""Throughput in short windows, counted by the server: the unit of paired-in-time trials.

A host's speed wanders over seconds to minutes (docs/methodology.md, "Noise in time"),
so two servers measured minutes apart differ by more than the change being sought. Here
every server of a comparison is up at once, each with its own held load generator
(loadgen/held.py), and the load moves between them window by window. A window: resume
one server's load, let it settle, read the server's counters, wait the window's length,
read them again, pause the load. The counters are the server's own (INFO commandstats
calls of the workload's commands, INFO cpu), read in one round trip, so a window's
operations are exactly what that server executed between two points in time.

Windows come in groups that visit the servers forwards then backwards (A B B A, or
A B C C B A): every server has one window on each side of the group's middle, so a
linear drift within a group hits all alike, and every window starts just after a switch.

A duet (``together``) runs every server's load at once, each server and load generator
on CPUs of their own, and reads every server at each window's start and end: the same
moments for all, nothing to alternate.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import redis

from regtrack.bench.loadgen.held import HeldLoad

T = TypeVar("T")

# After a resume, the load generator's first requests meet cold caches and a socket
# backlog (a paused pipeline of 50 clients x 30 GETs is ~3 ms of a server's work); the
# window starts this much later, so it holds the steady state only.
SETTLE_S = 0.02


@dataclass(frozen=True)
class Reading:
    """A server's counters at one moment."""

    at: float  # time.monotonic() half-way through the round trip
    ops: float  # calls of the counted commands so far
    cpu_s: float  # the server's CPU seconds so far (user + system)


def read(client: redis.Redis, counted: frozenset[str]) -> Reading:
    """The counted commands' calls and the server's CPU time, in one round trip."""
    pipe = client.pipeline(transaction=False)
    pipe.info("commandstats")
    pipe.info("cpu")
    sent = time.monotonic()
    stats, cpu = pipe.execute()
    at = (sent + time.monotonic()) / 2
    ops = 0.0
    for name in counted:
        row = stats.get(f"cmdstat_{name}")
        if isinstance(row, dict):
            ops += float(row.get("calls", 0))
    return Reading(at, ops, float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]))


@dataclass(frozen=True)
class Window:
    """One server's share of the load for one window."""

    label: str
    group: int
    position: int  # in the group: 0 .. 2 * servers - 1
    ops: float
    seconds: float
    server_cpu_s: float
    client_cpu_s: float

    @property
    def rate(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else 0.0


@dataclass
class Lane:
    """One server of the comparison and the load generator that feeds it."""

    label: str
    client: redis.Redis  # a control connection to the server
    load: HeldLoad
    counted: frozenset[str]

    def reading(self) -> Reading:
        return read(self.client, self.counted)


def groups_for(seconds: float, window: float) -> int:
    """Groups that give each server about ``seconds`` of load (two windows a group)."""
    return math.ceil(seconds / (2 * window)) if seconds > 0 else 0


def group_order(items: Sequence[T]) -> list[T]:
    """Forwards then backwards: A B B A (A B C C B A for three)."""
    return [*items, *reversed(items)]


class LoadLost(Exception):
    """A load generator exited during the windows; the message says which and why."""


def alternate(
    lanes: Sequence[Lane],
    groups: int,
    window_s: float,
    check: Callable[[], None] = lambda: None,
    first_group: int = 0,
    into: list[Window] | None = None,
) -> list[Window]:
    """Run ``groups`` groups of windows over ``lanes`` (in their order) and return every
    window. ``check`` runs between windows (an interrupt stops the loop there); each
    window is added to ``into`` as it ends, so an interrupted caller keeps those measured.
    The loads are left paused."""
    windows: list[Window] = [] if into is None else into
    order = group_order(lanes)
    for group in range(first_group, first_group + groups):
        for position, lane in enumerate(order):
            check()
            windows.append(_window(lane, group, position, window_s))
    return windows


def together(
    lanes: Sequence[Lane],
    groups: int,
    window_s: float,
    check: Callable[[], None] = lambda: None,
    first_group: int = 0,
    into: list[Window] | None = None,
) -> list[Window]:
    """A duet: every lane's load at once for ``groups`` groups of two windows, each
    window reading every server at its start and end (the order of the readings turns
    each window, so no server is always read first). Windows go to ``into`` as they end,
    as in ``alternate``. The loads are left paused."""
    windows: list[Window] = [] if into is None else into
    for lane in lanes:
        lane.load.resume()
    try:
        time.sleep(SETTLE_S)
        order = list(lanes)
        start = {lane.label: (lane.reading(), lane.load.cpu_seconds()) for lane in order}
        for group in range(first_group, first_group + groups):
            for step in range(2):
                check()
                begun = min(reading.at for reading, _ in start.values())
                time.sleep(max(0.0, begun + window_s - time.monotonic()))
                order.reverse()
                end = {lane.label: (lane.reading(), lane.load.cpu_seconds()) for lane in order}
                windows += [
                    _between(lane, group, step * len(lanes) + index, start[lane.label],
                             end[lane.label])
                    for index, lane in enumerate(lanes)
                ]  # fmt: skip
                start = end
    finally:
        for lane in lanes:
            lane.load.pause()
    return windows


def _window(lane: Lane, group: int, position: int, window_s: float) -> Window:
    lane.load.resume()
    try:
        time.sleep(SETTLE_S)
        first = lane.reading()
        cpu_first = lane.load.cpu_seconds()
        time.sleep(max(0.0, first.at + window_s - time.monotonic()))
        last = lane.reading()
    finally:
        lane.load.pause()
    return _between(lane, group, position, (first, cpu_first), (last, lane.load.cpu_seconds()))


def _between(
    lane: Lane,
    group: int,
    position: int,
    start: tuple[Reading, float],
    end: tuple[Reading, float],
) -> Window:
    """The window of ``lane`` between two (server reading, load CPU seconds) pairs,
    unless its load generator is gone."""
    problem = lane.load.problem()
    if problem:
        raise LoadLost(f"{lane.label}: {problem}")
    (first, cpu_first), (last, cpu_last) = start, end
    return Window(
        label=lane.label,
        group=group,
        position=position,
        ops=last.ops - first.ops,
        seconds=last.at - first.at,
        server_cpu_s=last.cpu_s - first.cpu_s,
        client_cpu_s=cpu_last - cpu_first,
    )


@dataclass(frozen=True)
class Totals:
    """One server's windows added up: what its trial record stores."""

    ops: float
    seconds: float
    server_cpu_s: float
    client_cpu_s: float
    windows: int

    @property
    def ops_per_sec(self) -> float | None:
        return self.ops / self.seconds if self.seconds > 0 else None

    def pct(self, cpu_s: float) -> float | None:
        return 100.0 * cpu_s / self.seconds if self.seconds > 0 else None


def complete_groups(windows: Sequence[Window], servers: int) -> list[Window]:
    """The windows of the groups that ended whole (every server loaded twice, A B B A):
    what an interrupted point keeps, balanced in time like a whole one."""
    per_group: dict[int, int] = {}
    for w in windows:
        per_group[w.group] = per_group.get(w.group, 0) + 1
    return [w for w in windows if per_group[w.group] == 2 * servers]


def totals(windows: Sequence[Window], label: str) -> Totals:
    mine = [w for w in windows if w.label == label]
    return Totals(
        ops=sum(w.ops for w in mine),
        seconds=sum(w.seconds for w in mine),
        server_cpu_s=sum(w.server_cpu_s for w in mine),
        client_cpu_s=sum(w.client_cpu_s for w in mine),
        windows=len(mine),
    )


def table(windows: Sequence[Window]) -> str:
    """The windows as text, kept with each trial (its raw output) for a later look."""
    lines = ["group position server ops seconds server_cpu_s client_cpu_s"]
    lines += [
        f"{w.group} {w.position} {w.label} {w.ops:.0f} {w.seconds:.5f} "
        f"{w.server_cpu_s:.5f} {w.client_cpu_s:.3f}"
        for w in windows
    ]
    return "\n".join(lines)
