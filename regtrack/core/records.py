"""Records that cross stages: what a trial sends, what it measured, what a profile holds.

They live below every stage so that the stage producing one and the stage keeping or
reading it never import each other for a data type.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

LATENCY_KEYS = ("avg", "min", "p50", "p95", "p99", "p999", "max")


@dataclass
class TrialRecord:
    """Every figure of one trial, its validity and the evidence behind it."""

    seq: int
    repetition: int
    target_label: str
    workload: str
    point: str
    params: dict[str, Any]
    started_at: str
    mode: str = "throughput"  # or "instructions" (under callgrind)
    wall_s: float | None = None
    warmup_s: float | None = None
    requests: int | None = None
    ops_per_sec: float | None = None
    latency_ms: dict[str, float] = field(default_factory=dict)
    client_cpu_pct: float | None = None
    server_cpu_pct: float | None = None
    steal_pct: float | None = None
    contention_pct: float | None = None
    keyspace_hits: int | None = None
    keyspace_misses: int | None = None
    error_replies: int | None = None
    server_calls: int | None = None
    syscalls_read: int | None = None
    syscalls_write: int | None = None
    instructions: int | None = None
    instructions_per_op: float | None = None
    instructions_repeat_pct: float | None = None  # two windows in one server, apart by
    seed: str | None = None  # the server's /dev/urandom seed (regtrack.bench.seeds), None: its own
    exit_code: int | None = None
    valid: bool = False
    invalid_reason: str | None = None
    argv: list[str] = field(default_factory=list)
    raw_output: str = ""
    server_stats: dict[str, Any] = field(default_factory=dict)
    per_command: dict[str, dict[str, float]] = field(default_factory=dict)  # load generator rows

    def mark_invalid(self, reason: str) -> None:
        """Add a reason; reasons are joined with "; ", so a reason must not contain one."""
        self.valid = False
        self.invalid_reason = (
            reason if not self.invalid_reason else f"{self.invalid_reason}; {reason}"
        )


@dataclass(frozen=True)
class MixCommand:
    """One command of a mix as the load generator sends it.

    ``args`` may hold the placeholders ``__key__`` (inside an argument, a number drawn by
    ``key_pattern``) and ``__data__`` (a whole argument: the payload). ``ratio`` is how
    many times in a row the command is sent before the rotation moves on.
    """

    args: tuple[str, ...]
    ratio: int = 1
    key_pattern: str = "R"  # R random, P parallel (lockstep), S sequential, G gaussian


@dataclass(frozen=True)
class LoadSpec:
    """What one load generator process sends: GETs of populated keys, or a command mix."""

    clients: int
    threads: int
    pipeline: int
    data_size: int
    key_min: int
    key_max: int
    key_prefix: str = ""
    commands: tuple[MixCommand, ...] = ()  # empty: GET-only sweep of [key_min, key_max]

    @property
    def is_mix(self) -> bool:
        return bool(self.commands)


@dataclass
class FunctionCost:
    """Instructions a function executed itself (exclusive) and with its callees (inclusive)."""

    function: str
    file: str
    object: str
    exclusive: int = 0
    inclusive: int = 0

    @property
    def key(self) -> str:
        """The symbol name alone, as perf reports it: the file callgrind attributes a
        function to moves between versions with inlining (jemalloc.c vs tsd.h), the
        symbol does not."""
        return self.function


@dataclass
class Progress:
    """Callbacks the presentation layer hooks into; the runner never prints."""

    started: Callable[[int], None] = lambda total: None
    phase: Callable[[str], None] = lambda text: None
    trial_done: Callable[[TrialRecord], None] = lambda record: None
    note: Callable[[str], None] = lambda text: None
