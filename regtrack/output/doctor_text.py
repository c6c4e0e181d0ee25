"""`regtrack doctor` for people (a table: status, check, what was found, what to change)
and for machines (JSON with a schema_version).

What a check found is read from /proc and /sys, process names too (another local user
chooses those): shown printable (core/text.py).
"""

from __future__ import annotations

import json
import textwrap

from regtrack.core.checkup import Checkup, Status
from regtrack.core.text import printable

WIDTH = 100
MARKS = {Status.OK: "ok", Status.WARNING: "WARNING", Status.PROBLEM: "PROBLEM", Status.UNKNOWN: "?"}


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def headline(checkup: Checkup) -> str:
    """The first line: the plan and whether numbers measured here can be trusted."""
    counts = {s: sum(c.status is s for c in checkup.checks) for s in Status}
    plan = (
        f"server on CPU {checkup.server_cpus}, load generator on CPU {checkup.client_cpus}"
        if checkup.server_cpus is not None
        else "no CPU plan fits"
    )
    verdict = (
        f"cannot measure trustworthy numbers here (exit {checkup.exit_code}): "
        + ", ".join(printable(c.name) for c in checkup.problems)
        if checkup.problems
        else "numbers measured here can be trusted"
    )
    return (
        f"regtrack doctor: {plan}; {_count(counts[Status.PROBLEM], 'problem')}, "
        f"{_count(counts[Status.WARNING], 'warning')}, {counts[Status.UNKNOWN]} unknown: "
        f"{verdict}"
    )


def render_text(checkup: Checkup) -> str:
    """One row per check; below a warning or problem, what to change."""
    names = [printable(c.name) for c in checkup.checks]
    name_width = max(map(len, names), default=0)
    indent = " " * (9 + name_width + 2)
    lines = [headline(checkup), ""]
    for check, name in zip(checkup.checks, names, strict=True):
        head = f"{MARKS[check.status]:<9}{name:<{name_width}}  "
        lines += textwrap.wrap(
            printable(check.found, None),
            WIDTH,
            initial_indent=head,
            subsequent_indent=indent,
            break_on_hyphens=False,
        ) or [head.rstrip()]
        if check.advice and check.status is not Status.OK:
            lines += textwrap.wrap(
                printable(check.advice, None),
                WIDTH,
                initial_indent=indent + "-> ",
                subsequent_indent=indent + "   ",
                break_on_hyphens=False,
            )
    return "\n".join(lines)


def render_json(checkup: Checkup) -> str:
    return json.dumps(checkup.as_dict(), indent=2)
