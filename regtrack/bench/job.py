"""The Job: everything one run needs, decided before the first server starts (how
options become one: bench/prepare.py), and the purpose a run is measured for."""

from __future__ import annotations

import dataclasses
import re
import tempfile
from dataclasses import dataclass, field
from typing import Any

from regtrack.bench import seeds, shards, trial
from regtrack.bench.callgrind import control
from regtrack.bench.loadgen import held, memtier
from regtrack.bench.loadgen.base import LoadgenBinary
from regtrack.bench.plan import (
    MODES_BY_METRIC,
    Visit,
    interleave,
    latency_points,
    trial_count,
)
from regtrack.core import cycles, filesystems
from regtrack.core.cpus import CpuPlan, split_sides
from regtrack.core.errors import BadInput
from regtrack.core.settings import RunSettings, settings_source
from regtrack.plan.latency_plan import MODE as LATENCY_MODE
from regtrack.plan.latency_plan import PAIRED as LATENCY_PAIRED
from regtrack.plan.latency_plan import LatencyPlan
from regtrack.plan.records import LoadgenChoice, RunPurpose, ServerData, Skipped
from regtrack.plan.run_plan import RunPlan
from regtrack.targets.target import Target
from regtrack.workloads import points, server_config
from regtrack.workloads.model import Workload
from regtrack.workloads.points import Point

# The first engine that runs a lifecycle against several servers in turns.
PAIRED_LIFECYCLE = (0, 5, 0)


@dataclass(frozen=True)
class Job:
    """Everything one run needs, decided before the first server starts; never changed
    afterwards (a grown plan or a decided load generator is a new Job). A record: making
    one probes nothing (what the machine says is decided by whoever makes it)."""

    targets: list[Target]
    workload: Workload
    settings: RunSettings
    cpus: CpuPlan
    loadgen: LoadgenBinary
    metric: str = "throughput"  # throughput | instructions | both | cycles
    runtime: str = "native"  # native | docker
    memory: str | None = None  # container memory limit
    docker: Any = None  # the Docker engine client, for --runtime docker
    # --runtime docker: the one kind of build every version runs, official | build (images.py)
    docker_images: str | None = None
    points: list[Point] = field(init=False)
    # Modes still measured in later repetitions, once a sequential gate decided a metric:
    # the plan as it grows while it runs (extended), recorded with the run (update_config).
    narrowed: dict[int, tuple[str, ...]] = field(default_factory=dict)
    # Why the servers' hash seeds are not regtrack's (None: they are; seeds.problem),
    # decided with the machine when the job is made (bench/prepare.py, flows/resume.py).
    seed_problem: str | None = None
    skipped: tuple[Skipped, ...] = ()  # versions of a range that did not build
    # This host's share of a plan measured by several (--shard K/N, or an engine's
    # variables; regtrack.bench.shards); None: the whole plan.
    shard: shards.Shard | None = None
    # Where servers keep their files (AOF, RDB): a directory per server below it (for
    # containers only when they persist; files_dir()).
    data_dir: str | None = None
    # Which load generator and why (bench/loadgen_choice.py); None until a GET sweep's
    # probe has decided between memtier and redis-benchmark (loadgen_choice.settle).
    loadgen_choice: LoadgenChoice | None = None
    # The settings file the run was planned with ("built-in": regtrack's own), kept as
    # planned when a resumed or grown run stores its config again.
    settings_file: str = field(default_factory=settings_source)
    # Open-loop latency trials (--rate, --load) and the engine that sends them (located
    # with the load generator: bench/prepare.py, flows/resume.py); None: none measured.
    latency: LatencyPlan | None = None
    engine: LoadgenBinary | None = None

    def __post_init__(self) -> None:
        # Derived from the workload, once: frozen, so set as dataclasses do themselves.
        object.__setattr__(self, "points", points.points(self.workload))

    def seed(self, repetition: int) -> str | None:
        """The seed every server of ``repetition`` starts with, or None (Redis's own)."""
        if self.seed_problem:
            return None
        return seeds.for_repetition(repetition, self.settings.seed_offset or 0)

    @property
    def context(self) -> trial.Context:
        return trial.Context(
            settings=self.settings, cpus=self.cpus, loadgen=self.loadgen, workload=self.workload
        )

    @property
    def modes(self) -> tuple[str, ...]:
        """The trial kinds each repetition measures, in order."""
        modes = MODES_BY_METRIC[self.metric]
        return (*modes, LATENCY_MODE) if self.latency else modes

    def latency_points(self) -> list[Point]:
        """The open-loop points (bench/plan.latency_points)."""
        return latency_points(self.points[0], self.latency) if self.latency else []

    @property
    def pairs_in_time(self) -> bool:
        """Whether throughput is paired in time (bench/paired.py): asked for (the default,
        or a duet), two or more versions to compare, and a load generator that can be
        paused, or a task lifecycle on an engine that takes turns (bench/paired_lifecycle.py)."""
        return (
            self.settings.pairing in ("time", "duet")
            and len(self.targets) > 1
            and (self.loadgen.name in held.PAUSABLE or self.lifecycle_pairs)
        )

    @property
    def lifecycle_pairs(self) -> bool:
        """A task lifecycle whose engine runs it paired in time (0.5.0 on)."""
        if self.workload.kind != "lifecycle" or self.engine is None:
            return False
        found = re.search(r"(\d+)\.(\d+)\.(\d+)", self.engine.version)
        return found is not None and tuple(map(int, found.groups())) >= PAIRED_LIFECYCLE

    @property
    def paired_modes(self) -> tuple[str, ...]:
        """The trial kinds whose versions share each repetition's time: throughput paired
        in time (bench/paired.py), open-loop latency where its plan pairs it
        (bench/paired_latency.py)."""
        modes = ("throughput",) if self.pairs_in_time else ()
        if self.latency is not None and self.latency.method == LATENCY_PAIRED:
            modes += (LATENCY_MODE,)
        return modes

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
    def cycle_weights(self) -> cycles.Weights | None:
        """--metric cycles: the weights its simulated events are turned into cycles with."""
        return self.settings.cycle_weights if self.metric == "cycles" else None

    @property
    def throughput_method(self) -> str | None:
        """How throughput was measured (part of the comparability key): "paired in time",
        "duet", "separate trials", or None for a run that counts instructions only."""
        if self.metric in cycles.COUNTING_ONLY:
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
            self.modes,
            0,
            self.narrowed,
            paired=self.paired_modes,
            mode_points={LATENCY_MODE: self.latency_points()},
        )

    def extended(self, repetitions: int, modes: tuple[str, ...]) -> Job:
        """The plan grown to ``repetitions``, the new ones measuring only ``modes``."""
        narrowed = dict(self.narrowed)
        if set(modes) != set(self.modes):
            narrowed.update({rep: modes for rep in range(self.settings.repetitions, repetitions)})
        settings = self.settings.model_copy(update={"repetitions": repetitions})
        return dataclasses.replace(self, settings=settings, narrowed=narrowed)

    def server_data(self) -> ServerData:
        """Where the servers' files go and on which filesystem (core/filesystems.py), and
        whether the settings write any (AOF or RDB): with persistence, the filesystem is
        part of what was measured."""
        persistent = self.persistent()
        if self.runtime == "docker" and not persistent:
            return ServerData("/data", "container tmpfs", "tmpfs", None, persistent)
        # containers of a persistent server write to a host directory too
        where = filesystems.of(self.data_dir or tempfile.gettempdir())
        return ServerData(
            where["dir"], where["mount"], where["filesystem"], where["device"], persistent
        )

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
        table = target.server_config if target.server_config is not None else self.workload.server
        return server_config.from_stored(table)

    def server_argv(self, target: Target) -> list[str]:
        return server_config.argv(self.server_settings(target))

    def config(self, purpose: RunPurpose | None = None) -> RunPlan:
        """The run's plan as it is stored, measured for ``purpose``; its ``plan_id`` names
        the plan it measures (or its share of), the same on every host that measures a
        shard of it."""
        return RunPlan(
            targets=tuple(self.targets),
            workload=self.workload,
            settings=self.settings,
            cpus=self.cpus,
            metric=self.metric,
            runtime=self.runtime,
            memory=self.memory,
            server_data=self.server_data(),
            docker_images=self.docker_images,
            settings_file=self.settings_file,
            points=tuple(p.label for p in self.points),
            narrowed=dict(self.narrowed),
            planned_trials=trial_count(self.planned()),
            callgrind_hz=control.CALLGRIND_HZ if self.metric != "throughput" else None,
            cache_geometry=cycles.geometry_text() if self.metric == "cycles" else None,
            seeds=f"not controlled: {self.seed_problem}" if self.seed_problem else "fixed",
            loadgen_choice=self.loadgen_choice,
            throughput_method=self.throughput_method,
            skipped=self.skipped,
            shard=self.shard,
            purpose=purpose or RunPurpose(),
            latency=self.latency,
        ).identified()

    @classmethod
    def from_config(
        cls, plan: RunPlan, tool: LoadgenBinary, docker: Any, engine: LoadgenBinary | None = None
    ) -> Job:
        """The job a run stored (its plan, its load generator ``tool``), as it was: a
        resumed or grown run measures what the first attempt planned, never today's
        defaults. ``docker``: the Docker engine, for a run in containers; ``engine``: the
        open-loop engine, for a plan with latency trials."""
        if plan.cpus is None:
            raise BadInput("the run's plan records no CPUs: it cannot be measured again")
        data = plan.server_data or ServerData()
        return cls(
            targets=list(plan.targets),
            workload=plan.workload,
            settings=plan.settings.model_copy(update={"seed_offset": plan.seed_offset}),
            cpus=plan.cpus,
            loadgen=tool,
            metric=plan.metric,
            runtime=plan.runtime,
            memory=plan.memory,
            docker=docker,
            docker_images=plan.docker_images,
            narrowed=dict(plan.narrowed),
            skipped=plan.skipped,
            shard=plan.shard,
            data_dir=data.dir if plan.runtime == "native" or data.persistent else None,
            loadgen_choice=_stored_choice(plan.loadgen_choice, tool.name),
            settings_file=plan.settings_file,
            latency=plan.latency,
            engine=engine,
        )


def _stored_choice(stored: LoadgenChoice | None, tool: str) -> LoadgenChoice:
    """The run's own load generator, as it was chosen: a resumed run never probes again.
    A choice names tools as --loadgen does (memtier), the binary by its own name."""
    if stored is not None:
        named = memtier.NAME if stored.tool == "memtier" else stored.tool
        if named == tool:
            return stored
    return LoadgenChoice(tool, "the run's own")


DURATION_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(s|m|h|min)?\s*$")


def parse_duration(text: str, option: str) -> float:
    """ "600", "600s", "10m", "1h" -> seconds; anything else is one clear line."""
    m = DURATION_RE.match(text or "")
    if not m or float(m.group(1)) <= 0:
        raise BadInput(f"{option} {text!r}: give a time like 600s, 10m or 1h")
    factor = {"s": 1, None: 1, "m": 60, "min": 60, "h": 3600}[m.group(2)]
    return float(m.group(1)) * factor
