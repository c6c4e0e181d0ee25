"""How options become a Job: validate, resolve, build.

The order is deliberate: every mistake the user can fix (spec, CPU list, file, option,
missing tool) is reported before the first build starts, and every build finishes
before the first measurement.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from regtrack.bench import delay_proxy, loadgen, loadgen_choice, seeds, shards
from regtrack.bench.callgrind import control
from regtrack.bench.job import Job, Skipped
from regtrack.bench.loadgen import memtier, openloop
from regtrack.bench.loadgen.base import LoadgenBinary
from regtrack.bench.runtimes import docker
from regtrack.core import cycles, docker_engine
from regtrack.core.cpus import CpuPlan, Topology, plan_cpus, plan_duet, split_sides
from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.core.options import Options
from regtrack.core.settings import RunSettings, load_settings
from regtrack.plan.latency_plan import PAIRED as LATENCY_PAIRED
from regtrack.plan.latency_plan import SLO_LOADS, LatencyPlan, Slo, parse_values
from regtrack.targets import build, images, make_flags, versions
from regtrack.targets.versions import Target
from regtrack.workloads import points, server_config
from regtrack.workloads.driver import DriverWorkload
from regtrack.workloads.files import load_workload
from regtrack.workloads.lifecycle import LifecycleWorkload
from regtrack.workloads.model import MixWorkload, Workload

MEMORY_RE = re.compile(r"^[1-9][0-9]*[bkmgBKMG]?$")
# A lifecycle run's task latency, when no rate is given: at half its measured capacity.
LIFECYCLE_LOAD = "0.5"


def with_server_settings(
    workload: Workload, options: tuple[str, ...], cpus: CpuPlan, metric: str = "throughput"
) -> Workload:
    """The workload with its [server] table and --server-config combined and checked for
    shape, and the server's CPUs checked against the threads the settings ask for: N
    I/O threads need N CPUs to be measured for throughput. Instruction counts do not:
    valgrind runs one thread of the server at a time whatever its CPUs, so a count with
    ``--metric instructions`` may run on fewer (docs/workloads.md: what it then counts)."""
    settings = server_config.combine(
        server_config.from_table(workload.server, f"workload {workload.name}"),
        [server_config.parse_option(text) for text in options],
    )
    threads = server_config.io_threads(settings)
    if threads > len(cpus.server) and metric not in cycles.COUNTING_ONLY:
        usable = len(Topology.detect().usable)
        if threads < usable:
            instead = (
                f"pass --server-cpus with {threads} CPUs (e.g. --server-cpus 0-{threads - 1} "
                "and --client-cpus on others)"
            )
        else:
            instead = (
                f"this machine has {usable} usable CPUs, too few for {threads} server "
                "threads and a load generator: measure on a larger host"
            )
        raise BadInput(
            f"io-threads {threads} needs {threads} server CPUs, but the server has "
            f"{len(cpus.server)} (CPU {cpus.server_list}): {instead}, or use fewer "
            "io-threads, or --metric instructions (counts need no more CPUs)"
        )
    return workload.model_copy(update={"server": server_config.as_table(settings)})


def _settings(options: Options) -> RunSettings:
    """The settings file under the options, with the run's seed offset decided: the one
    asked for, the settings', a CI pipeline's for a shard, else a fresh one."""
    settings = load_settings(
        duration=options.duration,
        warmup=options.warmup,
        repetitions=options.repetitions,
        instruction_requests=options.instruction_requests,
        pairing=options.pairing,
        window=options.window,
    )
    if options.rtt is not None:
        settings = settings.model_copy(update={"rtt_us": _rtt(options), "pairing": "separate"})
    if options.seed_offset is not None:
        offset = options.seed_offset
    elif settings.seed_offset is not None:
        offset = settings.seed_offset
    elif options.shard is not None:
        offset = shards.seed_offset(os.environ)
    else:
        offset = seeds.draw_offset()
    return settings.model_copy(update={"seed_offset": offset})


def _rtt(options: Options) -> int:
    """--rtt's round trip in microseconds, measured in separate trials (each visit's
    trials are checked against the delay proxy's report; a paired window of 0.1 s is a
    handful of round trips at 28 ms)."""
    rtt_us = delay_proxy.parse_rtt(options.rtt or "")
    if options.metric in cycles.COUNTING_ONLY:
        raise BadInput(
            f"--rtt {options.rtt}: a round trip changes no instruction count; measure with "
            "--metric throughput or both"
        )
    if options.pairing == "duet":
        raise BadInput(
            "--rtt measures separate trials (the delay proxy is judged per trial, on the "
            "run's client CPUs): give --pairing separate or time, not duet"
        )
    return rtt_us


def _runtime(options: Options) -> Any:
    """The Docker engine's client for --runtime docker (else None), after the options
    that only make sense with one are checked: all before anything is built."""
    if options.memory and (options.runtime != "docker" or not MEMORY_RE.match(options.memory)):
        raise BadInput(
            f"--memory {options.memory!r}: give a container limit like 512m or 4g, "
            "with --runtime docker"
        )
    if options.data_dir and not Path(options.data_dir).is_dir():
        raise BadInput(f"--data-dir {options.data_dir}: give an existing directory")
    if options.builder_image and options.runtime != "docker":
        raise BadInput("--builder-image builds container images: add --runtime docker")
    if options.runtime == "docker":
        docker.check_metric(options.metric)
        return docker_engine.engine()  # no engine: one line, before any build
    if options.metric != "throughput":
        control.require()  # before any build: say at once that valgrind is missing
    return None


def _obtain(
    targets: list[Target],
    kind: str | None,
    builder_image: str | None,
    flags: list[str],
    on_phase: Callable[[str], None],
) -> tuple[list[Target], tuple[Skipped, ...]]:
    """Build what runs natively or from regtrack's own builds (official images and
    builds inside Docker are made later); a version that does not build is skipped,
    with why, never fatal to the others."""
    in_container = (
        {
            t.label
            for t in targets
            if images.uses_official(t, kind) or images.built_in_docker(t, kind, builder_image)
        }
        if kind is not None
        else set()
    )
    built = {
        t.label: t
        for t in build.obtain([t for t in targets if t.label not in in_container], flags, on_phase)
    }
    obtained = [built.get(t.label, t) for t in targets]
    skipped = tuple(
        Skipped(t.label, t.commit, t.subject, f"does not build: {t.build_failed}")
        for t in obtained
        if t.build_failed is not None
    )
    return [t for t in obtained if t.build_failed is None], skipped


def _cpus(
    specs: list[versions.VersionSpec], settings: RunSettings, options: Options
) -> tuple[bool, CpuPlan, CpuPlan]:
    """(duet, the run's CPUs, one side's CPUs). A duet plans CPUs for every version it
    compares (a range: two at least, checked again once it is resolved)."""
    sides = max(2, len(specs)) if len(specs) > 1 or ".." in specs[0].value else 1
    duet = settings.pairing == "duet" and options.metric not in cycles.COUNTING_ONLY and sides > 1
    if duet:
        cpus = plan_duet(sides, options.server_cpus, options.client_cpus)
        return True, cpus, split_sides(cpus, sides)[0]
    cpus = plan_cpus(options.server_cpus, options.client_cpus)
    return False, cpus, cpus


def _refuse_images_without_docker(targets: list[Target], runtime: str) -> None:
    images_given = [t for t in targets if t.kind == "image"]
    if images_given and runtime != "docker":
        raise BadInput(
            f"version {images_given[0].spec!r} is a container image: add --runtime docker, or "
            "give a tag, commit or bin:PATH"
        )


def _built_benchmarks(targets: list[Target]) -> list[str]:
    """The redis-benchmark binaries the versions' builds made, the newest version's first."""
    return [t.build.benchmark for t in reversed(targets) if t.build and t.build.benchmark]


def prepare_job(
    specs: list[versions.VersionSpec],
    options: Options,
    on_phase: Callable[[str], None] = lambda text: None,
) -> Job:
    """Validate, resolve and build; returns a Job ready to execute."""
    settings = _settings(options)
    workload, options = _workload(options)
    duet, cpus, side = _cpus(specs, settings, options)
    workload = with_server_settings(workload, options.server_config, side, options.metric)
    flags = make_flags.parse_build_flags(options.build_flags)
    latency, engine = open_loop(options, workload)  # the engine missing: said before building
    if settings.rtt_us is not None and engine is None:
        engine = openloop.locate()  # the delay proxy is the engine's `delay` subcommand
    client = _runtime(options)
    tool = choose_tool(options.loadgen, workload)
    workload = points.with_loadgen_threads(workload, tool, len(side.client))
    if tool != "redis-benchmark" or options.loadgen_bin:
        # memtier missing, or a wrong path: say so before building
        loadgen.locate(tool, options.loadgen_bin)
    targets = versions.resolve(
        specs, options.source_repo, every=options.every, most=options.max_commits
    )
    _refuse_images_without_docker(targets, options.runtime)
    kind = images.decide(targets, options.docker_images, flags) if client is not None else None
    targets, skipped = _obtain(targets, kind, options.builder_image, flags, on_phase)
    if not targets:
        raise CannotMeasure(f"no version of {specs[0].text} builds: {skipped[0].reason}")
    if duet and len(targets) > 2:
        split_sides(cpus, len(targets))  # a range's versions each need CPUs of their own
    if client is not None and kind is not None:
        targets = images.assign(client, targets, kind, on_phase, options.builder_image, flags)
    binary = loadgen.locate(tool, options.loadgen_bin, _built_benchmarks(targets))
    probed = loadgen_choice.pending(options.loadgen, options.loadgen_bin, workload, options.metric)
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
        skipped=skipped,
        data_dir=options.data_dir,
        shard=options.shard,
        seed_problem=seeds.problem(settings.seeds, options.runtime),
        loadgen_choice=None
        if probed
        else loadgen_choice.unprobed(options.loadgen, options.loadgen_bin, workload, tool),
        latency=_paired(latency, settings, targets),
        engine=engine,
    )


def _workload(options: Options) -> tuple[Workload, Options]:
    """The workload file with the options' overrides (or --driver's program), and the
    options as it reads them."""
    if options.driver is not None:
        return _driver(options)
    workload = load_workload(
        options.workload,
        pipelines=options.pipelines,
        keys=options.keys,
        data_size=options.data_size,
        clients=options.clients,
    )
    return workload, options


def with_task_latency(options: Options) -> Options:
    """`regtrack run` of a task lifecycle measures task latency at half its capacity when
    no rate is given, so every run that times tasks shows what a task feels at a stated
    load (`ci` gates task latency where --latency-load asks, as for every workload)."""
    asked = options.rate is not None or options.load or options.latency_load or options.slo
    if asked or options.driver is not None or options.metric in cycles.COUNTING_ONLY:
        return options
    try:
        lifecycle = load_workload(options.workload).kind == "lifecycle"
    except BadInput:
        return options  # prepare_job says what is wrong with it
    return dataclasses.replace(options, load=LIFECYCLE_LOAD) if lifecycle else options


def _driver(options: Options) -> tuple[Workload, Options]:
    """--driver: the user's program as the workload; it runs at its own pace, so no
    open-loop rate and no load generator of regtrack's apply (its first word is the
    program regtrack fingerprints)."""
    try:
        workload = DriverWorkload.from_text(options.driver or "")
    except ValueError as exc:
        raise BadInput(f"--driver {str(options.driver)[:60]!r}: {exc}") from None
    for name in ("rate", "load", "slo", "latency_load", "loadgen", "loadgen_bin"):
        if getattr(options, name) is not None:
            flag = "--" + name.replace("_", "-")
            raise BadInput(f"{flag} does not apply to --driver: your program sets its own load")
    return workload, dataclasses.replace(options, loadgen_bin=workload.command[0])


def open_loop(
    options: Options, workload: Workload
) -> tuple[LatencyPlan | None, LoadgenBinary | None]:
    """The open-loop trials asked for and the engine that sends them (located, with its
    version and digest kept in the plan), or (None, None); a lifecycle always needs the
    engine (it runs its producers and consumers)."""
    latency = latency_plan(options)
    lifecycle = isinstance(workload, LifecycleWorkload)
    if latency is None and not lifecycle:
        return None, None
    engine = openloop.locate()
    if latency is None:
        return None, engine
    return dataclasses.replace(latency, engine=engine.version, engine_sha256=engine.sha256), engine


def _paired(
    latency: LatencyPlan | None, settings: RunSettings, targets: list[Target]
) -> LatencyPlan | None:
    """Open-loop trials paired in time in a duet only (every server on CPUs of its own),
    one arrival stream moving between the servers: on a shared server CPU a version's
    background work (a serverCron that stalls) delays its neighbour's requests too, and
    the pairing hid a 2-ms stall that separate trials show (docs/latency.md). A task
    lifecycle's latency points pair the same way (bench/paired_lifecycle.py)."""
    if latency is None or settings.pairing != "duet" or len(targets) < 2:
        return latency
    return dataclasses.replace(latency, method=LATENCY_PAIRED)


def latency_plan(options: Options) -> LatencyPlan | None:
    """The open-loop trials asked for (--rate or --load), or None."""
    load = options.load or options.latency_load
    option = "--load" if options.load else "--latency-load"
    slo = Slo.parse(options.slo).text if options.slo else ""
    if slo and options.rate is None and load is None:
        load = ",".join(f"{x:g}" for x in SLO_LOADS)
    if options.rate is None and load is None:
        return None
    if options.rate is not None and load is not None:
        raise BadInput(f"--rate and {option}: give the open-loop rates one way, not both")
    return LatencyPlan(
        loads=parse_values(load, option) if load else (),
        rates=parse_values(options.rate, "--rate") if options.rate else (),
        arrival="constant" if options.arrival == "constant" else "poisson",
        slo=slo,
    )


def choose_tool(requested: str | None, workload: Workload) -> str:
    """redis-benchmark for GET sweeps, unless a probe finds that memtier saturates the
    server (loadgen_choice.settle); memtier for mixes, or the built-in driver without it.

    redis-benchmark sends one command per run, so it cannot replay a mix.
    """
    if isinstance(workload, DriverWorkload):
        return "driver"
    if isinstance(workload, LifecycleWorkload):
        if requested and requested != openloop.NAME:
            raise BadInput(
                f"workload {workload.name} is a task lifecycle: the open-loop engine runs its "
                f"producers and consumers, so --loadgen {requested} does not apply"
            )
        return openloop.NAME
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
    return "memtier" if memtier.installed() else "builtin"
