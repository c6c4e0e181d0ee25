"""Checks of kernel settings that change how a server process runs: address layout
randomization and transparent huge pages."""

from __future__ import annotations

import re

from regtrack.core.checkup import Check, Status
from regtrack.doctor.machine import Machine

ASLR_FILE = "proc/sys/kernel/randomize_va_space"
THP_FILE = "sys/kernel/mm/transparent_hugepage/enabled"
ASLR_STATES = {"0": "off", "1": "conservative", "2": "full"}


def aslr(m: Machine) -> Check:
    """Full randomization gives each server process a new address layout, as regtrack
    gives each repetition a new hash seed: repetitions average over both. Without it one
    binary's cache and alignment luck repeats in every repetition."""
    value = m.root.text(ASLR_FILE)
    if value not in ASLR_STATES:
        shown = "missing" if value is None else f"unreadable value {value[:20]!r}"
        return Check("ASLR", Status.UNKNOWN, f"{ASLR_FILE} is {shown}")
    found = f"randomize_va_space = {value} ({ASLR_STATES[value]} randomization)"
    if value == "2":
        return Check(
            "ASLR",
            Status.OK,
            f"{found}: each server process gets a new layout, as each repetition gets a new "
            "hash seed (regtrack fixes seeds per repetition, not addresses)",
        )
    return Check(
        "ASLR",
        Status.WARNING,
        found,
        "as root: sysctl kernel.randomize_va_space=2; with a fixed layout one binary's "
        "cache and alignment luck repeats in every repetition and reads as a version's "
        "difference",
    )


def transparent_huge_pages(m: Machine) -> Check:
    """THP 'always' changes memory layout and fork latency, and Redis versions differ in
    whether they turn it off for themselves (disable-thp): versions would differ by THP."""
    text = m.root.text(THP_FILE)
    chosen = re.search(r"\[(\w+)\]", text or "")
    if not chosen:
        shown = "missing" if text is None else f"unreadable ({text[:40]!r})"
        return Check("transparent huge pages", Status.UNKNOWN, f"{THP_FILE} is {shown}")
    mode = chosen.group(1)
    if mode != "always":
        return Check("transparent huge pages", Status.OK, f"{mode}")
    return Check(
        "transparent huge pages",
        Status.WARNING,
        "always (Redis warns about it at start-up)",
        "as root: echo madvise > /sys/kernel/mm/transparent_hugepage/enabled; with always, "
        "memory use and latency depend on huge-page luck, and versions that turn THP off "
        "for themselves (disable-thp) differ from those that do not for that reason alone",
    )
