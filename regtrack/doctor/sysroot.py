"""Reading /proc and /sys below a root that tests can move to a crafted tree.

Every reader answers None for a file that is missing, unreadable or not text: containers
and other kernels leave out much of /proc and /sys, and doctor reports those as unknown
rather than failing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MAX_BYTES = 1 << 20  # no kernel file doctor reads is longer; a crafted one is cut here
_RANGE = re.compile(r"[0-9]{1,6}(-[0-9]{1,6})?")


@dataclass(frozen=True)
class SysRoot:
    """The directory holding proc/ and sys/ ("/" on a real machine)."""

    root: Path = Path("/")

    def path(self, relative: str) -> Path:
        return self.root / relative.lstrip("/")

    def text(self, relative: str) -> str | None:
        """The file's text, stripped, or None when it cannot be read as text."""
        try:
            with self.path(relative).open("rb") as f:
                data = f.read(MAX_BYTES)
            return data.decode("utf-8", errors="replace").strip()
        except (OSError, ValueError):
            return None

    def names(self, relative: str) -> list[str]:
        """The entries of a directory (sorted), or [] when it cannot be listed."""
        try:
            return sorted(p.name for p in self.path(relative).iterdir())
        except (OSError, ValueError):
            return []

    def exists(self, relative: str) -> bool:
        try:
            return self.path(relative).exists()
        except (OSError, ValueError):
            return False


def cpu_list(text: str | None) -> tuple[int, ...] | None:
    """The kernel's CPU list syntax ("0-3,5") read leniently: None when it is not one."""
    if text is None:
        return None
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if not _RANGE.fullmatch(part):
            return None
        lo, _, hi = part.partition("-")
        first, last = int(lo), int(hi or lo)
        if last < first or last - first > 65536:
            return None
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))
