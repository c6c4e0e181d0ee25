"""The record of one trial, as the runner produces it and the store keeps it."""

from __future__ import annotations

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
    seed: str | None = None  # the server's /dev/urandom seed (regtrack.seeds), None: its own
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
