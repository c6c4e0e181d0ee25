"""Checks of the CPUs a run pins to: the plan, frequency (governor, turbo), isolation, and
what a virtual machine takes away (steal)."""

from __future__ import annotations

import re

from regtrack.core.checkup import Check, Status
from regtrack.core.cpus import format_cpu_list
from regtrack.doctor.machine import Machine, cpus_text
from regtrack.doctor.sysroot import cpu_list

CPU_DIR = "sys/devices/system/cpu"
STEAL_WARNING_PCT = 2.0


def cpu_plan(m: Machine) -> Check:
    """Server and load generator on disjoint CPUs, or nothing measured here is the server's."""
    topo = m.topology
    have = f"{len(topo.usable)} usable CPUs, {topo.physical_cores} physical cores"
    if m.plan is None:
        return Check(
            "CPU plan",
            Status.PROBLEM,
            f"no plan fits ({have}): {m.plan_problem or 'fewer than 2 usable CPUs'}",
            "give server and load generator disjoint CPUs (--server-cpus, --client-cpus), "
            "on a machine or cpuset with at least 2 CPUs",
        )
    found = (
        f"server on {cpus_text(m.plan.server)}, load generator on "
        f"{cpus_text(m.plan.client)} ({have})"
    )
    shared = [c for c in m.plan.server if topo.smt_siblings(c) & set(m.plan.client)]
    if shared:
        return Check(
            "CPU plan",
            Status.WARNING,
            f"{found}; they are SMT siblings of one physical core",
            "siblings share execution units, so the load generator slows the server: use "
            "a machine with at least 2 physical cores",
        )
    return Check("CPU plan", Status.OK, found)


def governor(m: Machine) -> Check:
    """A governor other than performance changes the clock with the load, mid-trial."""
    by_cpu = {
        cpu: m.root.text(f"{CPU_DIR}/cpu{cpu}/cpufreq/scaling_governor") for cpu in m.pinned_cpus
    }
    known = {cpu: g for cpu, g in by_cpu.items() if g}
    if not known:
        return Check(
            "CPU frequency governor",
            Status.UNKNOWN,
            f"no cpufreq governor for {cpus_text(m.pinned_cpus)} (usual in a virtual machine, "
            "where the host sets the frequency)",
        )
    groups: dict[str, list[int]] = {}
    for cpu, g in sorted(known.items()):
        groups.setdefault(g[:40], []).append(cpu)
    found = "; ".join(f"{cpus_text(cpus)}: {g}" for g, cpus in groups.items())
    slow = sorted(c for c, g in known.items() if g != "performance")
    if not slow:
        return Check("CPU frequency governor", Status.OK, found)
    return Check(
        "CPU frequency governor",
        Status.WARNING,
        found,
        "set the performance governor on "
        f"{cpus_text(slow)} (as root: cpupower -c {format_cpu_list(slow)} frequency-set -g "
        "performance): other governors change the clock with the load, so a trial's "
        "first and last seconds run at different speeds",
    )


def turbo(m: Machine) -> Check:
    """Turbo/boost clocks depend on temperature and on how many cores are busy."""
    no_turbo = m.root.text(f"{CPU_DIR}/intel_pstate/no_turbo")
    boost = m.root.text(f"{CPU_DIR}/cpufreq/boost")
    if no_turbo in ("0", "1"):
        on, where, fix = no_turbo == "0", "intel_pstate no_turbo", "1 > intel_pstate/no_turbo"
    elif boost in ("0", "1"):
        on, where, fix = boost == "1", "cpufreq boost", "0 > cpufreq/boost"
    else:
        return Check(
            "turbo / boost",
            Status.UNKNOWN,
            "neither intel_pstate/no_turbo nor cpufreq/boost is readable (a virtual machine, "
            "or another frequency driver)",
        )
    if not on:
        return Check("turbo / boost", Status.OK, f"off ({where})")
    return Check(
        "turbo / boost",
        Status.WARNING,
        f"on ({where})",
        f"turn it off (as root: echo {fix} under /sys/devices/system/cpu): turbo clocks "
        "depend on temperature and on how many cores are busy, so they drift between trials",
    )


def _cmdline_cpus(cmdline: str, parameter: str) -> tuple[int, ...] | None:
    match = re.search(rf"(?:^|\s){parameter}=(\S+)", cmdline)
    if not match:
        return None
    # isolcpus may start with flags: isolcpus=domain,managed_irq,2-3
    parts = [p for p in match.group(1).split(",") if p[:1].isdigit()]
    return cpu_list(",".join(parts))


def isolation(m: Machine) -> Check:
    """CPUs kept from the scheduler (isolcpus) and the timer tick (nohz_full)."""
    cmdline = m.root.text("proc/cmdline")
    isolated = cpu_list(m.root.text(f"{CPU_DIR}/isolated"))
    if not isolated and cmdline is not None:
        isolated = _cmdline_cpus(cmdline, "isolcpus")
    nohz = cpu_list(m.root.text(f"{CPU_DIR}/nohz_full"))
    if not nohz and cmdline is not None:
        nohz = _cmdline_cpus(cmdline, "nohz_full")
    if isolated is None and cmdline is None:
        return Check(
            "CPU isolation", Status.UNKNOWN, "neither /sys/.../cpu/isolated nor /proc/cmdline"
        )
    server = set(m.server_cpus)
    found = (
        f"isolated: {format_cpu_list(isolated or ()) or 'none'}; nohz_full: "
        f"{format_cpu_list(nohz or ()) or 'none'}; this process may use "
        f"{format_cpu_list(m.topology.usable)}"
    )
    if isolated and server <= set(isolated):
        return Check("CPU isolation", Status.OK, f"{found}; the server's CPUs are isolated")
    advice = (
        "boot with isolcpus=LIST nohz_full=LIST (the server's and load generator's CPUs) and "
        "pin there with --server-cpus/--client-cpus; without it the scheduler may put other "
        "tasks on the server's CPU mid-trial (each trial checks and marks those contended)"
    )
    return Check("CPU isolation", Status.WARNING, found, advice)


def _cpuinfo_flags(m: Machine) -> set[str]:
    for line in (m.root.text("proc/cpuinfo") or "").splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


def virtualization(m: Machine) -> Check:
    """A VM shares its host: steal is time our vCPUs wanted and another guest got."""
    flags = _cpuinfo_flags(m)
    kind = "a virtual machine" if "hypervisor" in flags else "no hypervisor flag"
    counters = (
        "hardware counters offered (arch_perfmon)"
        if "arch_perfmon" in flags
        else "no hardware performance counters (regtrack counts instructions with callgrind)"
    )
    before, after = m.before.cpus, m.after.cpus
    cpus = [c for c in m.pinned_cpus if c in before and c in after]
    if not flags and not cpus:
        return Check("virtualization / steal", Status.UNKNOWN, "no /proc/cpuinfo nor /proc/stat")
    total = sum(after[c].total - before[c].total for c in cpus)
    steal = sum(after[c].steal - before[c].steal for c in cpus)
    pct = 100.0 * steal / total if total > 0 else 0.0
    since_boot = sum(after[c].steal for c in cpus)
    boot_total = sum(after[c].total for c in cpus)
    boot_pct = 100.0 * since_boot / boot_total if boot_total > 0 else 0.0
    found = (
        f"{kind}; {counters}; steal on {cpus_text(cpus)}: {pct:.1f}% during the sample, "
        f"{boot_pct:.1f}% since boot"
    )
    if pct >= STEAL_WARNING_PCT:
        return Check(
            "virtualization / steal",
            Status.WARNING,
            found,
            "the host is giving these vCPUs' time to other guests, which throughput counts "
            "against the server: use dedicated vCPUs (no overcommit), or --metric "
            "instructions, which steal does not move",
        )
    return Check("virtualization / steal", Status.OK, found)
