"""Read a callgrind profile: total instructions and per-function exclusive/inclusive cost.

Parsed directly from the documented format (valgrind manual, "Callgrind Format
Specification") instead of scraping callgrind_annotate's text: name compression
``(id) name``, relative positions ``+n``/``-n``/``*``, and the rule that the cost line after
``calls=`` is the inclusive cost of that call, not the caller's own cost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from regtrack.core.records import FunctionCost

_NAME_RE = re.compile(r"^\((\d+)\)(?:\s(.*))?$")
_COST_START = re.compile(r"^[0-9+\-*]|^0x")


@dataclass
class Profile:
    """One callgrind dump: the event totals and every function's cost."""

    events: list[str]
    totals: dict[str, int]
    functions: dict[tuple[str, str, str], FunctionCost] = field(default_factory=dict)

    @property
    def instructions(self) -> int:
        return self.totals.get("Ir", 0)

    def by_key(self) -> dict[str, FunctionCost]:
        """Costs by symbol name, summed over the files and objects it appears in; the file
        and object kept are those of its costliest part."""
        merged: dict[str, FunctionCost] = {}
        heaviest: dict[str, int] = {}
        for cost in self.functions.values():
            item = merged.setdefault(cost.key, FunctionCost(cost.function, cost.file, cost.object))
            item.exclusive += cost.exclusive
            item.inclusive += cost.inclusive
            if cost.exclusive > heaviest.get(cost.key, -1):
                heaviest[cost.key] = cost.exclusive
                item.file, item.object = cost.file, cost.object
        return merged


class _Names:
    """One compression table (files, functions or objects)."""

    def __init__(self) -> None:
        self.table: dict[str, str] = {}

    def decode(self, text: str) -> str:
        text = text.strip()
        m = _NAME_RE.match(text)
        if not m:
            return text
        ident, name = m.group(1), m.group(2)
        if name is not None:
            self.table[ident] = name
            return name
        return self.table.get(ident, f"({ident})")


def parse(path: str | Path) -> Profile:
    files, functions, objects = _Names(), _Names(), _Names()
    events: list[str] = ["Ir"]
    n_positions = 1
    totals: dict[str, int] = {}
    summary: dict[str, int] = {}
    profile = Profile(events=events, totals=totals)

    current: FunctionCost | None = None
    ob = fl = "???"
    call_pending = False

    def costs_of(line: str) -> list[int]:
        parts = line.split()
        values = parts[n_positions:]
        out = []
        for v in values:
            try:
                out.append(int(v))
            except ValueError:
                out.append(0)
        return out

    with open(path, errors="replace") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            if _COST_START.match(line):
                values = costs_of(line)
                ir = values[0] if values else 0
                if current is None:
                    continue
                if call_pending:
                    current.inclusive += ir
                    call_pending = False
                else:
                    current.exclusive += ir
                    current.inclusive += ir
                continue
            key, _, value = line.partition("=")
            if key == "fn":
                name = functions.decode(value)
                ident = (ob, fl, name)
                current = profile.functions.get(ident)
                if current is None:
                    current = FunctionCost(function=name, file=fl, object=ob)
                    profile.functions[ident] = current
                call_pending = False
            elif key == "fl":
                fl = files.decode(value)
            elif key in ("fi", "fe", "cfi", "cfl"):
                files.decode(value)
            elif key == "ob":
                ob = objects.decode(value)
            elif key == "cob":
                objects.decode(value)
            elif key == "cfn":
                functions.decode(value)
            elif key == "calls":
                call_pending = True
            elif key in ("jump", "jcnd"):
                call_pending = False
            else:
                header, _, rest = line.partition(":")
                if header == "events":
                    events[:] = rest.split()
                elif header == "positions":
                    n_positions = len(rest.split())
                elif header in ("totals", "summary"):
                    target = totals if header == "totals" else summary
                    for name, v in zip(events, rest.split(), strict=False):
                        target[name] = int(v)
    if not totals:
        totals.update(summary)
    if not totals:
        totals["Ir"] = sum(c.exclusive for c in profile.functions.values())
    return profile
