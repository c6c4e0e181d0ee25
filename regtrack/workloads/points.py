"""Workload points, the load each sends, and what makes a trial's replies wrong.

redis-benchmark's ``-t get -r N`` reads ``key:%012d`` keys and reports a plausible rate even
when every GET misses, so the keys are written first and misses make a trial invalid.
memtier counts error replies as successes, so a mix trial is checked against the server's
own counters: no error replies, and per-command calls in the declared ratios.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from regtrack.core import limits
from regtrack.core.errors import BadInput
from regtrack.core.records import InvalidReason, LoadSpec, MixCommand, ServerDelta, TrialReason
from regtrack.workloads import commands
from regtrack.workloads.driver import DriverWorkload
from regtrack.workloads.lifecycle import LifecycleWorkload
from regtrack.workloads.model import GetPipelineWorkload, MixWorkload, Workload

REDIS_BENCHMARK = "redis-benchmark"
# A lifecycle's one closed-loop point: its producers enqueue as fast as its consumers
# finish, with at most max_queued tasks waiting (its open-loop points are rates).
CAPACITY = "capacity"
SCRIPT_COMMANDS = {"EVAL", "EVALSHA", "FCALL", "EVAL_RO", "EVALSHA_RO", "FCALL_RO"}


@dataclass(frozen=True)
class Point:
    """One measurable setting of a workload, e.g. get-pipeline at pipeline=10."""

    workload: str
    label: str
    params: dict[str, Any] = field(hash=False, compare=False)


def points(workload: Workload) -> list[Point]:
    if isinstance(workload, DriverWorkload):
        return [Point(workload.name, "program", {"driver": workload.command[0], "pipeline": 1})]
    if isinstance(workload, LifecycleWorkload):
        params = {
            "lifecycle": workload.name, "producers": workload.producers,
            "consumers": workload.consumers, "data_size": workload.data_size,
            "max_queued": workload.max_queued, "pipeline": 1,
        }  # fmt: skip
        return [Point(workload.name, CAPACITY, params)]
    base: dict[str, Any] = {
        "clients": workload.clients,
        "threads": workload.threads,
        "data_size": workload.data_size,
        "keyspace": workload.keys,
    }
    if isinstance(workload, GetPipelineWorkload):
        base["command"] = "GET"
    else:
        base["mix"] = workload.name
    return [
        Point(workload.name, f"pipeline={depth}", {**base, "pipeline": depth})
        for depth in workload.pipelines
    ]


def benchmark_key(i: int) -> str:
    """The key redis-benchmark builds from ``key:__rand_int__`` with ``-r``."""
    return f"key:{i:012d}"


def get_keys(loadgen: str, n: int) -> Iterator[str]:
    """The keys a GET sweep reads with this load generator, as it spells them."""
    if loadgen == REDIS_BENCHMARK:
        return (benchmark_key(i) for i in range(n))
    return (f"key:{i}" for i in range(1, n + 1))  # memtier and the built-in driver


def load_specs(
    workload: Workload, point: Point, loadgen: str, saved: dict[str, str] | None = None
) -> list[LoadSpec]:
    """What each load generator process sends at this point (one per [[process]]); a
    lifecycle sends its own document (LifecycleWorkload.engine_document), none of these."""
    if isinstance(workload, LifecycleWorkload | DriverWorkload):
        return []
    depth = int(point.params["pipeline"])
    if isinstance(workload, GetPipelineWorkload):
        first = 0 if loadgen == REDIS_BENCHMARK else 1
        return [
            LoadSpec(
                clients=workload.clients,
                threads=workload.threads,
                pipeline=depth,
                data_size=workload.data_size,
                key_min=first,
                key_max=first + workload.keys - 1,
                key_prefix="key:",
            )
        ]
    saved = saved or {}
    return [
        LoadSpec(
            clients=process.clients or workload.clients,
            threads=workload.threads,
            pipeline=depth,
            data_size=workload.data_size,
            key_min=1,
            key_max=workload.keys,
            key_prefix="",
            commands=tuple(
                MixCommand(
                    args=tuple(substitute(a, saved) for a in c.args),
                    ratio=c.ratio,
                    # memtier takes P for all commands or none; unkeyed ones do not care
                    key_pattern="P" if process.lockstep else c.key_pattern,
                )
                for c in process.commands
            ),
        )
        for process in workload.processes
    ]


def substitute(arg: str, saved: dict[str, str]) -> str:
    for name, value in saved.items():
        arg = arg.replace(f"${{{name}}}", value)
    return arg


def reply_problems(delta: ServerDelta) -> list[TrialReason]:
    """Reasons the replies of a GET trial cannot be trusted (misses, error replies)."""
    problems = []
    misses = int(delta.keyspace_misses)
    if misses > 0:
        problems.append(
            TrialReason(InvalidReason.GET_MISSES, f"{misses} (keys not populated or evicted)")
        )
    problems.extend(error_problems(delta))
    return problems


def error_problems(delta: ServerDelta) -> list[TrialReason]:
    errors = int(delta.error_replies)
    if errors <= 0:
        return []
    named = ", ".join(f"{n} x{int(c)}" for n, c in sorted(delta.errors.items()))
    return [TrialReason(InvalidReason.ERROR_REPLIES, f"{errors} ({named or 'see errorstats'})")]


def mix_problems(
    workload: MixWorkload, delta: ServerDelta, requests_per_process: list[int]
) -> list[TrialReason]:
    """Error replies, and per-command calls out of the declared ratios.

    memtier counts error replies as successes, so the server's counters decide. Each
    process's commands are expected in its own ratios over its own requests. Commands run
    inside scripts and functions are counted by the server too, so with EVAL/EVALSHA/FCALL
    in the mix only a shortfall is a problem, not an excess.
    """
    problems = error_problems(delta)
    expected: dict[str, float] = {}
    example: dict[str, list[str]] = {}
    if len(requests_per_process) != len(workload.processes):
        return problems
    for process, requests in zip(workload.processes, requests_per_process, strict=True):
        total_ratio = sum(c.ratio for c in process.commands)
        for c in process.commands:
            key = commands.name(c.args)
            expected[key] = expected.get(key, 0.0) + requests * c.ratio / total_ratio
            example.setdefault(key, c.args)
    scripted = any(k in SCRIPT_COMMANDS for k in expected)
    tolerance = workload.tolerance_pct / 100.0
    for key, want in expected.items():
        observed = sum(delta.calls(n) for n in commands.stat_names(example[key]))
        low = math.floor(want * (1 - tolerance))
        high = math.ceil(want * (1 + tolerance))
        if observed < low or (observed > high and not scripted):
            problems.append(
                TrialReason(
                    InvalidReason.RATIOS_OFF,
                    f"{key} ran {int(observed)} times, the declared ratios expect about "
                    f"{want:.0f} (tolerance {workload.tolerance_pct:g}%)",
                )
            )
    return problems


def check_version(workload: Workload, label: str, version: str) -> None:
    """A mix that needs a newer Redis than a target runs fails before measuring."""
    if isinstance(workload, GetPipelineWorkload):
        return
    have = commands.version_tuple(version)
    if have < commands.version_tuple(workload.min_redis):
        raise BadInput(
            f"workload {workload.name}: min_redis is {workload.min_redis} but version "
            f"{label!r} runs {version}; drop that version or choose another workload"
        )
    for where, args in workload.located_args():
        need = commands.since(args)
        if need and have < commands.version_tuple(need):
            raise BadInput(
                f"workload {workload.name}: {where} {commands.name(args)} needs Redis {need} "
                f"but version {label!r} runs {version}; drop that version or the command"
            )


def counted_commands(workload: Workload) -> frozenset[str]:
    """The INFO commandstats names whose calls count a window's operations when the load
    is paired in time (bench/windows.py): GET for a sweep, the mix's commands for a mix
    (calls made inside its scripts under those names too, alike for every version)."""
    if isinstance(workload, GetPipelineWorkload):
        return frozenset({"get"})
    if isinstance(workload, LifecycleWorkload | DriverWorkload):
        return frozenset()
    return frozenset(n for c in workload.all_commands for n in commands.stat_names(c.args))


def saturates(workload: Workload) -> bool:
    """Whether a trial of ``workload`` should keep the server busy: GET sweeps and mixes do,
    unless a mix has blocking commands (BRPOP, XREADGROUP BLOCK), which wait by design."""
    if isinstance(workload, GetPipelineWorkload):
        return True
    if isinstance(workload, LifecycleWorkload | DriverWorkload):
        return False  # consumers block and wait on round trips by design
    return not any(commands.blocks(c.args) for c in workload.all_commands)


def with_loadgen_threads(workload: Workload, tool: str, client_cpus: int) -> Workload:
    """A GET sweep under memtier runs one thread per client CPU unless the workload file
    says how many: one memtier thread saturates its core before a Redis server saturates
    its own, so with the cores to spare more threads let the server be the bottleneck.
    (``clients`` is per thread, as memtier counts it, so threads stop where clients x
    threads would pass Redis's maxclients: core/limits.CONNECTIONS.) Mixes keep their
    threads: their connections per process are part of what the mix models."""
    if (
        tool != "memtier"
        or not isinstance(workload, GetPipelineWorkload)
        or "threads" in workload.model_fields_set
        or client_cpus <= 1
    ):
        return workload
    threads = max(1, min(client_cpus, limits.CONNECTIONS // workload.clients))
    return workload.model_copy(update={"threads": threads})
