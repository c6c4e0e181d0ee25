"""`regtrack doctor`: what on this machine would spoil measurements, and what to change.

Like pyperf's `system show`, it reads the CPU frequency governor, turbo, ASLR, isolation
and IRQ affinity; it adds what regtrack's own numbers depend on: a CPU plan, other busy
processes on the pinned CPUs (sampled now), transparent huge pages, steal, whether hash
seeds can be controlled, and the tools. Checks of /proc and /sys read below a root a test
can point at a crafted tree (machine_checks); the rest look at the real machine.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from regtrack.core.checkup import Check, Checkup
from regtrack.core.cpus import Topology, parse_cpu_list, plan_cpus
from regtrack.core.errors import BadInput
from regtrack.core.settings import load_settings
from regtrack.doctor import (
    busy_check,
    cpu_checks,
    irq_check,
    kernel_checks,
    sample,
    tool_checks,
)
from regtrack.doctor.machine import Machine
from regtrack.doctor.sysroot import SysRoot

SAMPLE_SECONDS = 1.0

# In the order a reader should fix things: what makes numbers untrustworthy first.
MACHINE_CHECKS: tuple[Callable[[Machine], Check], ...] = (
    cpu_checks.cpu_plan,
    busy_check.busy_processes,
    cpu_checks.governor,
    cpu_checks.turbo,
    cpu_checks.isolation,
    irq_check.irq_affinity,
    kernel_checks.aslr,
    kernel_checks.transparent_huge_pages,
    cpu_checks.virtualization,
)


def observe(
    root: SysRoot,
    topology: Topology,
    server_cpus: str | None = None,
    client_cpus: str | None = None,
    sample_seconds: float = SAMPLE_SECONDS,
    contention_limit_pct: float = 10.0,
) -> Machine:
    """The machine as a run would use it: the CPU plan (or why none fits) and two
    snapshots ``sample_seconds`` apart, taken while doctor itself only sleeps."""
    for text, option in ((server_cpus, "--server-cpus"), (client_cpus, "--client-cpus")):
        if text is not None:
            parse_cpu_list(text, option)  # a malformed list is the user's to fix: exit 2
    try:
        plan, problem = plan_cpus(server_cpus, client_cpus, topology), None
    except BadInput as exc:
        plan, problem = None, str(exc)
    before = sample.take(root)
    time.sleep(max(0.0, sample_seconds))
    after = sample.take(root)
    return Machine(
        root=root,
        topology=topology,
        plan=plan,
        plan_problem=problem,
        before=before,
        after=after,
        own_pids=frozenset({os.getpid()}),
        contention_limit_pct=contention_limit_pct,
    )


def machine_checks(m: Machine) -> list[Check]:
    """The checks of /proc and /sys, CPUs and the sample: they never raise."""
    return [check(m) for check in MACHINE_CHECKS]


def diagnose(
    server_cpus: str | None = None,
    client_cpus: str | None = None,
    sample_seconds: float = SAMPLE_SECONDS,
    clean: bool = False,
    root: Path = Path("/"),
) -> Checkup:
    """Every check on this machine, for the CPUs a run with these options would pin to."""
    m = observe(
        SysRoot(root),
        Topology.detect(),
        server_cpus,
        client_cpus,
        sample_seconds,
        load_settings().contention_limit_pct,
    )
    tools = tool_checks.find_tools()
    checks = machine_checks(m)
    checks[2:2] = [
        tool_checks.hash_seeds(tool_checks.seeds_problem()),
        tool_checks.load_generator(tools),
        tool_checks.open_loop(tools),
        tool_checks.pinning(tools),
    ]
    checks += [
        tool_checks.valgrind(tools),
        tool_checks.build_tools(tools),
        tool_checks.docker_engine_check(clean),
    ]
    return Checkup(
        checks=tuple(checks),
        server_cpus=m.plan.server_list if m.plan else None,
        client_cpus=m.plan.client_list if m.plan else None,
    )
