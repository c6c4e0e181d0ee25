"""How much of a set of CPUs processes other than regtrack's own used over an interval: a
trial measured beside them is contended.

Counted from the processes' own CPU times, not from /proc/stat's busy ticks less ours. On
a VM, the busy ticks also hold the kernel's work of waking the server's and the engine's
CPUs thousands of times a second for our own requests, which no process is charged with:
on a 2-vCPU EPYC VM, with nothing else running, it read as 3-13% of the server's CPU in a
3-s lifecycle trial (beside 1-2% by every other process, regtrack's own Python included),
so a trial was marked contended by its own load. A process's CPU time is exact
(sum_exec_runtime, whatever the kernel's tick or interrupt accounting), and covers its
reaped children, so a build's short-lived compilers count through their parent.

psutil reads /proc, instead of our own parser of its fields.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import psutil

from regtrack.core.cpus import CpuPlan

Key = tuple[int, float]  # (pid, start time): a reused pid is another process


@dataclass(frozen=True)
class Proc:
    """One process at a reading: its parent, its CPU seconds (its own, all threads, and
    its reaped children's) and the CPUs it may run on."""

    ppid: int
    cpu_s: float
    cpus: frozenset[int]


@dataclass(frozen=True)
class Snapshot:
    """Every process at one moment, and which of them are ours."""

    at: float  # time.monotonic()
    procs: Mapping[Key, Proc]
    ours: frozenset[Key]

    @classmethod
    def read(cls, roots: Iterable[int] = (), me: int | None = None) -> Snapshot:
        """Every process now. Ours: regtrack's process (``me``, by default this one) and
        the ``roots`` (its servers, wherever they were started: a container's is not our
        child), with all their descendants."""
        every = frozenset(range(os.cpu_count() or 1))
        procs: dict[Key, Proc] = {}
        attrs = ["pid", "ppid", "create_time", "cpu_times", "cpu_affinity"]
        for p in psutil.process_iter(attrs, ad_value=None):
            info = p.info
            times, started = info["cpu_times"], info["create_time"]
            if times is None or started is None:
                continue  # gone, or not ours to read
            cpu_s = times.user + times.system + times.children_user + times.children_system
            cpus = frozenset(info["cpu_affinity"] or every)
            procs[(info["pid"], started)] = Proc(info["ppid"] or 0, cpu_s, cpus)
        return cls(
            time.monotonic(),
            procs,
            _descendants(procs, {os.getpid() if me is None else me, *roots}),
        )


def _descendants(procs: Mapping[Key, Proc], roots: set[int]) -> frozenset[Key]:
    children: dict[int, list[Key]] = {}
    for key, proc in procs.items():
        children.setdefault(proc.ppid, []).append(key)
    found = {key for key in procs if key[0] in roots}
    todo = list(found)
    while todo:
        for child in children.get(todo.pop()[0], []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return frozenset(found)


def used_pct(before: Snapshot, after: Snapshot, cpus: Sequence[int]) -> float:
    """Percent of ``cpus``' time that processes other than ours used between the two
    readings. A process that may also run elsewhere counts by the share of its CPUs that
    are ``cpus`` (on a 2-CPU machine whose both CPUs are pinned, all of it)."""
    wall = after.at - before.at
    if wall <= 0 or not cpus:
        return 0.0
    wanted = frozenset(cpus)
    ours = before.ours | after.ours
    gone: dict[int, float] = {}  # by parent: the CPU its children that ended had by `before`
    for key, proc in before.procs.items():
        if key not in after.procs:
            gone[proc.ppid] = gone.get(proc.ppid, 0.0) + proc.cpu_s
    used = 0.0
    for key, proc in after.procs.items():
        if key in ours or not proc.cpus:
            continue
        prior = before.procs.get(key)
        # A process that started since counts whole; a child that ended since is in its
        # parent's children's time whole, so what it had used by `before` comes off.
        delta = proc.cpu_s - (prior.cpu_s if prior else 0.0) - gone.get(key[0], 0.0)
        if delta > 0:
            used += delta * len(proc.cpus & wanted) / len(proc.cpus)
    return max(0.0, 100.0 * used / (wall * len(wanted)))


def contended_pct(before: Snapshot, after: Snapshot, cpus: CpuPlan) -> float:
    """The larger share others used of the server's CPUs and of the load generator's."""
    return max(used_pct(before, after, cpus.server), used_pct(before, after, cpus.client))
