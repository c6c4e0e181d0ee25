"""The Job (everything one run needs) and how options become one: validate, resolve, build.

The order is deliberate: every mistake the user can fix (spec, CPU list, file, option,
missing tool) is reported before the first build starts, and every build finishes
before the first measurement.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regtrack.bench import loadgen, seeds, shards
from regtrack.bench import loadgen_choice as choosing
from regtrack.bench import trial as measure
from regtrack.bench.callgrind import control as callgrind
from regtrack.bench.loadgen import held, memtier
from regtrack.bench.loadgen.base import LoadgenBinary
from regtrack.bench.loadgen_choice import Choice
from regtrack.bench.plan import MODES_BY_METRIC, Visit, interleave
from regtrack.bench.runtimes import docker as docker_runtime
from regtrack.core import docker_engine, filesystems
from regtrack.core.cpus import CpuPlan, Topology, plan_cpus, plan_duet, split_sides
from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.core.options import Options
from regtrack.core.settings import RunSettings, load_settings, settings_source
from regtrack.targets import build, images, versions
from regtrack.targets.versions import Target
from regtrack.workloads import points as workload_points
from regtrack.workloads import server_config
from regtrack.workloads.files import load_workload
from regtrack.workloads.model import MixWorkload, Workload

MEMORY_RE = re.compile(r"^[1-9][0-9]*[bkmgBKMG]?$")


@dataclass(frozen=True)
class RunPurpose:
    """Why a run is measured, recorded with it beside its Job's plan (which says what is
    measured): the commands that measure decide it, the Job never changes for it."""

    # "fixed": the planned repetitions, looked at once; "sequential": blocks are added
    # while a gate is undecided, so intervals must stay valid under repeated looks.
    design: str = "fixed"
    # The baseline label and thresholds the command printed its verdicts with, so the
    # report and a later `compare` show the same verdicts (analysis.comparison_settings).
    comparison: Mapping[str, Any] = field(default_factory=dict)
    # The bisection this run measures for (regtrack bisect): its id and the run's role.
    bisection: Mapping[str, Any] | None = None

    def as_config(self) -> dict[str, Any]:
        return {
            "design": self.design,
            "comparison": dict(self.comparison),
            "bisection": dict(self.bisection) if self.bisection is not None else None,
        }


@dataclass
class Job:
    """Everything one run needs, decided before the first server starts."""

    targets: list[Target]
    workload: Workload
    settings: RunSettings
    cpus: CpuPlan
    loadgen: LoadgenBinary
    metric: str = "throughput"  # throughput | instructions | both
    runtime: str = "native"  # native | docker
    memory: str | None = None  # container memory limit
    docker: Any = None  # the Docker engine client, for --runtime docker
    # --runtime docker: the one kind of build every version runs, official | build (images.py)
    docker_images: str | None = None
    points: list[workload_points.Point] = field(init=False)
    # Modes still measured in later repetitions, once a sequential gate decided a metric:
    # the plan as it grows while it runs (extend), recorded with the run (update_config).
    narrowed: dict[int, tuple[str, ...]] = field(default_factory=dict)
    # Why the servers' hash seeds are not regtrack's (None: they are; regtrack.bench.seeds).
    seed_problem: str | None = field(init=False)
    # Versions of a range A..B that did not build: skipped, never fatal to the range.
    skipped: list[dict[str, Any]] = field(default_factory=list)
    # This host's share of a plan measured by several (--shard K/N, or an engine's
    # variables; regtrack.bench.shards); None: the whole plan.
    shard: shards.Shard | None = None
    # Where servers keep their files (AOF, RDB): a directory per server below it (for
    # containers only when they persist; files_dir()).
    data_dir: str | None = None
    # Which load generator and why (bench/loadgen_choice.py); None until a GET sweep's
    # probe has decided between memtier and redis-benchmark (settle_loadgen).
    loadgen_choice: Choice | None = None

    def __post_init__(self) -> None:
        self.points = workload_points.points(self.workload)
        if self.metric != "throughput" and self.runtime == "native":
            callgrind.require()
        if self.settings.seeds == "random":
            self.seed_problem = 'random seeds were asked for (seeds = "random")'
        elif self.runtime == "native":
            self.seed_problem = seeds.native_problem()
        else:
            self.seed_problem = None

    def seed(self, repetition: int) -> str | None:
        """The seed every server of ``repetition`` starts with, or None (Redis's own)."""
        if self.seed_problem:
            return None
        return seeds.for_repetition(repetition, self.settings.seed_offset or 0)

    def settle_loadgen(self) -> Choice:
        """Decide a GET sweep's load generator if it is not yet (a probe, or the answer
        kept for this machine and setup), switching to memtier when it saturates."""
        if self.loadgen_choice is None:
            self.loadgen_choice = choosing.decide(self)
            if self.loadgen_choice.tool == "memtier":
                self.loadgen = loadgen.locate("memtier")
                self.workload = workload_points.with_loadgen_threads(
                    self.workload, "memtier", self.load_cpus
                )
                self.points = workload_points.points(self.workload)
        return self.loadgen_choice

    @property
    def context(self) -> measure.Context:
        return measure.Context(
            settings=self.settings, cpus=self.cpus, loadgen=self.loadgen, workload=self.workload
        )

    @property
    def pairs_in_time(self) -> bool:
        """Whether throughput is paired in time (bench/paired.py): asked for (the default,
        or a duet), two or more versions to compare, and a load generator that can be
        paused."""
        return (
            self.settings.pairing in ("time", "duet")
            and len(self.targets) > 1
            and self.loadgen.name in held.PAUSABLE
        )

    @property
    def duet(self) -> bool:
        """Whether the paired versions run at once, each on CPUs of its own."""
        return self.pairs_in_time and self.settings.pairing == "duet"

    def side_cpus(self) -> dict[str, CpuPlan]:
        """Each version's server and load generator CPUs: its own share in a duet, else
        the run's."""
        if not self.duet:
            return {t.label: self.cpus for t in self.targets}
        plans = split_sides(self.cpus, len(self.targets))
        return {t.label: plan for t, plan in zip(self.targets, plans, strict=True)}

    @property
    def load_cpus(self) -> int:
        """CPUs one load generator has: the run's client CPUs, or a duet side's."""
        return len(next(iter(self.side_cpus().values()), self.cpus).client)

    @property
    def throughput_method(self) -> str | None:
        """How throughput was measured (part of the comparability key): "paired in time",
        "duet", "separate trials", or None for a run that counts instructions only."""
        if self.metric == "instructions":
            return None
        if self.duet:
            return "duet"
        return "paired in time" if self.pairs_in_time else "separate trials"

    def visits(self, first: int = 0) -> list[Visit]:
        """The visits this host measures, from repetition ``first`` on: the whole plan's,
        or its shard's blocks (decided on the whole plan, so every host agrees)."""
        mine = shards.share(self.planned(), self.shard)
        return [v for v in mine if v.repetition >= first]

    def planned(self) -> list[Visit]:
        """Every visit of the plan, whichever host measures it."""
        return interleave(
            [t.label for t in self.targets],
            self.points,
            self.settings.repetitions,
            MODES_BY_METRIC[self.metric],
            0,
            self.narrowed,
            paired=self.pairs_in_time,
        )

    def extend(self, repetitions: int, modes: tuple[str, ...]) -> None:
        """Grow the plan to ``repetitions``; the new ones measure only ``modes``."""
        first = self.settings.repetitions
        self.settings = self.settings.model_copy(update={"repetitions": repetitions})
        if set(modes) != set(MODES_BY_METRIC[self.metric]):
            self.narrowed.update({rep: modes for rep in range(first, repetitions)})

    def server_data(self) -> dict[str, Any]:
        """Where the servers' files go and on which filesystem (core/filesystems.py), and
        whether the settings write any (AOF or RDB): with persistence, the filesystem is
        part of what was measured."""
        persistent = self.persistent()
        if self.runtime == "docker" and not persistent:
            where = {"dir": "/data", "mount": "container tmpfs", "filesystem": "tmpfs"}
        else:  # containers of a persistent server write to a host directory too
            where = filesystems.of(self.data_dir or tempfile.gettempdir())
        return {**where, "persistent": persistent}

    def persistent(self) -> bool:
        """Whether the run's servers write AOF or RDB files (server_config.persistent)."""
        return server_config.persistent(server_config.from_stored(self.workload.server))

    def files_dir(self) -> str | None:
        """Where a container's files go: below the data directory when it persists them,
        else (None) a tmpfs of its own; native servers always use the data directory."""
        if self.runtime == "docker" and not self.persistent():
            return None
        return self.data_dir or tempfile.gettempdir()

    def server_settings(self, target: Target) -> list[server_config.Setting]:
        """The settings ``target``'s servers run with: the run's, less optional ones this
        version does not know (bench/server_settings.py records them per version)."""
        return server_config.from_stored(target.details.get("server_config", self.workload.server))

    def server_argv(self, target: Target) -> list[str]:
        return server_config.argv(self.server_settings(target))

    def config(self) -> dict[str, Any]:
        """What the run stores as its config; ``plan_id`` names the plan it measures (or
        its share of), the same on every host that measures a shard of it."""
        config = {
            "metric": self.metric,
            "runtime": self.runtime,
            "memory": self.memory,
            "server_data": self.server_data(),
            "docker_images": self.docker_images,
            "settings": self.settings.model_dump(),
            "settings_file": settings_source(),
            "workload": self.workload.model_dump(),
            "cpus": self.cpus.as_dict(),
            "targets": [t.as_dict() for t in self.targets],
            "points": [p.label for p in self.points],
            "narrowed": {str(rep): list(modes) for rep, modes in self.narrowed.items()},
            "callgrind_hz": callgrind.CALLGRIND_HZ if self.metric != "throughput" else None,
            "seeds": f"not controlled: {self.seed_problem}" if self.seed_problem else "fixed",
            "loadgen_choice": self.loadgen_choice.as_dict() if self.loadgen_choice else None,
            "throughput_method": self.throughput_method,
            "skipped": self.skipped,
            "shard": None
            if self.shard is None
            else {"index": self.shard.index, "count": self.shard.count, "from": self.shard.source},
        }
        config["plan_id"] = shards.plan_id(config)
        return config


DURATION_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(s|m|h|min)?\s*$")


def parse_duration(text: str, option: str) -> float:
    """ "600", "600s", "10m", "1h" -> seconds; anything else is one clear line."""
    m = DURATION_RE.match(text or "")
    if not m or float(m.group(1)) <= 0:
        raise BadInput(f"{option} {text!r}: give a time like 600s, 10m or 1h")
    factor = {"s": 1, None: 1, "m": 60, "min": 60, "h": 3600}[m.group(2)]
    return float(m.group(1)) * factor


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
    if threads > len(cpus.server) and metric != "instructions":
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
        pairing=options.pairing,
        window=options.window,
    )
    if options.seed_offset is not None:
        offset = options.seed_offset
    elif settings.seed_offset is not None:
        offset = settings.seed_offset
    elif options.shard is not None:
        offset = shards.seed_offset(os.environ)
    else:
        offset = seeds.draw_offset()
    settings = settings.model_copy(update={"seed_offset": offset})
    workload = load_workload(
        options.workload,
        pipelines=options.pipelines,
        keys=options.keys,
        data_size=options.data_size,
        clients=options.clients,
    )
    # A duet plans CPUs for every version it compares (a range: two at least, checked
    # again once it is resolved).
    sides = max(2, len(specs)) if len(specs) > 1 or ".." in specs[0].value else 1
    duet = settings.pairing == "duet" and options.metric != "instructions" and sides > 1
    if duet:
        cpus = plan_duet(sides, options.server_cpus, options.client_cpus)
        side = split_sides(cpus, sides)[0]
    else:
        cpus = side = plan_cpus(options.server_cpus, options.client_cpus)
    workload = with_server_settings(workload, options.server_config, side, options.metric)
    flags = build.parse_build_flags(options.build_flags)
    if options.memory and (options.runtime != "docker" or not MEMORY_RE.match(options.memory)):
        raise BadInput(
            f"--memory {options.memory!r}: give a container limit like 512m or 4g, "
            "with --runtime docker"
        )
    if options.data_dir and not Path(options.data_dir).is_dir():
        raise BadInput(f"--data-dir {options.data_dir}: give an existing directory")
    if options.builder_image and options.runtime != "docker":
        raise BadInput("--builder-image builds container images: add --runtime docker")
    client = None
    if options.runtime == "docker":
        docker_runtime.check_metric(options.metric)
        client = docker_engine.engine()  # no engine: one line, before any build
    elif options.metric != "throughput":
        callgrind.require()  # before any build: say at once that valgrind is missing
    tool = choose_tool(options.loadgen, workload)
    workload = workload_points.with_loadgen_threads(workload, tool, len(side.client))
    if tool != "redis-benchmark":
        loadgen.locate(tool, options.loadgen_bin)  # memtier missing: say so before building
    elif options.loadgen_bin:
        loadgen.locate(tool, options.loadgen_bin)  # a wrong path fails before any build
    targets = versions.resolve(
        specs, options.source_repo, every=options.every, most=options.max_commits
    )
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
    failed = build.obtain([t for t in targets if t.label not in in_container], flags, on_phase)
    skipped = [
        {
            "label": t.label,
            "commit": t.commit,
            "subject": t.details.get("subject"),
            "reason": f"does not build: {t.details['build_failed']}",
        }
        for t in failed
    ]
    targets = [t for t in targets if t not in failed]
    if not targets:
        raise CannotMeasure(f"no version of {specs[0].text} builds: {skipped[0]['reason']}")
    if duet and len(targets) > 2:
        split_sides(cpus, len(targets))  # a range's versions each need CPUs of their own
    if client is not None and kind is not None:
        images.assign(client, targets, kind, on_phase, options.builder_image, flags)
    built_benchmarks = [
        t.details["build"]["benchmark"]
        for t in reversed(targets)
        if t.details.get("build", {}).get("benchmark")
    ]
    binary = loadgen.locate(tool, options.loadgen_bin, built_benchmarks)
    probed = choosing.pending(options.loadgen, options.loadgen_bin, workload, options.metric)
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
        loadgen_choice=None
        if probed
        else choosing.unprobed(options.loadgen, options.loadgen_bin, workload, tool),
    )


def choose_tool(requested: str | None, workload: Workload) -> str:
    """redis-benchmark for GET sweeps, unless a probe finds that memtier saturates the
    server (Job.settle_loadgen); memtier for mixes, or the built-in driver without it.

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
    return "memtier" if memtier.installed() else "builtin"
