"""The three kinds of workload file, validated field by field (docs/workloads.md).

``get-pipeline``: populate keys, GET them at several pipeline depths.
``mix``: setup steps, then commands with ratios and key patterns, replayed per pipeline
depth by one or more load generator processes (producers and consumers of blocking
commands run as separate processes).
``lifecycle``: a task queue as its library runs it (workloads/lifecycle.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from regtrack.core import limits
from regtrack.workloads import commands
from regtrack.workloads.driver import DriverWorkload
from regtrack.workloads.lifecycle import LifecycleWorkload

# Every number a workload file gives has an upper bound (core/limits.py says why): the
# file may be a pull request's, and populate builds each value in memory.
Keys = limits.KEYS.of(int)
DataSize = limits.DATA_SIZE.of(int)
Clients = limits.CLIENTS.of(int)
Threads = limits.THREADS.of(int)
Depth = limits.PIPELINE.of(int)
Depths = Annotated[list[Depth], Field(max_length=limits.PIPELINE_DEPTHS)]
SAVED_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
VERSION_RE = r"^\d+(\.\d+){0,2}$"
ServerValue = str | int | float | bool


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _pipelines(v: list[int]) -> list[int]:
    if not v:
        raise ValueError("give at least one pipeline depth")
    if len(set(v)) != len(v):
        raise ValueError("pipeline depths repeat")
    return v


def _check_in_flight(connections: int, pipelines: list[int], data_size: int) -> None:
    """Connections within Redis's maxclients, and what they may hold at once (each its
    deepest pipeline of values) within what a host can buffer (core/limits.py)."""
    if connections > limits.CONNECTIONS:
        raise ValueError(
            f"{connections} connections (clients x threads, every process): give at most "
            f"{limits.CONNECTIONS}, Redis's default maxclients"
        )
    in_flight = connections * max(pipelines, default=1) * data_size
    if in_flight > limits.IN_FLIGHT_BYTES:
        raise ValueError(
            f"{connections} connections x pipeline {max(pipelines)} x data_size {data_size} "
            f"is {in_flight / 1024**3:.0f} GiB in flight: give at most "
            f"{limits.IN_FLIGHT_BYTES // 1024**3} GiB (fewer clients, shallower pipelines "
            "or smaller values)"
        )


class GetPipelineWorkload(_Strict):
    """Populate ``keys`` keys of ``data_size`` bytes, then GET them at each pipeline depth."""

    name: str
    kind: Literal["get-pipeline"]
    description: str = ""
    keys: Keys = 100_000
    data_size: DataSize = 1000
    clients: Clients = 50
    threads: Threads = 1
    pipelines: Depths = Field(default_factory=lambda: [1, 5, 10, 15, 20, 25, 30])
    # The [server] table: redis.conf settings for every version (workloads/server_config.py).
    server: dict[str, ServerValue] = Field(default_factory=dict)

    _check_pipelines = field_validator("pipelines")(_pipelines)

    @model_validator(mode="after")
    def _in_flight(self) -> GetPipelineWorkload:
        _check_in_flight(self.clients * self.threads, self.pipelines, self.data_size)
        return self


class Command(_Strict):
    """One command of a mix: its arguments, how many times in a row, how keys are drawn."""

    args: list[str] = Field(min_length=1)
    ratio: limits.RATIO.of(int) = 1
    key_pattern: Literal["R", "P", "S", "G"] = "R"

    @field_validator("args")
    @classmethod
    def _args(cls, v: list[str]) -> list[str]:
        for arg in v:
            if "__data__" in arg and arg != "__data__":
                raise ValueError(
                    f"__data__ must be a whole argument, not part of {arg!r} "
                    "(memtier sends the payload as one argument)"
                )
        return v


class Process(_Strict):
    """One load generator process; several run side by side (producers, consumers)."""

    name: str = "main"
    clients: Clients | None = None
    commands: list[Command] = Field(min_length=1)

    @model_validator(mode="after")
    def _lockstep_everywhere(self) -> Process:
        keyed = {c.key_pattern for c in self.commands if any("__key__" in a for a in c.args)}
        if "P" in keyed and len(keyed) > 1:
            raise ValueError(
                f"process {self.name!r}: lockstep (key_pattern P) needs every command with "
                "__key__ on P (memtier applies P to all commands or none)"
            )
        return self

    @property
    def lockstep(self) -> bool:
        return any(c.key_pattern == "P" for c in self.commands)

    @model_validator(mode="after")
    def _no_stalled_rotation(self) -> Process:
        blocking = [c for c in self.commands if commands.blocks(c.args)]
        if blocking and len(blocking) != len(self.commands):
            raise ValueError(
                f"process {self.name!r} mixes the blocking {commands.name(blocking[0].args)} "
                "with other commands: a blocked connection stalls memtier's rotation, so "
                "put blocking commands in a [[process]] of their own"
            )
        return self


class SetupStep(_Strict):
    """A command run through redis-py before measuring (once, or once per key)."""

    command: list[str] = Field(min_length=1)
    save_as: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    per_key: bool = False  # run it for every key number 1..keys (prefill), __key__ replaced


class MixWorkload(_Strict):
    """A queue's own traffic: setup, then commands replayed at each pipeline depth."""

    name: str
    kind: Literal["mix"]
    description: str = ""
    models: str = ""  # the library and lifecycle this mix follows
    approximations: str = ""  # what memtier cannot express and how the mix works around it
    min_redis: str = Field(default="2.8", pattern=VERSION_RE)
    data_size: DataSize = 128
    keys: Keys = 100_000
    clients: Clients = 50
    threads: Threads = 1
    pipelines: Depths = Field(default_factory=lambda: [1, 10])
    tolerance_pct: Annotated[float, Field(gt=0, le=100)] = 10.0
    extra_commands: list[str] = Field(default_factory=list)
    setup: list[SetupStep] = Field(default_factory=list)
    commands: list[Command] = Field(default_factory=list)
    process: list[Process] = Field(default_factory=list)
    server: dict[str, ServerValue] = Field(default_factory=dict)  # as GetPipelineWorkload's

    _check_pipelines = field_validator("pipelines")(_pipelines)

    @model_validator(mode="after")
    def _shape(self) -> MixWorkload:
        if bool(self.commands) == bool(self.process):
            raise ValueError(
                "give either [[commands]] (one load generator process) or [[process]] "
                "entries with their own commands, not both and not neither"
            )
        if self.commands:
            Process(name="main", commands=self.commands)  # same rotation rule
        connections = sum(p.clients or self.clients for p in self.processes) * self.threads
        _check_in_flight(connections, self.pipelines, self.data_size)
        saved: set[str] = set()
        for where, args in self.located_args():
            commands.check(where, args, self.extra_commands, self.min_redis)
            for ref in SAVED_RE.findall(" ".join(args)):
                if ref not in saved:
                    raise ValueError(
                        f"{where}: ${{{ref}}} is used but no earlier setup step has "
                        f"save_as = {ref!r}"
                    )
            step = self.setup_step(where)
            if step is not None and step.save_as:
                saved.add(step.save_as)
        return self

    def located_args(self) -> list[tuple[str, list[str]]]:
        """Every command of the file with where it is written, setup steps first."""
        out = [(f"setup[{i}]", s.command) for i, s in enumerate(self.setup)]
        if self.commands:
            out += [(f"commands[{i}]", c.args) for i, c in enumerate(self.commands)]
        for p, proc in enumerate(self.process):
            out += [(f"process[{p}].commands[{i}]", c.args) for i, c in enumerate(proc.commands)]
        return out

    def setup_step(self, where: str) -> SetupStep | None:
        m = re.fullmatch(r"setup\[(\d+)\]", where)
        return self.setup[int(m.group(1))] if m else None

    @property
    def processes(self) -> list[Process]:
        return self.process or [Process(name="main", commands=self.commands)]

    @property
    def all_commands(self) -> list[Command]:
        return [c for p in self.processes for c in p.commands]


Workload = GetPipelineWorkload | MixWorkload | LifecycleWorkload | DriverWorkload
# A workload file's ``kind`` -> its model (a driver comes from --driver, never a file).
KINDS: dict[str, type[GetPipelineWorkload] | type[MixWorkload] | type[LifecycleWorkload]] = {
    "get-pipeline": GetPipelineWorkload,
    "mix": MixWorkload,
    "lifecycle": LifecycleWorkload,
}


def stored(data: Mapping[str, Any]) -> Workload:
    """The workload a run stored (``model_dump()``), as it was."""
    if data["kind"] == "driver":
        return DriverWorkload(**data)
    return KINDS[data["kind"]](**data)
