"""Which system calls moved: a comparison's syscalls per op, call by call.

The gate reads one number (syscalls per op, pooled over the sweep like every metric); this
says which calls made it move, as `explain` says which functions moved instructions: per
syscall, the calls per operation of each side (the median over valid trials of each
point, averaged over the points both sides measured), from the trials the metric was read
from (analysis/cells.rows_for). Only trials counted by name have a breakdown
(bench/kernel_calls.py); a run counted by /proc/PID/io has none.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from regtrack.analysis.records import JsonRecord

if TYPE_CHECKING:  # output reads the records without loading pandas
    import pandas as pd

# Calls per op below this on both sides are not shown: noise of time-driven work.
SHOWN_PER_OP = 0.0005
# A breakdown lists at most this many calls, the largest moves first.
MOST = 8


@dataclass(frozen=True, kw_only=True)
class SyscallChange(JsonRecord):
    """One syscall's calls per operation on each side."""

    name: str
    baseline_per_op: float
    candidate_per_op: float

    @property
    def delta_per_op(self) -> float:
        return self.candidate_per_op - self.baseline_per_op

    @property
    def change_pct(self) -> float | None:
        """None where the baseline never made the call (a new call)."""
        if self.baseline_per_op <= 0:
            return None
        return 100.0 * (self.candidate_per_op / self.baseline_per_op - 1.0)


@dataclass(frozen=True, kw_only=True)
class SyscallBreakdown(JsonRecord):
    """One candidate's syscalls against the baseline in one workload, largest moves first."""

    workload: str
    baseline: str
    candidate: str
    points: tuple[str, ...]
    calls: tuple[SyscallChange, ...]

    def moved(self) -> list[SyscallChange]:
        """The calls whose count per op moved visibly, either way."""
        return [c for c in self.calls if abs(c.delta_per_op) >= SHOWN_PER_OP]

    def rose(self, at_least: float = SHOWN_PER_OP) -> list[SyscallChange]:
        """The calls made more often per op (by at least ``at_least``)."""
        return [c for c in self.calls if c.delta_per_op >= at_least]


def per_op(rows: pd.DataFrame, label: str) -> dict[str, dict[str, float]]:
    """point -> syscall -> median calls per op over ``label``'s valid trials counted by
    name (a call a trial did not make counts 0 in it)."""
    by_point: dict[str, list[Mapping[str, int]]] = {}
    ops: dict[str, list[float]] = {}
    columns = ("target", "valid", "point", "server_calls", "syscalls_by_name")
    for target, valid, point, calls, named in zip(*(rows[c] for c in columns), strict=True):
        if target != label or not valid or named is None or not calls > 0:  # NaN too
            continue
        by_point.setdefault(point, []).append(named)
        ops.setdefault(point, []).append(float(calls))
    out: dict[str, dict[str, float]] = {}
    for point, trials in by_point.items():
        names = {name for named in trials for name in named}
        out[point] = {
            name: statistics.median(
                named.get(name, 0) / n for named, n in zip(trials, ops[point], strict=True)
            )
            for name in names
        }
    return out


def breakdown(
    rows: pd.DataFrame, workload: str, baseline: str, candidate: str
) -> SyscallBreakdown | None:
    """The candidate's calls per op against the baseline's over the points both measured
    by name; None where no point was."""
    if rows.empty or "syscalls_by_name" not in rows:
        return None
    mine = rows[rows["workload"] == workload]
    base, cand = per_op(mine, baseline), per_op(mine, candidate)
    points = tuple(p for p in base if p in cand)
    if not points:
        return None
    names = {n for p in points for n in (*base[p], *cand[p])}
    calls = []
    for name in names:
        b = _mean(base[p].get(name, 0.0) for p in points)
        c = _mean(cand[p].get(name, 0.0) for p in points)
        if max(b, c) >= SHOWN_PER_OP:
            calls.append(SyscallChange(name=name, baseline_per_op=b, candidate_per_op=c))
    calls.sort(key=lambda c: (-abs(c.delta_per_op), c.name))
    return SyscallBreakdown(
        workload=workload,
        baseline=baseline,
        candidate=candidate,
        points=points,
        calls=tuple(calls[:MOST]),
    )


def _mean(values: Any) -> float:
    items = [v for v in values if not math.isnan(v)]
    return sum(items) / len(items) if items else 0.0


def text(change: SyscallChange) -> str:
    """ "getppid +1.000/op (0 -> 1.000)" or "epoll_wait +0.004/op (+12.0%)" """
    pct = change.change_pct
    how = (
        f"{change.baseline_per_op:.3g} -> {change.candidate_per_op:.3g}"
        if pct is None
        else f"{pct:+.1f}%"
    )
    return f"{change.name} {change.delta_per_op:+.3f}/op ({how})"


def alike(base: pd.DataFrame, cand: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two runs' trials with syscalls per op counted alike: by name only where both were.
    A baseline stored before, or measured where the tracepoints could not be opened,
    holds read and write calls alone (/proc/PID/io): against a count of every call it
    would read as a regression of every other call."""
    named = [
        "syscalls_by_name" in t and not t["syscalls_by_name"].isna().all() for t in (base, cand)
    ]
    if named[0] == named[1]:
        return base, cand
    return _io_syscalls(base), _io_syscalls(cand)


def _io_syscalls(trials: pd.DataFrame) -> pd.DataFrame:
    calls = trials["server_calls"].astype("float64")
    io = trials["syscalls_read"].astype("float64") + trials["syscalls_write"].astype("float64")
    return trials.assign(syscalls_per_op=io / calls.where(calls > 0), syscalls_by_name=None)
