"""From command-line options to a Job: validate everything, resolve, build, pick the tools.

The order is deliberate: every mistake the user can fix (spec, CPU list, file, option,
missing tool) is reported before the first build starts, and every build finishes
before the first measurement.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass

from regtrack import build, loadgen, versions
from regtrack.callgrind import control as callgrind
from regtrack.config import load_settings, load_workload
from regtrack.cpus import plan_cpus
from regtrack.errors import BadInput
from regtrack.loadgen import memtier
from regtrack.runner import Job
from regtrack.workload_spec import MixWorkload, Workload


@dataclass(frozen=True)
class Options:
    """What `regtrack run` and `regtrack ci` share."""

    workload: str = "get-pipeline"
    pipelines: list[int] | None = None
    duration: float | None = None
    warmup: float | None = None
    repetitions: int | None = None
    keys: int | None = None
    data_size: int | None = None
    clients: int | None = None
    server_cpus: str | None = None
    client_cpus: str | None = None
    loadgen_bin: str | None = None
    loadgen: str | None = None  # redis-benchmark | memtier | builtin (default: by workload)
    metric: str = "throughput"
    instruction_requests: int | None = None
    source_repo: str | None = None
    build_flags: str | None = None


def int_list(text: str | None, option: str) -> list[int] | None:
    """ "1,10,30" -> [1, 10, 30]; anything else is one clear line."""
    if text is None:
        return None
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise BadInput(f"{option} {text!r}: give comma-separated numbers like 1,10,30") from None
    if not values or any(v <= 0 for v in values):
        raise BadInput(f"{option} {text!r}: give positive numbers like 1,10,30")
    return values


def prepare_job(
    specs: list[versions.VersionSpec],
    options: Options,
    on_phase: Callable[[str], None] = lambda text: None,
) -> Job:
    """Validate, resolve and build; returns a Job ready to execute."""
    settings = load_settings(
        duration=options.duration,
        warmup=options.warmup,
        repetitions=options.repetitions,
        instruction_requests=options.instruction_requests,
    )
    workload = load_workload(
        options.workload,
        pipelines=options.pipelines,
        keys=options.keys,
        data_size=options.data_size,
        clients=options.clients,
    )
    cpus = plan_cpus(options.server_cpus, options.client_cpus)
    flags = build.parse_build_flags(options.build_flags)
    if options.metric != "throughput":
        callgrind.require()  # before any build: say at once that valgrind is missing
    tool = choose_tool(options.loadgen, workload)
    if tool != "redis-benchmark":
        loadgen.locate(tool, options.loadgen_bin)  # memtier missing: say so before building
    elif options.loadgen_bin:
        loadgen.locate(tool, options.loadgen_bin)  # a wrong path fails before any build
    targets = versions.resolve(specs, options.source_repo)
    build.obtain(targets, flags, on_phase)
    built_benchmarks = [
        t.details["build"]["benchmark"]
        for t in reversed(targets)
        if t.details.get("build", {}).get("benchmark")
    ]
    binary = loadgen.locate(tool, options.loadgen_bin, built_benchmarks)
    return Job(
        targets=targets,
        workload=workload,
        settings=settings,
        cpus=cpus,
        loadgen=binary,
        metric=options.metric,
    )


def choose_tool(requested: str | None, workload: Workload) -> str:
    """redis-benchmark for GET sweeps; memtier for mixes, or the built-in driver without it.

    redis-benchmark sends one command per run, so it cannot replay a mix.
    """
    is_mix = isinstance(workload, MixWorkload)
    if requested == "redis-benchmark" and is_mix:
        raise BadInput(
            f"workload {workload.name} is a command mix; redis-benchmark sends one command "
            "per run and cannot replay it: use --loadgen memtier or --loadgen builtin"
        )
    if requested:
        return requested
    if not is_mix:
        return "redis-benchmark"
    return "memtier" if shutil.which(memtier.NAME) else "builtin"
