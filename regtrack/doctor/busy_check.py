"""Other processes busy on the CPUs a run pins to: a trial measured beside them is
marked contended (invalid), and a trial just under the limit is still slowed."""

from __future__ import annotations

from dataclasses import dataclass

from regtrack.core.checkup import Check, Status
from regtrack.doctor.machine import Machine, cpus_text

SHOWN = 5
MIN_SHOWN_PCT = 1.0  # a process below 1% of a CPU is not worth naming
WARNING_SHARE = 0.2  # a fifth of the contention limit already shows in throughput


@dataclass(frozen=True)
class BusyProcess:
    """A process that used CPU during the sample and may run on the pinned CPUs."""

    pid: int
    name: str
    cpu_pct: float  # of one CPU, during the sample


def share_used_by_others(m: Machine, cpus: tuple[int, ...]) -> float | None:
    """Percent of ``cpus``' time others used during the sample (None: /proc/stat unread)."""
    before, after = m.before.cpus, m.after.cpus
    present = [c for c in cpus if c in before and c in after]
    if not present:
        return None
    total = sum(after[c].total - before[c].total for c in present)
    busy = sum(after[c].busy - before[c].busy for c in present)
    own = _own_ticks(m)  # doctor's own ticks, on whichever CPU: it only sleeps
    return max(0.0, 100.0 * (busy - own) / total) if total > 0 else 0.0


def _own_ticks(m: Machine) -> int:
    before, after = m.before.processes, m.after.processes
    return sum(
        max(0, after[p].ticks - before[p].ticks) for p in m.own_pids if p in before and p in after
    )


def busiest(m: Machine, cpus: tuple[int, ...]) -> list[BusyProcess]:
    """The processes other than doctor that used CPU in the sample and may run on ``cpus``."""
    wanted = set(cpus)
    before, after = m.before.processes, m.after.processes
    cpus_before, cpus_after = m.before.cpus, m.after.cpus
    common = [c for c in cpus_before if c in cpus_after]
    ticks = sum(cpus_after[c].total - cpus_before[c].total for c in common)
    # the sample's length in ticks: jiffies of all CPUs over the sample, per CPU
    per_cpu = ticks / len(common) if common and ticks > 0 else 0
    out = []
    for pid, proc in after.items():
        if pid in m.own_pids or pid not in before or per_cpu <= 0:
            continue
        if proc.allowed is not None and not wanted & set(proc.allowed):
            continue
        pct = 100.0 * max(0, proc.ticks - before[pid].ticks) / per_cpu
        if pct >= MIN_SHOWN_PCT:
            out.append(BusyProcess(pid=pid, name=proc.name, cpu_pct=pct))
    return sorted(out, key=lambda p: -p.cpu_pct)


def busy_processes(m: Machine) -> Check:
    pinned = m.pinned_cpus
    used = share_used_by_others(m, pinned)
    if used is None:
        return Check("other busy processes", Status.UNKNOWN, "/proc/stat is missing or unreadable")
    procs = busiest(m, pinned)
    names = ", ".join(f"{p.name} (pid {p.pid}) {p.cpu_pct:.0f}%" for p in procs[:SHOWN])
    found = f"others used {used:.0f}% of {cpus_text(pinned)} during the sample" + (
        f"; busiest: {names}" if names else ""
    )
    limit = m.contention_limit_pct
    advice = (
        "stop them, or move them off the pinned CPUs (taskset -apc OTHER_CPUS PID), then "
        f"measure: above {limit:.0f}% ([run] contention_limit_pct) a trial is marked "
        "contended and invalid"
    )
    if used > limit:
        return Check("other busy processes", Status.PROBLEM, found, advice)
    if used > limit * WARNING_SHARE:
        return Check("other busy processes", Status.WARNING, found, advice)
    return Check("other busy processes", Status.OK, found)
