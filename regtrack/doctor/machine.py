"""The machine doctor looks at: its /proc and /sys, its CPUs and regtrack's plan for them,
and two snapshots a short sample apart."""

from __future__ import annotations

from dataclasses import dataclass, field

from regtrack.core.cpus import CpuPlan, Topology, format_cpu_list
from regtrack.doctor.sample import Snapshot
from regtrack.doctor.sysroot import SysRoot


@dataclass(frozen=True)
class Machine:
    """Everything the checks of /proc and /sys read; tests build one over a crafted tree."""

    root: SysRoot
    topology: Topology
    plan: CpuPlan | None  # None: no plan fits (plan_problem says why)
    plan_problem: str | None = None
    before: Snapshot = field(default_factory=Snapshot)
    after: Snapshot = field(default_factory=Snapshot)
    own_pids: frozenset[int] = frozenset()
    # Above this share of the pinned CPUs used by others a trial is invalid (contended).
    contention_limit_pct: float = 10.0

    @property
    def server_cpus(self) -> tuple[int, ...]:
        """The CPUs the server would be pinned to (all usable ones without a plan)."""
        return self.plan.server if self.plan else self.topology.usable

    @property
    def pinned_cpus(self) -> tuple[int, ...]:
        """Every CPU a run would pin to: the server's and the load generator's."""
        if not self.plan:
            return self.topology.usable
        return tuple(sorted({*self.plan.server, *self.plan.client}))


def cpus_text(cpus: tuple[int, ...] | list[int]) -> str:
    """ "CPU 0" or "CPUs 0-3"."""
    return f"CPU{'s' if len(cpus) != 1 else ''} {format_cpu_list(tuple(cpus)) or 'none'}"
