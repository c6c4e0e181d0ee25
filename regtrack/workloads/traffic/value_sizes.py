"""Value sizes a sampled file records and the ones it replays, per command argument.

``mix capture --sample`` writes the sizes it saw in the file's header (``header_lines``);
``mix capture --check`` reads them back (``recorded``) to compare with what the file's
arguments send (``replayed``). Writer and reader are here together so the header's format
is one thing: a line that does not match it exactly is not a record, never a guess.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from regtrack.workloads.model import MixWorkload

TITLE = "# Value sizes (bytes, min/median/max):"
_LINE = re.compile(r"^#   ([A-Z][A-Z0-9_|.-]*) argument (\d+): (\d+)/(\d+)/(\d+) over (\d+)$")
DATA = "__data__"
KEY = "__key__"


@dataclass(frozen=True)
class SizeRecord:
    """The sizes (bytes) the sample saw at one argument position of one command."""

    command: str  # upper case, as MONITOR shows it
    position: int  # 1-based, after the command name
    low: int
    median: int
    high: int
    n: int

    def line(self) -> str:
        return (
            f"#   {self.command} argument {self.position}: "
            f"{self.low}/{self.median}/{self.high} over {self.n}"
        )


def header_lines(records: Iterable[SizeRecord]) -> list[str]:
    """The header block: the title, then one line per record (none: no block)."""
    lines = [r.line() for r in records]
    return [TITLE, *lines] if lines else []


def recorded(text: str) -> list[SizeRecord]:
    """The records of a file's header block, in order; [] where it has none (a capture
    without --sample, a hand-written mix)."""
    lines = text.splitlines()
    try:
        start = lines.index(TITLE) + 1
    except ValueError:
        return []
    out = []
    for line in lines[start:]:
        m = _LINE.match(line)
        if not m:
            break
        cmd, *numbers = m.groups()
        position, low, median, high, n = map(int, numbers)
        out.append(SizeRecord(cmd, position, low, median, high, n))
    return out


def replayed(workload: MixWorkload, command: str, position: int) -> int | None:
    """The size the file sends at ``position`` of ``command``: the median over the file's
    commands of that name, weighted by their ratios (``__data__`` is data_size, a
    ``__key__`` a number as long as the largest key's); None where none has it."""
    digits = len(str(workload.keys))
    sizes: list[int] = []
    for c in workload.all_commands:
        if c.args[0].upper() != command or len(c.args) <= position:
            continue
        arg = c.args[position]
        size = workload.data_size if arg == DATA else len(arg.replace(KEY, "0" * digits))
        sizes += [size] * c.ratio
    return int(statistics.median_low(sizes)) if sizes else None
