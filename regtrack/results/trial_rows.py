"""A trial record as the rows the store inserts: its trials row, its command stats, and
the facts only some trials have (open-loop schedule, lifecycle engine counts).

JSON_COLUMNS hold structures; the store encodes them (Store.add_trial), and a merge checks
that a shard's hold JSON (results/shard_union.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

from regtrack.core import cycles
from regtrack.core.records import LATENCY_KEYS, FunctionCost, TrialRecord

JSON_COLUMNS = ("params", "argv", "server_stats")


def trial(run_id: int, target_id: int, t: TrialRecord) -> dict[str, Any]:
    """A trial's columns in the trials table (JSON_COLUMNS still to be encoded)."""
    return {
        "run_id": run_id,
        "target_id": target_id,
        "seq": t.seq,
        "repetition": t.repetition,
        "workload": t.workload,
        "point": t.point,
        "params": t.params,
        "started_at": t.started_at,
        "wall_s": t.wall_s,
        "warmup_s": t.warmup_s,
        "requests": t.requests,
        "ops_per_sec": t.ops_per_sec,
        **{f"lat_{k}_ms": t.latency_ms.get(k) for k in LATENCY_KEYS},
        "client_cpu_pct": t.client_cpu_pct,
        "server_cpu_pct": t.server_cpu_pct,
        "steal_pct": t.steal_pct,
        "contention_pct": t.contention_pct,
        "keyspace_hits": t.keyspace_hits,
        "keyspace_misses": t.keyspace_misses,
        "error_replies": t.error_replies,
        "server_calls": t.server_calls,
        "mode": t.mode,
        "syscalls_read": t.syscalls_read,
        "syscalls_write": t.syscalls_write,
        "instructions": t.instructions,
        "instructions_per_op": t.instructions_per_op,
        "instructions_repeat_pct": t.instructions_repeat_pct,
        "seed": t.seed,
        "exit_code": t.exit_code,
        "valid": int(t.valid),
        "argv": t.argv,
        "raw_output": t.raw_output,
        "server_stats": t.server_stats,
    }


def simulated(f: FunctionCost) -> tuple[int | None, ...]:
    """A function's exclusive cycles and misses (L1, LL, mispredicted branches) under the
    cache and branch simulation; four NULLs without it."""
    if f.cycles is None:
        return (None, None, None, None)
    events = cycles.grouped(f.exclusive_events)
    return (f.cycles, events.l1_misses, events.ll_misses, events.branch_misses)


def commands(trial_id: int, t: TrialRecord) -> list[tuple]:
    rows = [
        (trial_id, "server", name, c.get("calls"), c.get("usec"), c.get("failed_calls"),
         None, None, None)
        for name, c in t.server_stats.get("commands", {}).items()
    ]  # fmt: skip
    rows += [
        (trial_id, "loadgen", name, c.get("count"), None, None, c.get("ops_per_sec"),
         c.get("p50"), c.get("p99"))
        for name, c in t.per_command.items()
    ]  # fmt: skip
    return rows


def syscalls(trial_id: int, t: TrialRecord) -> list[tuple[int, str, int]]:
    """The trial's rows of trial_syscalls: each syscall the server made, by name."""
    return [(trial_id, name, calls) for name, calls in (t.syscalls_by_name or {}).items()]


def facts(trial_id: int, t: TrialRecord) -> list[tuple[str, dict[str, Any]]]:
    """The trial's rows of the tables of facts only some trials have (table, columns with
    their values): trial_open_loop, trial_lifecycle and trial_cache_sim, whose columns are
    the fields of OpenLoopFacts, LifecycleFacts and CacheSimFacts."""
    found = (
        ("trial_open_loop", t.open_loop), ("trial_lifecycle", t.lifecycle),
        ("trial_cache_sim", t.cache_sim),
    )  # fmt: skip
    return [
        (table, {"trial_id": trial_id, **dataclasses.asdict(record)})
        for table, record in found
        if record is not None
    ]
