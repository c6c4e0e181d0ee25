"""What changes from moment to moment (CPU time, interrupts): read twice, a short sample
apart, so that doctor judges what happens now and not since boot."""

from __future__ import annotations

from dataclasses import dataclass, field

from regtrack.doctor.sysroot import SysRoot, cpu_list


@dataclass(frozen=True)
class CpuJiffies:
    """One CPU's line of /proc/stat: time busy, stolen by the hypervisor, and in all."""

    busy: int
    steal: int
    total: int


@dataclass(frozen=True)
class ProcessTicks:
    """One process's CPU time so far (user + system ticks) and the CPUs it may run on."""

    name: str
    ticks: int
    allowed: tuple[int, ...] | None


@dataclass(frozen=True)
class Snapshot:
    """/proc/stat per CPU, every process's ticks, and /proc/interrupts per IRQ and CPU."""

    cpus: dict[int, CpuJiffies] = field(default_factory=dict)
    processes: dict[int, ProcessTicks] = field(default_factory=dict)
    interrupts: dict[str, dict[int, int]] = field(default_factory=dict)


def _ints(fields: list[str]) -> list[int] | None:
    try:
        return [int(v) for v in fields]
    except ValueError:
        return None


def cpu_jiffies(root: SysRoot) -> dict[int, CpuJiffies]:
    out: dict[int, CpuJiffies] = {}
    for line in (root.text("proc/stat") or "").splitlines():
        fields = line.split()
        if not fields or not fields[0].startswith("cpu") or not fields[0][3:].isdecimal():
            continue
        values = _ints(fields[1:9])
        if values is None or len(values) < 4:
            continue
        values += [0] * (8 - len(values))
        # user nice system idle iowait irq softirq steal
        idle = values[3] + values[4]
        out[int(fields[0][3:])] = CpuJiffies(
            busy=sum(values) - idle - values[7], steal=values[7], total=sum(values)
        )
    return out


def _allowed(status: str | None) -> tuple[int, ...] | None:
    for line in (status or "").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return cpu_list(line.split(":", 1)[1])
    return None


def process_ticks(root: SysRoot) -> dict[int, ProcessTicks]:
    out: dict[int, ProcessTicks] = {}
    for name in root.names("proc"):
        if not name.isdecimal():
            continue
        stat = root.text(f"proc/{name}/stat")
        if not stat or ")" not in stat or "(" not in stat:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        values = _ints(stat[stat.rindex(")") + 2 :].split()[11:13])
        if values is None or len(values) != 2:
            continue
        out[int(name)] = ProcessTicks(
            name=comm[:64], ticks=sum(values), allowed=_allowed(root.text(f"proc/{name}/status"))
        )
    return out


def interrupt_counts(root: SysRoot) -> dict[str, dict[int, int]]:
    """Per IRQ (its number, or NMI, LOC, ...), the interrupts each CPU has taken so far."""
    lines = (root.text("proc/interrupts") or "").splitlines()
    if not lines:
        return {}
    columns = []
    for head in lines[0].split():
        if not head.startswith("CPU") or not head[3:].isdecimal():
            return {}
        columns.append(int(head[3:]))
    out: dict[str, dict[int, int]] = {}
    for line in lines[1:]:
        irq, _, rest = line.partition(":")
        counts = _ints(rest.split()[: len(columns)])
        if irq.strip() and counts:
            out[irq.strip()] = dict(zip(columns, counts, strict=False))
    return out


def interrupt_names(root: SysRoot) -> dict[str, str]:
    """Per IRQ, the device's name (the last word of its /proc/interrupts line)."""
    out: dict[str, str] = {}
    for line in (root.text("proc/interrupts") or "").splitlines()[1:]:
        irq, _, rest = line.partition(":")
        words = [w for w in rest.split() if not w.isdecimal()]
        if irq.strip() and words:
            out[irq.strip()] = words[-1][:64]
    return out


def take(root: SysRoot) -> Snapshot:
    return Snapshot(
        cpus=cpu_jiffies(root),
        processes=process_ticks(root),
        interrupts=interrupt_counts(root),
    )
