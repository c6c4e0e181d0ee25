"""Simulated cycles: callgrind's cache and branch events, grouped, and one estimate of them.

Instructions per op cannot see a cache miss or a mispredicted branch; callgrind's cache
and branch simulation (``--metric cycles``) counts them, deterministically, on a cache of
a fixed geometry (pinned here, so a count does not depend on the host's caches), and

    cycles = Ir + w_l1 * L1 misses + w_ll * LL misses + w_branch * mispredicted branches

turns them into one figure with a cost per miss measured on this machine
(benchmarks/cycle_weights.py, docs/methodology.md "Simulated cycles": 10, 200, 10 by
default, settings cycle_weight_*). A last-level miss is also an L1 miss: ``w_ll`` is what
it costs beyond one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# The simulated caches (size B, associativity, line B): fixed, not the host's, so two hosts
# count alike. L1 as on most x86 cores; LL 32 MiB, between this VM's L3 (48 MiB) and an
# EPYC CCX's (32 MiB). Callgrind needs a power of two sets: 32 MiB / 16 / 64 = 32768.
I1 = (32768, 8, 64)
D1 = (32768, 8, 64)
LL = (33554432, 16, 64)

# The events callgrind writes with --cache-sim=yes --branch-sim=yes, in its order.
EVENTS = (
    "Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw", "Bc", "Bcm", "Bi", "Bim",
)  # fmt: skip
L1_MISSES = ("I1mr", "D1mr", "D1mw")
LL_MISSES = ("ILmr", "DLmr", "DLmw")
BRANCH_MISSES = ("Bcm", "Bim")


def geometry_flags() -> list[str]:
    """valgrind's options for the pinned caches."""
    return [
        f"--{name}={size},{assoc},{line}"
        for name, (size, assoc, line) in (("I1", I1), ("D1", D1), ("LL", LL))
    ]


def geometry_text() -> str:
    """The pinned caches as callgrind's ``desc:`` lines describe them, joined by "; "
    (what a run records and its comparability key compares)."""
    return "; ".join(
        f"{name} cache: {size} B, {line} B, {assoc}-way associative"
        for name, (size, assoc, line) in (("I1", I1), ("D1", D1), ("LL", LL))
    )


@dataclass(frozen=True)
class Weights:
    """Cycles one event costs beyond its instruction: an L1 miss, a last-level miss on top
    of its L1 miss, a mispredicted branch."""

    l1: float
    ll: float
    branch: float

    def text(self) -> str:
        return f"L1 miss {self.l1:g}, LL miss {self.ll:g}, mispredicted branch {self.branch:g}"


@dataclass(frozen=True)
class Grouped:
    """One count's events as the metrics read them."""

    instructions: int
    l1_misses: int
    ll_misses: int
    branch_misses: int

    def cycles(self, weights: Weights) -> int:
        return round(
            self.instructions
            + weights.l1 * self.l1_misses
            + weights.ll * self.ll_misses
            + weights.branch * self.branch_misses
        )


def grouped(events: Mapping[str, int]) -> Grouped:
    """The groups of a set of event totals (an event not simulated counts 0)."""
    return Grouped(
        instructions=events.get("Ir", 0),
        l1_misses=sum(events.get(e, 0) for e in L1_MISSES),
        ll_misses=sum(events.get(e, 0) for e in LL_MISSES),
        branch_misses=sum(events.get(e, 0) for e in BRANCH_MISSES),
    )


# The --metric choices that count and measure no throughput: an instruction visit each
# repetition, under the simulation for "cycles".
COUNTING_ONLY = frozenset({"instructions", "cycles"})
