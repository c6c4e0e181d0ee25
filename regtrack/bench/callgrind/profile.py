"""Read a callgrind profile: event totals and per-function exclusive/inclusive costs.

Parsed directly from the documented format (valgrind manual, "Callgrind Format
Specification") instead of scraping callgrind_annotate's text: name compression
``(id) name``, relative positions ``+n``/``-n``/``*``, and the rule that the cost line after
``calls=`` is the inclusive cost of that call, not the caller's own cost. A cost line
lists one value per event, trailing zeros left out. With the cache and branch simulation
on (--metric cycles) every event is kept, per function too; with instructions alone the
reader takes the first value and nothing else (a dump holds a million cost lines).
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
    # The simulated caches as the dump's ``desc:`` lines describe them ("I1 cache: 32768
    # B, 64 B, 8-way associative"), in order; empty without the cache simulation.
    caches: list[str] = field(default_factory=list)

    @property
    def geometry(self) -> str:
        """The simulated caches in one line (core/cycles.geometry_text's form)."""
        return "; ".join(self.caches)

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
            add_events(item, cost)
            if cost.exclusive > heaviest.get(cost.key, -1):
                heaviest[cost.key] = cost.exclusive
                item.file, item.object = cost.file, cost.object
        return merged


def add_events(into: FunctionCost, cost: FunctionCost) -> None:
    """``cost``'s per-event counts added to ``into``'s (nothing without the simulation)."""
    for mine, theirs in (
        (into.exclusive_events, cost.exclusive_events),
        (into.inclusive_events, cost.inclusive_events),
    ):
        for event, value in theirs.items():
            mine[event] = mine.get(event, 0) + value


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
    """A callgrind output file's totals and per-function costs (exclusive and inclusive
    Ir), from its cost lines and their fn/ob/fl/calls specifications."""
    reader = _Reader()
    with open(path, errors="replace") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            if _COST_START.match(line):
                reader.cost(line)
            else:
                reader.spec(line)
    return reader.finished()


class _Reader:
    """The state of one pass over a callgrind file: names compressed to ids, the current
    object, file and function, and whether the next cost line is a call's (inclusive)."""

    def __init__(self) -> None:
        self.files, self.functions, self.objects = _Names(), _Names(), _Names()
        self.n_positions = 1
        self.summary: dict[str, int] = {}
        self.profile = Profile(events=["Ir"], totals={})
        self.current: FunctionCost | None = None
        self.ob = self.fl = "???"
        self.call_pending = False
        # Per function (by identity in self.profile.functions): every event's exclusive
        # and inclusive counts, while there is more than one event.
        self.vectors: dict[int, tuple[list[int], list[int]]] = {}
        self.current_vectors: tuple[list[int], list[int]] | None = None

    def cost(self, line: str) -> None:
        if self.current is None:
            return
        fields = line.split()[self.n_positions :]
        if self.current_vectors is not None:
            self._costs(fields, *self.current_vectors)
            return
        try:
            ir = int(fields[0]) if fields else 0
        except ValueError:
            ir = 0
        if self.call_pending:
            self.current.inclusive += ir
            self.call_pending = False
        else:
            self.current.exclusive += ir
            self.current.inclusive += ir

    def _costs(self, fields: list[str], exclusive: list[int], inclusive: list[int]) -> None:
        """Every event's value of one cost line (the simulation's several events)."""
        own = not self.call_pending
        self.call_pending = False
        for i, v in enumerate(fields[: len(inclusive)]):
            try:
                value = int(v)
            except ValueError:
                continue
            inclusive[i] += value
            if own:
                exclusive[i] += value

    def spec(self, line: str) -> None:
        key, _, value = line.partition("=")
        if key == "fn":
            name = self.functions.decode(value)
            ident = (self.ob, self.fl, name)
            self.current = self.profile.functions.get(ident)
            if self.current is None:
                self.current = FunctionCost(function=name, file=self.fl, object=self.ob)
                self.profile.functions[ident] = self.current
            if len(self.profile.events) > 1:
                n = len(self.profile.events)
                self.current_vectors = self.vectors.setdefault(id(self.current), ([0] * n, [0] * n))
            self.call_pending = False
        elif key == "fl":
            self.fl = self.files.decode(value)
        elif key in ("fi", "fe", "cfi", "cfl"):
            self.files.decode(value)
        elif key == "ob":
            self.ob = self.objects.decode(value)
        elif key == "cob":
            self.objects.decode(value)
        elif key == "cfn":
            self.functions.decode(value)
        elif key == "calls":
            self.call_pending = True
        elif key in ("jump", "jcnd"):
            self.call_pending = False
        else:
            self.header(line)

    def header(self, line: str) -> None:
        header, _, rest = line.partition(":")
        events = self.profile.events
        if header == "events":
            events[:] = rest.split()
        elif header == "desc" and " cache:" in rest:
            self.profile.caches.append(" ".join(rest.split()))
        elif header == "positions":
            self.n_positions = len(rest.split())
        elif header in ("totals", "summary"):
            target = self.profile.totals if header == "totals" else self.summary
            for name, v in zip(events, rest.split(), strict=False):
                target[name] = int(v)

    def finished(self) -> Profile:
        events = self.profile.events
        if len(events) > 1:
            for cost in self.profile.functions.values():
                exclusive, inclusive = self.vectors.get(id(cost), ([], []))
                cost.exclusive_events = dict(zip(events, exclusive, strict=False))
                cost.inclusive_events = dict(zip(events, inclusive, strict=False))
                cost.exclusive = cost.exclusive_events.get("Ir", 0)
                cost.inclusive = cost.inclusive_events.get("Ir", 0)
        totals = self.profile.totals
        if not totals:
            totals.update(self.summary)
        if not totals:
            totals["Ir"] = sum(c.exclusive for c in self.profile.functions.values())
        return self.profile
