"""What regtrack measures and how each metric reads: the catalogue every stage shares.

Kept free of pandas and scipy so that the command line can offer these names as choices
without paying for the analysis libraries (``regtrack --help`` starts in well under a second).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    column: str
    name: str
    unit: str
    higher_is_better: bool
    modes: tuple[str, ...] = ("throughput",)  # trial kinds it comes from, first found wins
    deterministic: bool = False  # counted, not timed: its spread is worth showing


METRICS = (
    Metric("ops_per_sec", "throughput", "ops/s", True),
    Metric("lat_p50_ms", "latency_p50", "ms", False),
    Metric("lat_p99_ms", "latency_p99", "ms", False),
    Metric("instructions_per_op", "instructions_per_op", "Ir/op", False, ("instructions",), True),
    Metric(
        "syscalls_per_op", "syscalls_per_op", "syscalls/op", False, ("throughput", "instructions")
    ),
)

METRIC_BY_NAME = {m.name: m for m in METRICS}
# Metrics whose regressions fail `regtrack ci`; the others are reported with verdicts.
GATING = ("throughput", "instructions_per_op")
# The family-wise error rate of one comparison's gate (split over gating metrics).
ALPHA = 0.05
# Metrics the history pages and `regtrack history` follow over runs and commits.
HISTORY_METRICS = ("throughput", "latency_p99", "instructions_per_op")
