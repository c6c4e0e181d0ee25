"""From command-line options to a Job: validate everything, resolve, build, pick the tools.

The order is deliberate: every mistake the user can fix (spec, CPU list, file, option,
missing tool) is reported before the first build starts, and every build finishes
before the first measurement.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass

from regtrack.bench import loadgen
from regtrack.bench.callgrind import control as callgrind
from regtrack.bench.loadgen import memtier
from regtrack.bench.runner import Job
from regtrack.bench.runtimes import docker as docker_runtime
from regtrack.core import docker_engine
from regtrack.core.cpus import plan_cpus
from regtrack.core.errors import BadInput
from regtrack.core.settings import load_settings
from regtrack.targets import build, images, versions
from regtrack.workloads import points
from regtrack.workloads.files import load_workload
from regtrack.workloads.model import MixWorkload, Workload

MEMORY_RE = re.compile(r"^[1-9][0-9]*[bkmgBKMG]?$")


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
    runtime: str = "native"  # native | docker
    docker_images: str = "auto"  # auto | official | build
    builder_image: str | None = None  # docker build commits in this image
    memory: str | None = None  # container memory limit, e.g. 2g


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


DURATION_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(s|m|h|min)?\s*$")


def parse_duration(text: str, option: str) -> float:
    """ "600", "600s", "10m", "1h" -> seconds; anything else is one clear line."""
    m = DURATION_RE.match(text or "")
    if not m or float(m.group(1)) <= 0:
        raise BadInput(f"{option} {text!r}: give a time like 600s, 10m or 1h")
    factor = {"s": 1, None: 1, "m": 60, "min": 60, "h": 3600}[m.group(2)]
    return float(m.group(1)) * factor


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
    if options.memory and (options.runtime != "docker" or not MEMORY_RE.match(options.memory)):
        raise BadInput(
            f"--memory {options.memory!r}: give a container limit like 512m or 4g, "
            "with --runtime docker"
        )
    if options.builder_image and options.runtime != "docker":
        raise BadInput("--builder-image builds container images: add --runtime docker")
    client = None
    if options.runtime == "docker":
        docker_runtime.check_metric(options.metric)
        client = docker_engine.engine()  # no engine: one line, before any build
    elif options.metric != "throughput":
        callgrind.require()  # before any build: say at once that valgrind is missing
    tool = choose_tool(options.loadgen, workload)
    workload = points.with_loadgen_threads(workload, tool, len(cpus.client))
    if tool != "redis-benchmark":
        loadgen.locate(tool, options.loadgen_bin)  # memtier missing: say so before building
    elif options.loadgen_bin:
        loadgen.locate(tool, options.loadgen_bin)  # a wrong path fails before any build
    targets = versions.resolve(specs, options.source_repo)
    image_specs = [t for t in targets if t.kind == "image"]
    if image_specs and options.runtime != "docker":
        raise BadInput(
            f"version {image_specs[0].spec!r} is a container image: add --runtime docker, or give "
            "a tag, commit or bin:PATH"
        )
    kind = images.decide(targets, options.docker_images, flags) if client is not None else None
    in_container = (
        {
            t.label
            for t in targets
            if images.uses_official(t, kind)
            or images.built_in_docker(t, kind, options.builder_image)
        }
        if kind is not None
        else set()
    )
    build.obtain([t for t in targets if t.label not in in_container], flags, on_phase)
    if client is not None and kind is not None:
        images.assign(client, targets, kind, on_phase, options.builder_image, flags)
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
        runtime=options.runtime,
        memory=options.memory,
        docker=client,
        docker_images=kind,
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
