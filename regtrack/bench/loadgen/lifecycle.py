"""regtrack-openloop's lifecycle mode: a task queue's producers and consumers against one
server, or against several taking turns (paired in time; engine/README.md, "lifecycle
mode").

Producers enqueue at a stated rate (open loop: each task timed from its intended enqueue
time) or, with no rate, as fast as the consumers finish with at most ``max_queued`` tasks
waiting (capacity). Consumers block on their dequeue command and carry each task's id and
handle into the steps that follow. This adapter writes the workload's lifecycle document,
runs the engine pinned, and reads its one JSON report into a typed record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pydantic

from regtrack.bench.loadgen.base import Aim, LoadgenBinary, LoadgenResult
from regtrack.bench.loadgen.openloop import EngineCpu, Lag, Stalls, run_engine
from regtrack.bench.runtimes.native import taskset_path
from regtrack.core.cpus import format_cpu_list

# Seconds the consumers get after the last enqueue to finish the measured tasks.
DRAIN_S = 5.0
# An instruction trial's requests per task (--instruction-requests counts requests; a task
# is a dozen to sixty commands): its windows run requests / this many tasks.
REQUESTS_PER_TASK = 25


class _Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(frozen=True, extra="ignore")


class TaskLatency(_Strict):
    """Enqueue (its intended time) to the reply of the consumer's last step, in µs."""

    p50: float
    p90: float = 0.0
    p95: float = 0.0
    p99: float
    p999: float
    max: float
    mean: float
    count: int


class LifecycleReport(_Strict):
    """What one lifecycle run printed (engine/src/lifecycle_report.rs)."""

    version: str
    mode: Literal["lifecycle"]
    rate: float | None = None
    arrival: str | None = None
    duration_s: float
    # paired in time (engine 0.5.0, several ports): the server, its windows in the measured
    # window and the seconds they cover (what tasks_per_sec divides by)
    port: int | None = None
    windows: int | None = None
    active_s: float | None = None
    enqueued: int
    completed: int
    tasks_per_sec: float
    enqueue_per_sec: float = 0.0
    latency_us: TaskLatency
    hdr_unit: str = "ns"
    hdr: str = ""
    commands_per_task: float = 0.0
    round_trips_per_task: float = 0.0
    empty_dequeues: int = 0
    foreign: int = 0
    left: int = 0
    errors: dict[str, int] = {}
    error_commands: dict[str, int] = {}
    lag_us: Lag | None = None
    behind: bool = False
    behind_reasons: list[str] = []
    cpu: EngineCpu
    stalls: Stalls = Stalls()
    tainted: int = 0

    @property
    def latency_ms(self) -> dict[str, float]:
        lat = self.latency_us
        return {
            "p50": lat.p50 / 1e3,
            "p95": lat.p95 / 1e3,
            "p99": lat.p99 / 1e3,
            "p999": lat.p999 / 1e3,
            "max": lat.max / 1e3,
            "avg": lat.mean / 1e3,
        }


class PairedLifecycleReport(_Strict):
    """What one lifecycle run over several servers paired in time printed: each server's
    report over its own tasks and windows, in --port order, and the engine's CPU
    (engine/README.md, "Paired in time" of the lifecycle mode)."""

    version: str
    mode: Literal["lifecycle"]
    switch_ms: float
    cpu: EngineCpu
    servers: list[LifecycleReport]


@dataclass(frozen=True)
class Arrivals:
    """Tasks per second offered by the producers (None: as fast as the queue allows),
    evenly spaced or Poisson, drawn from ``seed`` (the same for every version); or, at
    capacity, exactly ``tasks`` tasks and no more (a fixed amount of work: callgrind's
    windows)."""

    rate: float | None
    arrival: Literal["poisson", "constant"] = "poisson"
    seed: int = 1
    tasks: int | None = None


@dataclass
class LifecycleResult(LoadgenResult):
    """A LoadgenResult with the engine's lifecycle report (None when it printed none)."""

    report: LifecycleReport | None = None


def argv(
    binary: LoadgenBinary, aims: Sequence[Aim], arrivals: Arrivals, document: Path,
    seconds: float, warmup: float, switch_ms: float,
) -> list[str]:  # fmt: skip
    """The engine's command line, pinned to the client CPUs: one server, or several (on
    one host) taking the load in turns of ``switch_ms``."""
    command = [
        taskset_path(), "-c", format_cpu_list(aims[0].cpus), binary.path,
        "--lifecycle", str(document), "--host", aims[0].host,
        *(arg for aim in aims for arg in ("--port", str(aim.port))),
        "--arrival", arrivals.arrival, "--seed", str(arrivals.seed),
        "--duration", repr(float(seconds)), "--warmup", repr(float(warmup)),
        "--drain", repr(DRAIN_S),
    ]  # fmt: skip
    if arrivals.rate is not None:
        command += ["--rate", repr(float(arrivals.rate))]
    if arrivals.tasks is not None:
        command += ["--tasks", str(arrivals.tasks)]
    if len(aims) > 1:
        command += ["--switch-ms", repr(float(switch_ms))]
    if aims[0].reply_floor_us:
        command += ["--reply-floor-us", str(aims[0].reply_floor_us)]
    return command


def run(
    binary: LoadgenBinary,
    aims: Sequence[Aim],
    document: dict[str, Any],
    arrivals: Arrivals,
    *,
    seconds: float,
    warmup: float,
    timeout: float,
    switch_ms: float = 100.0,
) -> list[LifecycleResult]:
    """Run the engine's lifecycle mode once over ``aims`` (one server, or several paired in
    time); a result per aim, in order, each with its server's report, or all with the one
    ``problem`` that spoiled the run (the server lost, a refused document, no report)."""
    ran = run_engine(
        aims, document, timeout, LifecycleReport, PairedLifecycleReport,
        lambda path: argv(binary, aims, arrivals, path, seconds, warmup, switch_ms),
    )  # fmt: skip
    return ran.per_aim(len(aims), LifecycleResult, lambda r: r.tasks_per_sec, "tasks")
