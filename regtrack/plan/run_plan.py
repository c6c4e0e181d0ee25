"""The run's plan: one frozen, typed record of what a run measures, how and why.

bench/job.py makes it (Job.plan) and rebuilds a Job from it (Job.from_plan: a resumed,
grown or merged run measures what was planned, never today's defaults); the store keeps
it as the run's config (``to_json``), and StoredRun, the comparability key, shard plans
and merges, resume and bisection read it back (``from_json``), never the JSON. A fact a
run made by an older regtrack did not record keeps the default it had then.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Self

from pydantic import ValidationError

from regtrack.core.cpus import CpuPlan, parse_cpu_list
from regtrack.core.errors import BadInput
from regtrack.core.settings import RunSettings
from regtrack.plan.latency_plan import MODE as LATENCY_MODE
from regtrack.plan.latency_plan import LatencyPlan
from regtrack.plan.records import (
    LoadgenChoice,
    Merged,
    RunPurpose,
    ServerData,
    Shard,
    Skipped,
)
from regtrack.targets.target import Target
from regtrack.workloads import model
from regtrack.workloads.model import Workload


class UnreadablePlan(BadInput):
    """A stored config that is not a plan any regtrack wrote (its reader names the run)."""


@dataclass(frozen=True)
class RunPlan:
    """What one run measures (its versions at its workload's points, with its settings,
    CPUs and tools), how its plan grew, and why it was measured (``purpose``)."""

    targets: tuple[Target, ...]
    workload: Workload
    settings: RunSettings
    cpus: CpuPlan | None  # None: a crafted or damaged plan that recorded none
    metric: str = "throughput"  # throughput | instructions | both | cycles
    runtime: str = "native"  # native | docker
    memory: str | None = None  # a container's memory limit
    server_data: ServerData | None = None  # None: stored before it was recorded
    docker_images: str | None = None  # --runtime docker: official | build
    settings_file: str = "not recorded"
    points: tuple[str, ...] = ()  # the workload's points, as labels
    # Modes later repetitions measure, once a sequential gate decided a metric.
    narrowed: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    planned_trials: int | None = None
    callgrind_hz: int | None = None
    seeds: str | None = None  # "fixed" or "not controlled: why"; None before it was stored
    loadgen_choice: LoadgenChoice | None = None
    # "paired in time", "duet", "separate trials"; None: instructions only. Runs from
    # before the paired mode measured separate trials.
    throughput_method: str | None = "separate trials"
    skipped: tuple[Skipped, ...] = ()
    shard: Shard | None = None
    plan_id: str = ""
    purpose: RunPurpose = field(default_factory=RunPurpose)
    merged: Merged | None = None  # a run merged from shards
    latency: LatencyPlan | None = None  # open-loop latency trials (--rate, --load)
    # --metric cycles: the caches callgrind simulated (core/cycles.geometry_text); None: no
    # simulation, or stored before it existed
    cache_geometry: str | None = None

    @property
    def seed_offset(self) -> int:
        """Where the run's seeds start (bench/seeds.py; 0 for runs made before offsets)."""
        return self.settings.seed_offset or 0

    @property
    def modes(self) -> tuple[str, ...]:
        """The trial kinds each repetition measures, in order (bench/plan.interleave)."""
        modes = {
            "throughput": ("throughput",), "instructions": ("instructions",),
            "cycles": ("instructions",),
        }.get(self.metric, ("throughput", "instructions"))  # fmt: skip
        return (*modes, LATENCY_MODE) if self.latency else modes

    @property
    def counted(self) -> bool:
        """Whether the run counted instructions."""
        return self.metric != "throughput"

    @property
    def simulated(self) -> bool:
        """Whether its instructions were counted under the cache and branch simulation."""
        return self.metric == "cycles"

    def identity(self) -> str:
        """The identity of a resolved plan: what is measured, not where (shards of one
        plan share it: bench/shards.py). Versions, points, workload, metric, runtime and
        settings; host facts (CPU numbers, paths of cached builds) are left out."""
        settings = self.settings.model_dump()
        settings.pop("database", None)
        if settings.get("rtt_us") is None:  # no --rtt: ids of runs before it stay theirs
            settings.pop("rtt_us", None)
        if not self.simulated:  # weights weigh nothing: ids of other runs stay theirs
            for name in ("cycle_weight_l1", "cycle_weight_ll", "cycle_weight_branch"):
                settings.pop(name, None)
        facts = {
            "metric": self.metric,
            "runtime": self.runtime,
            "memory": self.memory,
            "settings": settings,
            "workload": self.workload.model_dump(),
            "points": list(self.points),
            "targets": [
                {
                    "label": t.label,
                    "spec": t.spec,
                    "commit": t.commit,
                    "binary_sha256": t.binary_sha256 if t.kind == "bin" else None,
                    "build_flags": list(t.build.flags)
                    if t.build is not None and t.build.flags is not None
                    else None,
                }
                for t in self.targets
            ],
        }
        if self.latency is not None:  # absent before open-loop trials: old ids stay theirs
            facts["latency"] = self.latency.identity()
        text = json.dumps(facts, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def identified(self) -> RunPlan:
        """This plan with its ``plan_id``."""
        return replace(self, plan_id=self.identity())

    def to_json(self) -> dict[str, Any]:
        """The run's config, as the store keeps it."""
        data: dict[str, Any] = {
            "metric": self.metric,
            "runtime": self.runtime,
            "memory": self.memory,
            "server_data": self.server_data.to_json() if self.server_data else None,
            "docker_images": self.docker_images,
            "settings": self.settings.model_dump(),
            "settings_file": self.settings_file,
            "workload": self.workload.model_dump(),
            "cpus": self.cpus.as_dict() if self.cpus else {},
            "targets": [t.to_json() for t in self.targets],
            "points": list(self.points),
            "narrowed": {str(rep): list(modes) for rep, modes in self.narrowed.items()},
            "planned_trials": self.planned_trials,
            "callgrind_hz": self.callgrind_hz,
            "seeds": self.seeds,
            "loadgen_choice": self.loadgen_choice.to_json() if self.loadgen_choice else None,
            "throughput_method": self.throughput_method,
            "skipped": [s.to_json() for s in self.skipped],
            "shard": self.shard.to_json() if self.shard else None,
            "plan_id": self.plan_id,
            **self.purpose.to_json(),
        }
        if self.merged is not None:
            data.update(self.merged.to_json())
        if self.latency is not None:
            data["latency"] = self.latency.to_json()
        if self.cache_geometry is not None:
            data["cache_geometry"] = self.cache_geometry
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """A plan as any regtrack stored it; one line (UnreadablePlan) when it is not one."""
        try:
            return cls._read(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise UnreadablePlan(f"{where}: {first['msg']}") from None
        except UnreadablePlan:
            raise
        except BadInput as exc:
            raise UnreadablePlan(str(exc)[:200]) from None
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise UnreadablePlan(f"{type(exc).__name__}: {exc}"[:200]) from None

    @classmethod
    def _read(cls, data: Mapping[str, Any]) -> Self:
        known = RunSettings.model_fields
        stored = {k: v for k, v in (data.get("settings") or {}).items() if k in known}
        # A run stored before throughput could be paired in time measured separate trials.
        settings = RunSettings(**{"pairing": "separate", **stored})
        cpus = data.get("cpus") or {}
        return cls(
            targets=tuple(Target.from_json(t) for t in data.get("targets") or ()),
            workload=model.stored(data["workload"]),
            settings=settings,
            cpus=CpuPlan(parse_cpu_list(cpus["server_cpus"]), parse_cpu_list(cpus["client_cpus"]))
            if cpus.get("server_cpus") and cpus.get("client_cpus")
            else None,
            metric=str(data.get("metric") or "throughput"),
            runtime=str(data.get("runtime") or "native"),
            memory=data.get("memory"),
            server_data=ServerData.from_json(data.get("server_data")),
            docker_images=data.get("docker_images"),
            settings_file=str(data.get("settings_file") or "not recorded"),
            points=tuple(str(p) for p in data.get("points") or ()),
            narrowed={int(r): tuple(m) for r, m in (data.get("narrowed") or {}).items()},
            planned_trials=data.get("planned_trials"),
            callgrind_hz=data.get("callgrind_hz"),
            seeds=data.get("seeds"),
            loadgen_choice=LoadgenChoice.from_json(data.get("loadgen_choice")),
            throughput_method=data.get("throughput_method", "separate trials"),
            skipped=tuple(Skipped.from_json(s) for s in data.get("skipped") or ()),
            shard=Shard.from_json(data.get("shard")),
            plan_id=str(data.get("plan_id") or ""),
            purpose=RunPurpose.from_json(data),
            merged=Merged.from_json(data),
            latency=LatencyPlan.from_json(data.get("latency")),
            cache_geometry=_text_or_none(data.get("cache_geometry")),
        )


def _text_or_none(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise UnreadablePlan(f"cache_geometry: {str(value)[:40]!r} is not text")
    return value
