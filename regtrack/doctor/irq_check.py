"""Interrupts routed to the server's CPU: their handlers run on it and take its time."""

from __future__ import annotations

from dataclasses import dataclass

from regtrack.core.checkup import Check, Status
from regtrack.core.cpus import format_cpu_list
from regtrack.doctor.machine import Machine, cpus_text
from regtrack.doctor.sample import interrupt_names
from regtrack.doctor.sysroot import cpu_list

SHOWN = 5
# A handful since boot (ACPI events, a console) is no load; more, or any now, is.
MIN_SINCE_BOOT = 100


@dataclass(frozen=True)
class RoutedIrq:
    """A device interrupt the kernel may deliver to a server CPU."""

    irq: str
    name: str
    during_sample: int  # taken on the server's CPUs while doctor watched
    since_boot: int


def routed_to(m: Machine, server: set[int]) -> list[RoutedIrq]:
    """Device IRQs whose effective affinity (else smp_affinity_list) includes a server CPU."""
    names = interrupt_names(m.root)
    out = []
    for irq in m.root.names("proc/irq"):
        if not irq.isdecimal():
            continue
        cpus = cpu_list(m.root.text(f"proc/irq/{irq}/effective_affinity_list"))
        if not cpus:
            cpus = cpu_list(m.root.text(f"proc/irq/{irq}/smp_affinity_list"))
        if not cpus or not server & set(cpus):
            continue
        before = m.before.interrupts.get(irq, {})
        after = m.after.interrupts.get(irq, {})
        out.append(
            RoutedIrq(
                irq=irq,
                name=names.get(irq, "?"),
                during_sample=sum(max(0, after.get(c, 0) - before.get(c, 0)) for c in server),
                since_boot=sum(after.get(c, 0) for c in server),
            )
        )
    return out


def irq_affinity(m: Machine) -> Check:
    server = set(m.server_cpus)
    if not m.root.names("proc/irq"):
        return Check("IRQ affinity", Status.UNKNOWN, "/proc/irq is missing or unreadable")
    routed = [r for r in routed_to(m, server) if r.since_boot >= MIN_SINCE_BOOT or r.during_sample]
    if not routed:
        return Check(
            "IRQ affinity",
            Status.OK,
            f"no device interrupt has landed on the server's {cpus_text(sorted(server))}",
        )
    routed.sort(key=lambda r: (-r.during_sample, -r.since_boot))
    shown = ", ".join(
        f"{r.irq} {r.name} ({r.during_sample} in the sample, {r.since_boot} since boot)"
        for r in routed[:SHOWN]
    )
    more = f" and {len(routed) - SHOWN} more" if len(routed) > SHOWN else ""
    others = sorted(set(m.topology.usable) - server)
    target = format_cpu_list(others) if others else "another CPU"
    return Check(
        "IRQ affinity",
        Status.WARNING,
        f"{len(routed)} device IRQs land on the server's {cpus_text(sorted(server))}: "
        f"{shown}{more}",
        f"as root, stop irqbalance and move them: echo {target} > "
        "/proc/irq/N/smp_affinity_list for each; Redis on 127.0.0.1 raises no device "
        "interrupts itself, but these handlers take the server's CPU time",
    )
