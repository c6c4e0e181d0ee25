"""The value sizes a sampled file records in its header, per command argument.

``mix capture --sample`` writes the sizes it saw in the file's header (``header_lines``);
``mix capture --check`` reads them back (``recorded``) to compare with what a MONITOR
sample of the replay sees. Writer and reader are here together so the header's format is
one thing: a line that does not match it exactly is not a record, never a guess.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

TITLE = "# Value sizes (bytes, min/median/max):"
_LINE = re.compile(r"^#   ([A-Z][A-Z0-9_|.-]*) argument (\d+): (\d+)/(\d+)/(\d+) over (\d+)$")


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
