"""A captured mix checked against the traffic it came from: shares, value sizes, CPU.

Both sides are counted alike, by the servers' own counters over a window (INFO
commandstats and INFO cpu deltas): the live server's traffic (real) and a fresh server
replaying the file (replay). A command's share is its calls over all calls; the replay is
faithful where every command with at least GATED_SHARE of either side's calls is within
SHARE_BOUND of its real share (relative), and every recorded value size of such a
command within SIZE_BOUND where the sample's sizes are about one value (SizeRow.narrow).
Server CPU per task is shown against CPU_BOUND but does not
decide: the replay runs flat out, the real server at its own load, and a server's CPU per
command falls as its load rises (more commands per event-loop turn).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from regtrack.core.records import CommandReading

GATED_SHARE = 0.01  # commands under 1% of both sides' calls are shown, not judged
SHARE_BOUND = 0.10  # the bound: within 10% of the real share
SIZE_BOUND = 0.10
CPU_BOUND = 0.15
NARROW = 1.5  # sizes are judged where the sample's largest is at most this x its smallest


def relative(replay: float | None, real: float | None) -> float | None:
    """replay / real - 1; inf where only the replay has it, None where neither does."""
    if replay is None or real is None:
        return None
    if real == 0:
        return 0.0 if replay == 0 else math.inf
    return replay / real - 1


@dataclass(frozen=True)
class Row:
    """One command: its share of the real traffic and of the replay's."""

    command: str
    real_share: float
    replay_share: float
    real_us: float | None  # server microseconds per call (commandstats usec)
    replay_us: float | None

    @property
    def gated(self) -> bool:
        return max(self.real_share, self.replay_share) >= GATED_SHARE

    @property
    def off(self) -> float | None:
        return relative(self.replay_share, self.real_share)

    @property
    def within(self) -> bool:
        off = self.off
        return not self.gated or (off is not None and abs(off) <= SHARE_BOUND)


@dataclass(frozen=True)
class SizeRow:
    """One value argument: the median size the capture's sample saw (with its range) and
    the one a MONITOR sample of the replay saw (None: the replay never sent it)."""

    command: str  # as MONITOR names it (upper case)
    position: int
    real_low: int
    real_median: int
    real_high: int
    replay: int | None
    frequent: bool  # its command has at least GATED_SHARE of the real calls

    @property
    def narrow(self) -> bool:
        """The real sizes are about one value, so their median stands for them. A wide
        range (one position of a command holding different fields in different calls, an
        HSET of 15 fields and one of 3) makes the median of the mixture flip between
        its modes from sample to sample: shown, not judged."""
        return self.real_high <= NARROW * self.real_low

    @property
    def gated(self) -> bool:
        return self.frequent and self.narrow

    @property
    def off(self) -> float | None:
        return relative(None if self.replay is None else float(self.replay), self.real_median)

    @property
    def within(self) -> bool:
        """Within SIZE_BOUND, or one byte where that is less (sizes are whole bytes: a
        7-byte value is never within 10% of 8)."""
        if not self.gated:
            return True
        if self.replay is None:
            return False
        return abs(self.replay - self.real_median) <= max(SIZE_BOUND * self.real_median, 1)


@dataclass(frozen=True)
class CpuPerTask:
    """Server CPU (INFO used_cpu_user + used_cpu_sys) per task, real and replayed. A task
    is one call of ``task`` where one is given, else one command (any)."""

    task: str | None
    real_us: float | None
    replay_us: float | None

    @property
    def off(self) -> float | None:
        return relative(self.replay_us, self.real_us)

    @property
    def within(self) -> bool:
        off = self.off
        return off is not None and abs(off) <= CPU_BOUND


@dataclass(frozen=True)
class Check:
    """The whole comparison: rows by real share (largest first), sizes, CPU per task."""

    real: CommandReading
    replay: CommandReading
    rows: tuple[Row, ...]
    sizes: tuple[SizeRow, ...]
    cpu: CpuPerTask
    replay_errors: dict[str, int] = field(default_factory=dict)  # errorstats of the replay

    @property
    def off_rows(self) -> list[Row]:
        return [r for r in self.rows if not r.within]

    @property
    def off_sizes(self) -> list[SizeRow]:
        return [s for s in self.sizes if not s.within]

    @property
    def faithful(self) -> bool:
        return not self.off_rows and not self.off_sizes


@dataclass(frozen=True)
class Replayed:
    """The check, and how its sides were read (shown with it)."""

    check: Check
    url: str  # the live server's, credentials redacted
    loadgen: str
    server_cpus: str
    client_cpus: str
    pipeline: int
    paced: bool = False  # replayed at the live task rate (a lifecycle), not flat out


def _per_task(reading: CommandReading, task: str | None) -> float | None:
    count = reading.calls.get(task, 0) if task else reading.total
    return 1e6 * reading.cpu_s / count if count else None


def compare(
    real: CommandReading,
    replay: CommandReading,
    sizes: Sequence[tuple[str, int, tuple[int, int, int], int | None]] = (),
    task: str | None = None,
    replay_errors: dict[str, int] | None = None,
) -> Check:
    """``sizes``: (command, position, real (min, median, max), replay median) per recorded
    argument;
    ``task``: the commandstats name one task calls once (None: per command)."""
    names = sorted(set(real.calls) | set(replay.calls), key=lambda c: (-real.share(c), c))
    rows = tuple(
        Row(c, real.share(c), replay.share(c), real.us_per_call(c), replay.us_per_call(c))
        for c in names
    )
    size_rows = tuple(
        SizeRow(cmd, pos, *seen, sent, real.share(cmd.lower()) >= GATED_SHARE)
        for cmd, pos, seen, sent in sizes
    )
    cpu = CpuPerTask(task, _per_task(real, task), _per_task(replay, task))
    return Check(real, replay, rows, size_rows, cpu, dict(replay_errors or {}))
