"""Records that cross stages: what a trial sends, what it measured, what a profile holds.

They live below every stage so that the stage producing one and the stage keeping or
reading it never import each other for a data type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

LATENCY_KEYS = ("avg", "min", "p50", "p95", "p99", "p999", "max")


class InvalidReason(StrEnum):
    """Why a trial cannot be trusted, as a code consumers decide on (the stored value).

    The free-text detail beside it (TrialReason) is for people; no code reads it.
    """

    CLIENT_BOUND = "client-bound"
    NOT_SERVER_BOUND = "not-server-bound"
    CONTENDED = "contended"
    SERVER_DIED = "server-died"
    SERVER_REFUSED = "server-refused"
    SERVER_LOST = "server-lost"
    LOADGEN_FAILED = "loadgen-failed"
    WARMUP_FAILED = "warmup-failed"
    GET_MISSES = "get-misses"
    ERROR_REPLIES = "error-replies"
    CALLS_SHORT = "calls-short"
    RATIOS_OFF = "ratios-off"
    BACKGROUND_SAVE = "background-save"
    BUILTIN_DRIVER = "builtin-driver"
    WINDOWS_FAILED = "windows-failed"
    NOT_REPEATABLE = "not-repeatable"
    NOT_SATURATED = "not-saturated"
    # Ctrl-C during a paired point: its complete window groups are kept, not compared, and
    # --resume measures the point again, replacing them (results/store.py add_trial).
    INTERRUPTED = "interrupted"
    # An open-loop trial whose engine could not send at its intended times: its latencies
    # would be the engine's delay, not the server's.
    BEHIND_SCHEDULE = "behind-schedule"
    # --rtt: the delay proxy forwarded late (its CPU was short): the round trip was not
    # the one asked for.
    DELAY_BEHIND = "delay-behind"
    OTHER = "other"  # text stored before the codes existed that no code matches

    @property
    def label(self) -> str:
        """What people read before the detail (the words reasons began with before codes)."""
        return _LABELS[self]


_LABELS = {
    InvalidReason.CLIENT_BOUND: "client-bound",
    InvalidReason.NOT_SERVER_BOUND: "not server-bound",
    InvalidReason.CONTENDED: "contended",
    InvalidReason.SERVER_DIED: "server died",
    InvalidReason.SERVER_REFUSED: "server refused the trial",
    InvalidReason.SERVER_LOST: "lost the server during the trial",
    InvalidReason.LOADGEN_FAILED: "load generator failed",
    InvalidReason.WARMUP_FAILED: "warm-up failed",
    InvalidReason.GET_MISSES: "GET misses",
    InvalidReason.ERROR_REPLIES: "error replies",
    InvalidReason.CALLS_SHORT: "calls short",
    InvalidReason.RATIOS_OFF: "command ratios off",
    InvalidReason.BACKGROUND_SAVE: "background save",
    InvalidReason.BUILTIN_DRIVER: "built-in driver",
    InvalidReason.WINDOWS_FAILED: "paired windows failed",
    InvalidReason.NOT_REPEATABLE: "not repeatable",
    InvalidReason.NOT_SATURATED: "server not saturated",
    InvalidReason.INTERRUPTED: "interrupted",
    InvalidReason.BEHIND_SCHEDULE: "behind its schedule",
    InvalidReason.DELAY_BEHIND: "delay not held",
    InvalidReason.OTHER: "other",
}


@dataclass(frozen=True)
class TrialReason:
    """One reason a trial is invalid: its code, and the figures or message behind it."""

    code: InvalidReason
    detail: str = ""

    @property
    def text(self) -> str:
        """The reason as people read it: "label: detail" (an OTHER reason is its detail)."""
        if self.code is InvalidReason.OTHER:
            return self.detail or self.code.label
        return f"{self.code.label}: {self.detail}" if self.detail else self.code.label

    @classmethod
    def stored(cls, code: object, detail: object) -> TrialReason:
        """A reason as read back from a database, which may be hostile or from a newer
        regtrack: an unknown code becomes OTHER with the code kept in its detail."""
        name, words = stored_text(code), stored_text(detail)
        try:
            return cls(InvalidReason(name), words)
        except ValueError:
            return cls(InvalidReason.OTHER, f"{name}: {words}" if words else name)


def stored_text(value: object) -> str:
    """Any value a database column may hold, as text (a crafted file may hold anything)."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def reasons_text(reasons: tuple[TrialReason, ...]) -> str:
    """Several reasons on one line, as output shows them."""
    return "; ".join(r.text for r in reasons)


@dataclass(frozen=True)
class CommandCounts:
    """One command's INFO commandstats over a trial."""

    calls: float
    usec: float
    failed_calls: float
    rejected_calls: float


@dataclass(frozen=True)
class ServerDelta:
    """What the server itself counted during a trial (INFO deltas), the check on what a load
    generator claims; kept with the trial as its server_stats (to_json)."""

    wall_s: float
    server_cpu_s: float
    background_persistence: float  # saves and rewrites that ran, or were running
    server_cpu_pct: float | None
    keyspace_hits: float
    keyspace_misses: float
    error_replies: float
    commands: Mapping[str, CommandCounts]  # by commandstats name
    errors: Mapping[str, float]  # error replies by errorstats name

    def calls(self, command: str) -> float:
        """How many times the server ran ``command`` (its commandstats name)."""
        counts = self.commands.get(command)
        return counts.calls if counts else 0.0

    @property
    def total_calls(self) -> float:
        return sum(c.calls for c in self.commands.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "wall_s": self.wall_s,
            "server_cpu_s": self.server_cpu_s,
            "background_persistence": self.background_persistence,
            "server_cpu_pct": self.server_cpu_pct,
            "keyspace_hits": self.keyspace_hits,
            "keyspace_misses": self.keyspace_misses,
            "error_replies": self.error_replies,
            "commands": {
                name: {
                    "calls": c.calls,
                    "usec": c.usec,
                    "failed_calls": c.failed_calls,
                    "rejected_calls": c.rejected_calls,
                }
                for name, c in self.commands.items()
            },
            "errors": dict(self.errors),
        }


@dataclass(frozen=True)
class OpenLoopFacts:
    """What an open-loop trial offered and how well its engine kept the schedule, with its
    latency histogram (HDR, V2 deflate, base64; values in ``hdr_unit``) to export."""

    offered_rate: float
    arrival: str
    lag_p99_us: float
    lag_max_us: float
    engine_busy_pct: float
    hdr_unit: str
    hdr: str


@dataclass(frozen=True)
class LifecycleFacts:
    """What a task lifecycle's engine counted that a trial's own fields do not hold: the
    tasks its window enqueued and completed (``not_done``: left undone after the drain),
    the producers' rate, per task the commands and round trips the engine wrote (a
    pipelined step is one round trip of several commands), its dequeues that found no task
    and the task ids it found that were not its own (``foreign_tasks``); engine/README.md,
    the lifecycle mode's output. Stored in trial_lifecycle, its columns these fields."""

    enqueued: int
    completed: int
    not_done: int
    enqueue_per_sec: float
    commands_per_task: float
    round_trips_per_task: float
    empty_dequeues: int
    foreign_tasks: int


@dataclass(frozen=True)
class CacheSimFacts:
    """What callgrind's cache and branch simulation counted in an instruction trial's two
    windows (--metric cycles): every event's total, the estimated cycles of them at the
    run's weights (core/cycles.py) and the simulated caches as the dumps described them.
    Stored in trial_cache_sim, its columns these fields."""

    ir: int
    dr: int
    dw: int
    i1mr: int
    d1mr: int
    d1mw: int
    ilmr: int
    dlmr: int
    dlmw: int
    bc: int
    bcm: int
    bi: int
    bim: int
    cycles: int
    geometry: str


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
    # Every syscall by name over the measured window (bench/kernel_calls.py); None where
    # the kernel's tracepoints could not be counted (then syscalls_read/_write alone).
    syscalls_by_name: dict[str, int] | None = None
    instructions: int | None = None
    instructions_per_op: float | None = None
    instructions_repeat_pct: float | None = None  # how far apart one server's two windows are
    seed: str | None = None  # the server's /dev/urandom seed (regtrack.bench.seeds), None: its own
    exit_code: int | None = None
    valid: bool = False
    reasons: tuple[TrialReason, ...] = ()
    argv: list[str] = field(default_factory=list)
    raw_output: str = ""
    server_stats: dict[str, Any] = field(default_factory=dict)
    per_command: dict[str, dict[str, float]] = field(default_factory=dict)  # load generator rows
    open_loop: OpenLoopFacts | None = None  # a latency trial's offered load and histogram
    lifecycle: LifecycleFacts | None = None  # a lifecycle trial's engine counts
    cache_sim: CacheSimFacts | None = None  # --metric cycles: the simulated events

    def mark_invalid(self, code: InvalidReason, detail: str = "") -> None:
        """Add a reason: the code for whoever decides, the detail for whoever reads."""
        self.valid = False
        self.reasons = (*self.reasons, TrialReason(code, detail))

    def has_reason(self, code: InvalidReason) -> bool:
        return any(r.code is code for r in self.reasons)

    @property
    def reason_text(self) -> str:
        return reasons_text(self.reasons)


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
    # Every event's counts by name, under callgrind's cache and branch simulation
    # (--metric cycles; empty: instructions alone were counted).
    exclusive_events: dict[str, int] = field(default_factory=dict)
    inclusive_events: dict[str, int] = field(default_factory=dict)
    cycles: int | None = None  # exclusive, at the run's weights (core/cycles.py)

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


@dataclass(frozen=True)
class CommandReading:
    """What one server ran over a window: calls and their microseconds per command
    (commandstats names: ``get``, ``xgroup|create``), and its CPU (user + system); a live
    server's and a replay's, compared by analysis/capture_check.py."""

    seconds: float
    calls: dict[str, int]
    usec: dict[str, float]
    cpu_s: float
    version: str = "unknown"

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    def share(self, command: str) -> float:
        return self.calls.get(command, 0) / self.total if self.total else 0.0

    def us_per_call(self, command: str) -> float | None:
        calls = self.calls.get(command, 0)
        return self.usec.get(command, 0.0) / calls if calls else None
