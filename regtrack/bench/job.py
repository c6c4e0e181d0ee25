"""The Job: everything one run needs, decided before the first server starts (how
options become one: bench/prepare.py), and the purpose a run is measured for."""

from __future__ import annotations

import dataclasses
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from regtrack.bench import loadgen, loadgen_choice, seeds, shards, trial
from regtrack.bench.callgrind import control
from regtrack.bench.loadgen import held, memtier
from regtrack.bench.loadgen.base import LoadgenBinary
from regtrack.bench.loadgen_choice import Choice
from regtrack.bench.plan import MODES_BY_METRIC, Visit, interleave, trial_count
from regtrack.core import filesystems
from regtrack.core.cpus import CpuPlan, parse_cpu_list, split_sides
from regtrack.core.errors import BadInput
from regtrack.core.settings import RunSettings, settings_source
from regtrack.targets.versions import Target
from regtrack.workloads import model, points, server_config
from regtrack.workloads.model import Workload
from regtrack.workloads.points import Point


@dataclass(frozen=True)
class RunPurpose:
    """Why a run is measured, recorded with it beside its Job's plan (which says what is
    measured): the commands that measure decide it, the Job never changes for it."""

    # "fixed": the planned repetitions, looked at once; "sequential": blocks are added
    # while a gate is undecided, so intervals must stay valid under repeated looks.
    design: str = "fixed"
    # The baseline label and thresholds the command printed its verdicts with, so the
    # report and a later `compare` show the same verdicts (analysis.comparison.comparison_settings).
    comparison: Mapping[str, Any] = field(default_factory=dict)
    # The bisection this run measures for (regtrack bisect): its id and the run's role.
    bisection: Mapping[str, Any] | None = None

    def as_config(self) -> dict[str, Any]:
        return {
            "design": self.design,
            "comparison": dict(self.comparison),
            "bisection": dict(self.bisection) if self.bisection is not None else None,
        }


@dataclass(frozen=True)
class Skipped:
    """A version of a range A..B that did not build: left out, never fatal to the range."""

    label: str
    commit: str
    subject: str | None
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Job:
    """Everything one run needs, decided before the first server starts; never changed
    afterwards (a grown plan or a decided load generator is a new Job)."""

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
    points: list[Point] = field(init=False)
    # Modes still measured in later repetitions, once a sequential gate decided a metric:
    # the plan as it grows while it runs (extended), recorded with the run (update_config).
    narrowed: dict[int, tuple[str, ...]] = field(default_factory=dict)
    # Why the servers' hash seeds are not regtrack's (None: they are; regtrack.bench.seeds).
    seed_problem: str | None = field(init=False)
    skipped: tuple[Skipped, ...] = ()  # versions of a range that did not build
    # This host's share of a plan measured by several (--shard K/N, or an engine's
    # variables; regtrack.bench.shards); None: the whole plan.
    shard: shards.Shard | None = None
    # Where servers keep their files (AOF, RDB): a directory per server below it (for
    # containers only when they persist; files_dir()).
    data_dir: str | None = None
    # Which load generator and why (bench/loadgen_choice.py); None until a GET sweep's
    # probe has decided between memtier and redis-benchmark (settled).
    loadgen_choice: Choice | None = None
    # The settings file the run was planned with ("built-in": regtrack's own), kept as
    # planned when a resumed or grown run stores its config again.
    settings_file: str = field(default_factory=settings_source)

    def __post_init__(self) -> None:
        if self.metric != "throughput" and self.runtime == "native":
            control.require()
        if self.settings.seeds == "random":
            problem: str | None = 'random seeds were asked for (seeds = "random")'
        elif self.runtime == "native":
            problem = seeds.native_problem()
        else:
            problem = None
        # Derived from the fields above, once: frozen, so set as dataclasses do themselves.
        object.__setattr__(self, "points", points.points(self.workload))
        object.__setattr__(self, "seed_problem", problem)

    def seed(self, repetition: int) -> str | None:
        """The seed every server of ``repetition`` starts with, or None (Redis's own)."""
        if self.seed_problem:
            return None
        return seeds.for_repetition(repetition, self.settings.seed_offset or 0)

    def settled(self) -> Job:
        """This job with a GET sweep's load generator decided (a probe, or the answer kept
        for this machine and setup), on memtier when it saturates; a job is not changed
        once built, so a decision is a new job."""
        if self.loadgen_choice is not None:
            return self
        choice = loadgen_choice.decide(self)
        if choice.tool != "memtier":
            return dataclasses.replace(self, loadgen_choice=choice)
        return dataclasses.replace(
            self,
            loadgen_choice=choice,
            loadgen=loadgen.locate("memtier"),
            workload=points.with_loadgen_threads(self.workload, "memtier", self.load_cpus),
        )

    @property
    def context(self) -> trial.Context:
        return trial.Context(
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

    def extended(self, repetitions: int, modes: tuple[str, ...]) -> Job:
        """The plan grown to ``repetitions``, the new ones measuring only ``modes``."""
        narrowed = dict(self.narrowed)
        if set(modes) != set(MODES_BY_METRIC[self.metric]):
            narrowed.update({rep: modes for rep in range(self.settings.repetitions, repetitions)})
        settings = self.settings.model_copy(update={"repetitions": repetitions})
        return dataclasses.replace(self, settings=settings, narrowed=narrowed)

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
            "settings_file": self.settings_file,
            "workload": self.workload.model_dump(),
            "cpus": self.cpus.as_dict(),
            "targets": [t.as_dict() for t in self.targets],
            "points": [p.label for p in self.points],
            "narrowed": {str(rep): list(modes) for rep, modes in self.narrowed.items()},
            "planned_trials": trial_count(self.planned()),
            "callgrind_hz": control.CALLGRIND_HZ if self.metric != "throughput" else None,
            "seeds": f"not controlled: {self.seed_problem}" if self.seed_problem else "fixed",
            "loadgen_choice": self.loadgen_choice.as_dict() if self.loadgen_choice else None,
            "throughput_method": self.throughput_method,
            "skipped": [s.as_dict() for s in self.skipped],
            "shard": None
            if self.shard is None
            else {"index": self.shard.index, "count": self.shard.count, "from": self.shard.source},
        }
        config["plan_id"] = shards.plan_id(config)
        return config

    @classmethod
    def from_config(cls, config: Mapping[str, Any], tool: Mapping[str, Any], docker: Any) -> Job:
        """The job a run stored (``config()``, its load generator ``tool``), as it was: a
        resumed or grown run measures what the first attempt planned, never today's
        defaults. ``docker``: the engine, for a run in containers."""
        workload = model.stored(config["workload"])
        # A run stored before throughput could be paired in time measured separate trials,
        # and one stored before seed offsets read the seeds of offset 0.
        settings = RunSettings(
            **{"pairing": "separate", **config["settings"], "seed_offset": seeds.offset_of(config)}
        )
        runtime = config.get("runtime", "native")
        data = config.get("server_data") or {}
        binary = LoadgenBinary(**tool)
        return cls(
            targets=[Target(**t) for t in config["targets"]],
            workload=workload,
            settings=settings,
            cpus=CpuPlan(
                parse_cpu_list(config["cpus"]["server_cpus"]),
                parse_cpu_list(config["cpus"]["client_cpus"]),
            ),
            loadgen=binary,
            metric=config.get("metric", "throughput"),
            runtime=runtime,
            memory=config.get("memory"),
            docker=docker,
            docker_images=config.get("docker_images"),
            narrowed={int(r): tuple(m) for r, m in config.get("narrowed", {}).items()},
            skipped=tuple(Skipped(**s) for s in config.get("skipped") or ()),
            shard=shards.stored(config.get("shard")),
            data_dir=data.get("dir") if runtime == "native" or data.get("persistent") else None,
            loadgen_choice=_stored_choice(config.get("loadgen_choice"), binary.name),
            settings_file=config.get("settings_file") or "not recorded",
        )


def _stored_choice(stored: Any, tool: str) -> Choice:
    """The run's own load generator, as it was chosen: a resumed run never probes again.
    A choice names tools as --loadgen does (memtier), the binary by its own name."""
    if isinstance(stored, dict):
        named = memtier.NAME if stored.get("tool") == "memtier" else stored.get("tool")
        if named == tool:
            why = str(stored.get("why") or "")
            return Choice(str(stored["tool"]), why, stored.get("probe"), stored.get("cached"))
    return Choice(tool, "the run's own")


DURATION_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(s|m|h|min)?\s*$")


def parse_duration(text: str, option: str) -> float:
    """ "600", "600s", "10m", "1h" -> seconds; anything else is one clear line."""
    m = DURATION_RE.match(text or "")
    if not m or float(m.group(1)) <= 0:
        raise BadInput(f"{option} {text!r}: give a time like 600s, 10m or 1h")
    factor = {"s": 1, None: 1, "m": 60, "min": 60, "h": 3600}[m.group(2)]
    return float(m.group(1)) * factor
