"""A captured mix checked against the traffic it came from: shares, value sizes, CPU.

Both sides are counted alike, by the servers' own counters over a window (INFO
commandstats and INFO cpu deltas): the live server's traffic (real) and a fresh server
replaying the file (replay). A command's share is its calls over all calls; the replay is
faithful where every command with at least GATED_SHARE of either side's calls is within
SHARE_BOUND of its real share (relative), and every recorded value size of such a
command within SIZE_BOUND: its median where the sample's sizes are about one value
(SizeRow.narrow), its p10, p50 and p90 where the file draws it from its distribution (a
lifecycle's ${fill:...}: SizeRow.spread).
Server CPU per task is shown against CPU_BOUND but does not
decide: the replay runs flat out, the real server at its own load, and a server's CPU per
command falls as its load rises (more commands per event-loop turn).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from regtrack.core.records import CommandReading
from regtrack.workloads.traffic import value_sizes
from regtrack.workloads.traffic.shapes import Sizes
from regtrack.workloads.traffic.value_sizes import SizeRecord

GATED_SHARE = 0.01  # commands under 1% of both sides' calls are shown, not judged
SHARE_BOUND = 0.10  # the bound: within 10% of the real share
SIZE_BOUND = 0.10
CPU_BOUND = 0.15
NARROW = value_sizes.NARROW  # judged by the median where the largest <= this x the smallest


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


def _close(replay: int | None, real: int | None) -> bool:
    """Within SIZE_BOUND, or one byte where that is less (sizes are whole bytes: a 7-byte
    value is never within 10% of 8)."""
    if replay is None or real is None:
        return False
    return abs(replay - real) <= max(SIZE_BOUND * real, 1)


@dataclass(frozen=True)
class SizeRow:
    """One value argument: the sizes the capture's sample saw (the file's header) and those
    a MONITOR sample of the replay saw (None: the replay never sent it)."""

    command: str  # as MONITOR names it (upper case)
    position: int
    real: SizeRecord
    replay: Sizes | None
    frequent: bool  # its command has at least GATED_SHARE of the real calls
    drawn: bool = False  # the file draws its size from the real distribution (${fill:...})
    engine: bool = False  # the file holds an id or a time the engine writes there
    shared: bool = False  # several of the file's commands reach it (a mixture)

    @property
    def real_low(self) -> int:
        return self.real.low

    @property
    def real_median(self) -> int:
        return self.real.median

    @property
    def real_high(self) -> int:
        return self.real.high

    @property
    def narrow(self) -> bool:
        """The real sizes are about one value, so their median stands for them. A wide
        range (one position of a command holding different fields in different calls, an
        HSET of 15 fields and one of 3) makes the median of the mixture flip between
        its modes from sample to sample: shown, not judged, unless the file draws the
        size from its distribution."""
        return self.real_high <= NARROW * self.real_low

    @property
    def spread(self) -> bool:
        """Judged by its distribution (p10, p50, p90): the file draws the size from it and
        the header recorded it."""
        return self.drawn and bool(self.real.quantiles)

    @property
    def gated(self) -> bool:
        return (
            self.frequent and not self.engine and not self.shared and (self.narrow or self.spread)
        )

    def pairs(self) -> list[tuple[str, int | None, int | None]]:
        """(quantile, real, replay) as judged: p50 alone, or p10, p50 and p90 (spread)."""
        replay = self.replay
        median = ("p50", self.real_median, None if replay is None else replay.median)
        if not self.spread:
            return [median]
        q = replay.quantiles if replay is not None else ()
        return [("p10", self.real.p10, q[0] if q else None), median,
                ("p90", self.real.p90, q[-1] if q else None)]  # fmt: skip

    @property
    def off(self) -> float | None:
        """The median's relative difference (the one shown first)."""
        replay = None if self.replay is None else float(self.replay.median)
        return relative(replay, self.real_median)

    @property
    def within(self) -> bool:
        return not self.gated or all(_close(sent, real) for _, real, sent in self.pairs())


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


@dataclass(frozen=True)
class SizeSides:
    """One recorded argument for compare: what the header says, what the replay sent."""

    real: SizeRecord
    replay: Sizes | None  # None: the replay's sample never had it
    drawn: bool = False  # the file draws its size from its distribution (value_sizes.drawn)
    engine: bool = False  # an id or a time of the engine's (value_sizes.engine_sized)
    shared: bool = False  # several commands of the file reach it (value_sizes.shared)


def compare(
    real: CommandReading,
    replay: CommandReading,
    sizes: Sequence[SizeSides] = (),
    task: str | None = None,
    replay_errors: dict[str, int] | None = None,
) -> Check:
    """``sizes``: per recorded argument, both sides;
    ``task``: the commandstats name one task calls once (None: per command)."""
    names = sorted(set(real.calls) | set(replay.calls), key=lambda c: (-real.share(c), c))
    rows = tuple(
        Row(c, real.share(c), replay.share(c), real.us_per_call(c), replay.us_per_call(c))
        for c in names
    )
    size_rows = tuple(
        SizeRow(s.real.command, s.real.position, s.real, s.replay,
                real.share(s.real.command.lower()) >= GATED_SHARE, s.drawn, s.engine, s.shared)
        for s in sizes
    )  # fmt: skip
    cpu = CpuPerTask(task, _per_task(real, task), _per_task(replay, task))
    return Check(real, replay, rows, size_rows, cpu, dict(replay_errors or {}))
