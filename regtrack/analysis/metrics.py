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
    # Seed-matched blocks before `no change` may be said. A change can live in a few seeds
    # (one in four at +5%, a true +1.25%): at 4 blocks a gate said `no change` to it in
    # 31% of simulated gates, at 8 in 10% (benchmarks/seed_bimodal.py).
    min_blocks_no_change: int = 0
    # The visit kind that measures it (a plan's mode: throughput, instructions, latency),
    # when its trials are stored under another (a lifecycle's tasks and task_latency).
    visit: str = ""

    @property
    def measured_by(self) -> str:
        return self.visit or self.modes[0]


METRICS = (
    Metric("ops_per_sec", "throughput", "ops/s", True),
    Metric("lat_p50_ms", "latency_p50", "ms", False),
    Metric("lat_p99_ms", "latency_p99", "ms", False),
    Metric(
        "instructions_per_op", "instructions_per_op", "Ir/op", False, ("instructions",), True, 8
    ),
    # --metric cycles: the instruction trials under callgrind's cache and branch simulation
    # (core/cycles.py). Estimated cycles gate; the misses say why they moved.
    Metric("cycles_per_op", "cycles_per_op", "cycles/op", False, ("instructions",), True, 8),
    Metric("l1_misses_per_op", "l1_misses_per_op", "L1 misses/op", False, ("instructions",), True),
    Metric("ll_misses_per_op", "ll_misses_per_op", "LL misses/op", False, ("instructions",), True),
    Metric(
        "branch_misses_per_op",
        "branch_misses_per_op",
        "mispredicts/op",
        False,
        ("instructions",),
        True,
    ),
    # Counted by name by the kernel (bench/kernel_calls.py) over the native server's windows:
    # A/A blocks 0.007% apart, the total's spread 0.1% at pipeline 10 (epoll_wait's 6%
    # is 2% of it; benchmarks/results/syscall_spread.txt). Under callgrind valgrind adds
    # its own calls (gettid, rt_sigprocmask, its lock's read and write around each
    # blocking call) and turns vDSO clock reads into syscalls: read only without
    # throughput trials.
    Metric(
        "syscalls_per_op",
        "syscalls_per_op",
        "syscalls/op",
        False,
        ("throughput", "instructions"),
        True,
    ),
    # Open-loop trials (--rate, --load): latency from the intended send time at a stated
    # rate, what a queue's producers and workers feel (bench/latency_trial.py).
    Metric("lat_p50_ms", "open_loop_p50", "ms", False, ("latency",)),
    Metric("lat_p99_ms", "open_loop_p99", "ms", False, ("latency",)),
    Metric("lat_p999_ms", "open_loop_p999", "ms", False, ("latency",)),
    # Task lifecycles (bench/lifecycle_trial.py): capacity in tasks/s and what each task
    # cost the server, from the closed-loop visits; task latency (enqueue to the
    # consumer's last reply) from the open-loop ones, at a stated arrival rate.
    Metric("ops_per_sec", "tasks_per_sec", "tasks/s", True, ("tasks",), visit="throughput"),
    Metric(
        "server_cpu_us_per_op",
        "server_cpu_per_task",
        "us/task",
        False,
        ("tasks",),
        visit="throughput",
    ),
    Metric(
        "commands_per_op",
        "commands_per_task",
        "commands/task",
        False,
        ("tasks",),
        visit="throughput",
    ),
    # What the lifecycle engine counted (results/stored_trials.lifecycle), shown, never
    # gating: the producers' rate follows the consumers at capacity (and is the stated
    # rate at a --rate point), and round trips per task are the preset's steps plus the
    # empty dequeues a consumer's timing adds, the client's side of commands_per_task.
    Metric("enqueue_per_sec", "enqueue_per_sec", "tasks/s", True, ("tasks",), visit="throughput"),
    Metric(
        "round_trips_per_task",
        "round_trips_per_task",
        "round trips/task",
        False,
        ("tasks",),
        visit="throughput",
    ),
    # (a --driver program's task latencies are at its own pace: its tasks trials')
    Metric("lat_p50_ms", "task_p50", "ms", False, ("task_latency", "tasks"), visit="latency"),
    Metric("lat_p99_ms", "task_p99", "ms", False, ("task_latency", "tasks"), visit="latency"),
)

METRIC_BY_NAME = {m.name: m for m in METRICS}
# Metrics whose regressions fail `regtrack ci`; the others are reported with verdicts.
# Open-loop p99 gates wherever it was measured (ci --latency-load declares the load).
GATING = (
    "throughput", "instructions_per_op", "cycles_per_op", "syscalls_per_op", "open_loop_p99",
    "tasks_per_sec",
    "server_cpu_per_task", "task_p99",
)  # fmt: skip
# The simulation's misses per op: shown beside cycles per op, so a reader sees why it moved.
MISSES = ("l1_misses_per_op", "ll_misses_per_op", "branch_misses_per_op")
# The family-wise error rate of one comparison's gate (split over gating metrics).
ALPHA = 0.05
# Metrics the history pages and `regtrack history` follow over runs and commits.
HISTORY_METRICS = ("throughput", "latency_p99", "instructions_per_op")
