"""CPU topology and the plan that keeps server and load generator on disjoint cores.

A server and its load generator sharing a core (or two SMT siblings of one core) measure
each other's scheduling, not Redis, so overlapping plans are refused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from regtrack.core.errors import BadInput

SYS_CPU = Path("/sys/devices/system/cpu")


def parse_cpu_list(text: str, option: str = "CPU list") -> tuple[int, ...]:
    """Parse the kernel's list syntax ("0", "0-3", "0,2-3") into sorted CPU numbers."""
    cpus: set[int] = set()
    cleaned = text.strip()
    if not cleaned:
        raise BadInput(f"{option} is empty: give CPUs like 0 or 0-1 or 0,2")
    for part in cleaned.split(","):
        part = part.strip()
        try:
            if "-" in part:
                lo_s, hi_s = part.split("-", 1)
                lo, hi = int(lo_s), int(hi_s)
                if lo > hi or lo < 0:
                    raise ValueError
                cpus.update(range(lo, hi + 1))
            else:
                n = int(part)
                if n < 0:
                    raise ValueError
                cpus.add(n)
        except ValueError:
            raise BadInput(
                f"{option} {text!r} is not a CPU list: use numbers and ranges like 0 or 0-1 or 0,2"
            ) from None
    return tuple(sorted(cpus))


def format_cpu_list(cpus: tuple[int, ...] | list[int]) -> str:
    """Render CPUs in the compact kernel syntax that taskset and docker accept."""
    out: list[str] = []
    ordered = sorted(cpus)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


@dataclass(frozen=True)
class Topology:
    """The CPUs this process may use and which of them share a physical core."""

    usable: tuple[int, ...]
    core_of: dict[int, str]

    @classmethod
    def detect(cls) -> Topology:
        usable = tuple(sorted(os.sched_getaffinity(0)))
        core_of: dict[int, str] = {}
        for cpu in usable:
            siblings = SYS_CPU / f"cpu{cpu}" / "topology" / "thread_siblings_list"
            try:
                core_of[cpu] = siblings.read_text().strip()
            except OSError:
                core_of[cpu] = str(cpu)
        return cls(usable=usable, core_of=core_of)

    def smt_siblings(self, cpu: int) -> set[int]:
        key = self.core_of.get(cpu, str(cpu))
        return {c for c, k in self.core_of.items() if k == key and c != cpu}

    @property
    def physical_cores(self) -> int:
        return len(set(self.core_of.values()))


@dataclass(frozen=True)
class CpuPlan:
    """Which CPUs the server and the load generator are pinned to."""

    server: tuple[int, ...]
    client: tuple[int, ...]

    @property
    def server_list(self) -> str:
        return format_cpu_list(self.server)

    @property
    def client_list(self) -> str:
        return format_cpu_list(self.client)

    def as_dict(self) -> dict[str, str]:
        return {"server_cpus": self.server_list, "client_cpus": self.client_list}


def plan_cpus(
    server: str | None = None, client: str | None = None, topology: Topology | None = None
) -> CpuPlan:
    """Choose (or validate the user's) disjoint server and client CPU sets.

    Default: the server gets the first CPU, the client every CPU on other physical cores.
    """
    topo = topology or Topology.detect()
    usable = set(topo.usable)
    if len(usable) < 2 and (server is None or client is None):
        raise BadInput(
            f"only {len(usable)} CPU is usable: server and load generator need disjoint CPUs; "
            "run on a machine (or cpuset) with at least 2 CPUs"
        )

    server_cpus = parse_cpu_list(server, "--server-cpus") if server else (min(usable),)
    if client:
        client_cpus = parse_cpu_list(client, "--client-cpus")
    else:
        taken = set(server_cpus)
        for cpu in server_cpus:
            taken |= topo.smt_siblings(cpu)
        rest = sorted(usable - taken) or sorted(usable - set(server_cpus))
        client_cpus = tuple(rest)

    for name, cpus in (("--server-cpus", server_cpus), ("--client-cpus", client_cpus)):
        missing = [c for c in cpus if c not in usable]
        if missing:
            raise BadInput(
                f"{name} {format_cpu_list(cpus)} names CPU {format_cpu_list(missing)}, which does "
                f"not exist or is not usable here; usable CPUs: {format_cpu_list(topo.usable)}"
            )
        if not cpus:
            raise BadInput(f"{name} is empty: no CPU is left for it; give it explicitly")
    overlap = set(server_cpus) & set(client_cpus)
    if overlap:
        raise BadInput(
            f"--server-cpus {format_cpu_list(server_cpus)} and --client-cpus "
            f"{format_cpu_list(client_cpus)} overlap on CPU {format_cpu_list(sorted(overlap))}: "
            "server and load generator must run on different CPUs"
        )
    shared_core = {c for c in server_cpus if topo.smt_siblings(c) & set(client_cpus)}
    if shared_core and topo.physical_cores > 1:
        raise BadInput(
            f"--server-cpus {format_cpu_list(server_cpus)} and --client-cpus "
            f"{format_cpu_list(client_cpus)} share a physical core (SMT siblings): "
            "choose CPUs on different cores"
        )
    return CpuPlan(server=server_cpus, client=client_cpus)


def plan_duet(
    sides: int,
    server: str | None = None,
    client: str | None = None,
    topology: Topology | None = None,
) -> CpuPlan:
    """The CPUs of a duet (every version's server and load generator at once): a server
    CPU per side, each on a physical core of its own, the rest split among the load
    generators (split_sides); or the user's sets, checked as plan_cpus checks them."""
    topo = topology or Topology.detect()
    if server is None and client is None and len(topo.usable) < 2 * sides:
        raise BadInput(_duet_too_few(sides, f"{len(topo.usable)} usable CPUs"))
    if server is None:
        chosen: list[int] = []
        for cpu in topo.usable:
            taken = {topo.core_of.get(c, str(c)) for c in chosen}
            if len(chosen) < sides and topo.core_of.get(cpu, str(cpu)) not in taken:
                chosen.append(cpu)
        server = format_cpu_list(chosen or list(topo.usable[:1]))
    plan = plan_cpus(server, client, topo)
    split_sides(plan, sides)
    return plan


def split_sides(plan: CpuPlan, sides: int) -> list[CpuPlan]:
    """A duet's plan cut into one disjoint plan per side, equal in size (CPUs left over
    stay idle, so no side has more load generator CPUs than another)."""
    if len(plan.server) < sides or len(plan.client) < sides:
        raise BadInput(
            _duet_too_few(sides, f"server CPU {plan.server_list} and client CPU {plan.client_list}")
        )
    s, c = len(plan.server) // sides, len(plan.client) // sides
    return [
        CpuPlan(plan.server[i * s : (i + 1) * s], plan.client[i * c : (i + 1) * c])
        for i in range(sides)
    ]


def _duet_too_few(sides: int, have: str) -> str:
    return (
        f"--pairing duet runs {sides} servers at once, each with a load generator of its own: "
        f"it needs {sides} server CPUs and {sides} client CPUs ({2 * sides} CPUs on separate "
        f"cores), and has {have}: use --pairing time (the default), or a host with more CPUs"
    )
