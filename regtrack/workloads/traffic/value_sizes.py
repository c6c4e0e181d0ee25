"""The value sizes a sampled file records in its header, per command argument.

``mix capture --sample`` writes the sizes it saw in the file's header (``header_lines``);
``mix capture --check`` reads them back (``recorded``) to compare with what a MONITOR
sample of the replay sees. Writer and reader are here together so the header's format is
one thing: a line that does not match it exactly is not a record, never a guess. Files
written before the distribution was recorded (min/median/max) are still read.

A distribution is kept as its sizes at five quantiles, p10 p30 p50 p70 p90: the middles
of five equally likely fifths. Drawn uniformly (a lifecycle's ``${fill:...}``), those five
sizes have p10, p50 and p90 equal to the traffic's, each in the middle of its fifth, 10
points of probability from the next size: so a few hundred draws give back the same p10,
p50 and p90 (``mix capture --check`` compares them), where ten deciles would put p10, p50
and p90 on the edges between two sizes, to flip between them from one sample to the next.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

QUANTILES = (0.1, 0.3, 0.5, 0.7, 0.9)
NARROW = 1.5  # sizes are about one value where the largest is at most this x the smallest
MIN_DRAWN = 20  # fewer sizes seen: too few for their quantiles to mean much
TITLE = "# Value sizes (bytes, min/p10/p30/p50/p70/p90/max):"
OLD_TITLE = "# Value sizes (bytes, min/median/max):"
_NAME = r"^#   ([A-Z][A-Z0-9_|.-]*) argument (\d+): "
_LINE = re.compile(_NAME + r"(\d+)/(\d+)/(\d+)/(\d+)/(\d+)/(\d+)/(\d+) over (\d+)$")
_OLD_LINE = re.compile(_NAME + r"(\d+)/(\d+)/(\d+) over (\d+)$")
FILL = re.compile(r"^\$\{fill:(\d+(?:,\d+)*)\}$")
# What the engine writes in a value at its own size: a task's id is 32 hex digits (a uuid
# seen is 36), a time is the engine's clock's
ENGINE_SIZED = re.compile(r"\$\{(task|id|rand|consumer|now|now_ms)\}")


def quantiles(values: Sequence[int]) -> tuple[int, ...]:
    """``values``' sizes at QUANTILES (linear between ranks, as statistics.median: the p50
    is the median), whole bytes."""
    if len(values) == 1:
        return (int(values[0]),) * len(QUANTILES)
    deciles = statistics.quantiles(values, n=10, method="inclusive")
    return tuple(int(deciles[round(10 * q) - 1]) for q in QUANTILES)


def varied(low: int, high: int, n: int) -> bool:
    """Whether sizes seen vary enough (and are enough) to be written as their distribution."""
    return n >= MIN_DRAWN and high > NARROW * low


@dataclass(frozen=True)
class SizeRecord:
    """The sizes (bytes) the sample saw at one argument position of one command."""

    command: str  # upper case, as MONITOR shows it
    position: int  # 1-based, after the command name
    low: int
    median: int
    high: int
    n: int
    quantiles: tuple[int, ...] = ()  # at QUANTILES (p50 the median); () in an older file

    def line(self) -> str:
        sizes = [self.low, *self.quantiles, self.high]
        return (
            f"#   {self.command} argument {self.position}: "
            f"{'/'.join(map(str, sizes))} over {self.n}"
        )

    @property
    def p10(self) -> int | None:
        return self.quantiles[0] if self.quantiles else None

    @property
    def p90(self) -> int | None:
        return self.quantiles[-1] if self.quantiles else None


def header_lines(records: Iterable[SizeRecord]) -> list[str]:
    """The header block: the title, then one line per record (none: no block). Every
    record must carry its quantiles."""
    lines = []
    for r in records:
        assert len(r.quantiles) == len(QUANTILES), r
        lines.append(r.line())
    return [TITLE, *lines] if lines else []


def recorded(text: str) -> list[SizeRecord]:
    """The records of a file's header block, in order; [] where it has none (a capture
    without --sample, a hand-written mix). A line whose sizes are not in order ends the
    block too."""
    lines = text.splitlines()
    if TITLE in lines:
        start, pattern = lines.index(TITLE) + 1, _LINE
    elif OLD_TITLE in lines:
        start, pattern = lines.index(OLD_TITLE) + 1, _OLD_LINE
    else:
        return []
    out = []
    for line in lines[start:]:
        m = pattern.match(line)
        if not m:
            break
        cmd, position, *numbers = m.groups()
        *sizes, n = map(int, numbers)
        if sizes != sorted(sizes):
            break
        if pattern is _OLD_LINE:
            out.append(SizeRecord(cmd, int(position), *sizes, n))
        else:
            low, *inner, high = sizes
            out.append(SizeRecord(cmd, int(position), low, inner[2], high, n, tuple(inner)))
    return out


def _at(commands: Iterable[Sequence[str]]) -> dict[tuple[str, int], list[str]]:
    at: dict[tuple[str, int], list[str]] = {}
    for args in commands:
        for i, arg in enumerate(args[1:], start=1):
            at.setdefault((args[0].upper(), i), []).append(arg)
    return at


def engine_sized(commands: Iterable[Sequence[str]]) -> set[tuple[str, int]]:
    """The (command, position) pairs where a lifecycle's command holds an id or a time the
    engine writes (ENGINE_SIZED): their sizes are the engine's, not the traffic's."""
    return {key for key, args in _at(commands).items() if any(map(ENGINE_SIZED.search, args))}


def shared(commands: Iterable[Sequence[str]]) -> set[tuple[str, int]]:
    """The (command, position) pairs a lifecycle's commands reach with different arguments
    (RQ's two HSETs of a job's fields, its status "queued" in one, "finished" in the
    other): MONITOR shows their mixture, in the file's fixed proportions, whose median can
    sit on the edge between two sizes (6 and 8 bytes, once a task each)."""
    return {key for key, args in _at(commands).items() if len(set(args)) > 1}


def drawn(commands: Iterable[Sequence[str]]) -> set[tuple[str, int]]:
    """The (command, position) pairs a lifecycle's commands send as a distribution: the
    one command of its name with an argument there, that argument one ``${fill:...}`` of
    more than one size. Where several commands of one name reach a position (RQ's HSETs,
    each with its own fields), MONITOR shows their mixture, which the file does not state."""
    return {
        key for key, args in _at(commands).items()
        if len(args) == 1 and (m := FILL.match(args[0])) and len(set(m[1].split(","))) > 1
    }  # fmt: skip
