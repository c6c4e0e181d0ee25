"""The ``lifecycle`` workload kind: a task queue as its library runs it (docs/workloads.md).

Producers enqueue each task in steps (a step is the commands one round trip writes, e.g.
MULTI ... EXEC); consumers send one dequeue command (blocking, or a poll) and carry the
task they got, its id and its stream entry id, into the steps that follow (ack, result,
registries). The open-loop engine runs it (engine/README.md, "lifecycle mode"); this
model checks the file first, with one line per mistake, and writes the engine's document.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from regtrack.core import limits
from regtrack.workloads import commands

# What the engine fills in (engine/src/lifecycle_spec.rs): the task's id, its payload,
# the handle the dequeue reply gave, times, fresh random ids, the consumer's index, and a
# script's SHA1 as SCRIPT LOAD returned it; ${hex:99de}, bytes no text carries; and
# ${fill:17,128,950}, filler of one of those sizes drawn per command.
PLACEHOLDERS = ("task", "payload", "id", "now", "now_ms", "rand", "consumer")
PLACEHOLDER_RE = re.compile(r"\$\{([^}]*)\}")
HEX_RE = re.compile(r"^hex:(?:[0-9A-Fa-f]{2})+$")
# ${fill:17,128,950}: filler of one of these sizes (bytes), drawn per command by the engine
FILL_RE = re.compile(r"^fill:\d{1,10}(?:,\d{1,10})*$")
FILL_SIZES = 64  # sizes in one ${fill:...} at most (engine/src/template.rs)
# The payload holds the task id (32 hex digits) and a little JSON around it.
MIN_PAYLOAD = 64
MAX_QUEUED = 1_000_000
MAX_STEPS = 64
MAX_EMPTY_WAIT_MS = 10_000
MAX_WORK_US = 60_000_000
_SCRIPT_NAME = r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$"
VERSION_RE = r"^\d+(\.\d+){0,2}$"
ServerValue = str | int | float | bool
Args = Annotated[list[str], Field(min_length=1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Step(_Strict):
    """Commands written together in one round trip (the library pipelines them or sends a
    transaction); the next step waits for every reply of this one."""

    commands: Annotated[list[Args], Field(min_length=1, max_length=MAX_STEPS)]


class Dequeue(_Strict):
    """The consumer's one command per fetch: a blocking pop, or a poll (a script) that may
    find nothing, after which the consumer waits ``empty_wait_ms`` and asks again."""

    command: Args
    empty_wait_ms: Annotated[int, Field(ge=0, le=MAX_EMPTY_WAIT_MS)] = 0


class SetupCommand(_Strict):
    """A command run once through redis-py before measuring (a consumer group, say)."""

    command: Args


Steps = Annotated[list[Step], Field(max_length=MAX_STEPS)]


class LifecycleWorkload(_Strict):
    """A task queue's lifecycle: who sends what per task, and what carries over."""

    name: str
    kind: Literal["lifecycle"]
    description: str = ""
    follows: str = Field(min_length=1)  # the library and the version this file follows
    approximations: str = ""  # what is still not what the library does
    min_redis: str = Field(default="2.8", pattern=VERSION_RE)
    data_size: Annotated[int, Field(ge=MIN_PAYLOAD, le=int(limits.DATA_SIZE.high))] = 512
    producers: limits.CLIENTS.of(int) = 4
    consumers: limits.CLIENTS.of(int) = 8
    # Capacity runs keep at most this many tasks enqueued and not yet done (bounded state).
    max_queued: Annotated[int, Field(ge=1, le=MAX_QUEUED)] = 1000
    # The task's own work: a consumer holds each task this long (no CPU) before its process
    # steps, as a worker runs the task's function. 0: the queue's overhead alone.
    work_us: Annotated[int, Field(ge=0, le=MAX_WORK_US)] = 0
    extra_commands: list[str] = Field(default_factory=list)
    scripts: dict[Annotated[str, Field(pattern=_SCRIPT_NAME)], str] = Field(default_factory=dict)
    setup: list[SetupCommand] = Field(default_factory=list)
    enqueue: Annotated[list[Step], Field(min_length=1, max_length=MAX_STEPS)]
    dequeue: Dequeue
    # Nothing after the pop (Sidekiq's BasicFetch): a task is done when dequeued.
    process: Steps = Field(default_factory=list)
    batch: Steps = Field(default_factory=list)
    server: dict[str, ServerValue] = Field(default_factory=dict)  # as GetPipelineWorkload's

    @model_validator(mode="after")
    def _commands(self) -> LifecycleWorkload:
        connections = self.producers + self.consumers
        if connections > limits.CONNECTIONS:
            raise ValueError(
                f"{connections} connections (producers + consumers): give at most "
                f"{limits.CONNECTIONS}, Redis's default maxclients"
            )
        for where, args in self.located_args():
            commands.check(where, args, self.extra_commands, self.min_redis)
            if commands.blocks(args) and not where.startswith("dequeue"):
                raise ValueError(
                    f"{where}: {commands.name(args)} blocks; only the dequeue command may "
                    "wait for data (a blocked step would stall its connection's lifecycle)"
                )
            self._placeholders(where, args)
        sent = [a for _, args in self._located(self.enqueue, "enqueue") for a in args]
        if not any("${task}" in a or "${payload}" in a for a in sent):
            raise ValueError(
                "enqueue: no command sends ${task} or ${payload}, so no consumer can tell "
                "which task it got; put the task id or its payload in the queue"
            )
        return self

    def _placeholders(self, where: str, args: list[str]) -> None:
        for arg in args:
            for name in PLACEHOLDER_RE.findall(arg):
                script = name.removeprefix("sha:")
                if name.startswith("hex:"):
                    if not HEX_RE.match(name):
                        raise ValueError(
                            f"{where}: ${{{name[:40]}}}: give bytes as pairs of hex digits, "
                            "e.g. ${hex:99de}"
                        )
                elif name.startswith("fill:"):
                    self._fill(where, name)
                elif name.startswith("sha:"):
                    if script not in self.scripts:
                        raise ValueError(
                            f"{where}: ${{{name}}} names no script; add it to [scripts] "
                            f"(known: {', '.join(sorted(self.scripts)) or 'none'})"
                        )
                elif name not in PLACEHOLDERS:
                    raise ValueError(
                        f"{where}: ${{{name}}} is not a placeholder; use one of "
                        f"{', '.join('${' + p + '}' for p in PLACEHOLDERS)}, ${{sha:NAME}}, "
                        "${hex:BYTES} or ${fill:SIZES}"
                    )
                elif where.startswith(("setup", "enqueue")) and name in ("id", "consumer"):
                    raise ValueError(
                        f"{where}: ${{{name}}} is what a consumer got; a producer or the "
                        "setup has none (use ${task})"
                    )
                elif where.startswith("setup") and name != "now":
                    raise ValueError(
                        f"{where}: ${{{name}}} belongs to a task; the setup runs before any"
                    )

    @staticmethod
    def _fill(where: str, name: str) -> None:
        shown = name[:40] + ("..." if len(name) > 40 else "")
        sizes = name.removeprefix("fill:").split(",") if FILL_RE.match(name) else []
        if not sizes or any(int(n) > limits.DATA_SIZE.high for n in sizes):
            raise ValueError(
                f"{where}: ${{{shown}}}: give sizes in bytes (at most "
                f"{int(limits.DATA_SIZE.high)}) separated by commas, e.g. ${{fill:17,128,950}}"
            )
        if len(sizes) > FILL_SIZES:
            raise ValueError(
                f"{where}: ${{{shown}}}: {len(sizes)} sizes; give at most {FILL_SIZES}"
            )
        if where.startswith("setup"):
            raise ValueError(f"{where}: ${{fill:...}} is drawn per task; the setup runs before any")

    @staticmethod
    def _located(steps: list[Step], part: str) -> list[tuple[str, list[str]]]:
        return [
            (f"{part}[{s}].commands[{c}]", args)
            for s, step in enumerate(steps)
            for c, args in enumerate(step.commands)
        ]

    def located_args(self) -> list[tuple[str, list[str]]]:
        """Every command of the file with where it is written, in lifecycle order."""
        return [
            *((f"setup[{i}]", s.command) for i, s in enumerate(self.setup)),
            *self._located(self.enqueue, "enqueue"),
            ("dequeue.command", self.dequeue.command),
            *self._located(self.process, "process"),
            *self._located(self.batch, "batch"),
        ]

    # What the stages that sweep keys and pipelines read of every workload: a lifecycle's
    # connections, its bound on queued tasks, one request at a time per connection.
    @property
    def clients(self) -> int:
        return self.producers + self.consumers

    @property
    def threads(self) -> int:
        return 1

    @property
    def keys(self) -> int:
        return self.max_queued

    @property
    def pipelines(self) -> list[int]:
        return [1]

    def engine_document(self) -> dict[str, Any]:
        """The engine's lifecycle file (engine/README.md): what each role sends."""

        def steps(part: list[Step]) -> list[list[list[str]]]:
            return [[list(c) for c in step.commands] for step in part]

        return {
            "lifecycle": {
                "data_size": self.data_size,
                "producers": self.producers,
                "consumers": self.consumers,
                "max_queued": self.max_queued,
                "work_us": self.work_us,
                "scripts": dict(self.scripts),
                "enqueue": steps(self.enqueue),
                "dequeue": {
                    "command": list(self.dequeue.command),
                    "empty_wait_ms": self.dequeue.empty_wait_ms,
                },
                "process": steps(self.process),
                "batch": steps(self.batch),
            }
        }

    def setup_commands(self) -> list[list[str]]:
        return [list(s.command) for s in self.setup]
