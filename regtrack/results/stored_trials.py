"""A run's trials, function costs and command rows as the store hands them on: one typed,
immutable record per row, built here and nowhere else from a row results/stored_values.py
has checked, so analysis reads named fields, not the keys of a database row.

The records are NamedTuples, not frozen dataclasses: a run holds thousands of trials, and a
frozen dataclass's __init__ of a trial's 45 fields costs half again what reading the row
does. Their fields declare the frames analysis reads them in (results/trial_frame.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from regtrack.core import cycles
from regtrack.core.records import CacheSimFacts, LifecycleFacts, TrialReason
from regtrack.results import stored_values


class StoredTrial(NamedTuple):
    """One stored trial: its row of the trials table, in the table's column order, then its
    version's label (``target``), its invalid reasons, in the order they were found, and
    the two lifecycle engine counts metrics read (None: not a lifecycle trial, or one
    stored before they were; all of the counts: lifecycle() below), and what the cache
    and branch simulation counted (grouped: cache_sim() below has every event)."""

    id: int
    run_id: int
    target_id: int
    seq: int
    repetition: int
    workload: str
    point: str
    params: Mapping[str, Any]  # the point's settings; ``pipeline`` checked as an integer
    started_at: str
    wall_s: float | None
    warmup_s: float | None
    requests: int | None
    ops_per_sec: float | None
    lat_avg_ms: float | None
    lat_min_ms: float | None
    lat_p50_ms: float | None
    lat_p95_ms: float | None
    lat_p99_ms: float | None
    lat_p999_ms: float | None
    lat_max_ms: float | None
    client_cpu_pct: float | None
    server_cpu_pct: float | None
    steal_pct: float | None
    contention_pct: float | None
    keyspace_hits: int | None
    keyspace_misses: int | None
    error_replies: int | None
    server_calls: int | None
    exit_code: int | None
    valid: bool
    argv: tuple[str, ...] | None
    raw_output: str | None
    server_stats: Mapping[str, Any] | None
    mode: str  # throughput | instructions
    syscalls_read: int | None
    syscalls_write: int | None
    instructions: int | None
    instructions_per_op: float | None
    instructions_repeat_pct: float | None
    seed: str | None  # the server's /dev/urandom seed; None: its own
    host: str | None  # the host a merged shard's trial ran on; None: not merged
    target: str  # the label of the version it measured
    reasons: tuple[TrialReason, ...]
    enqueue_per_sec: float | None  # tasks its producers enqueued per second
    round_trips_per_task: float | None  # the engine's steps written per task completed
    # --metric cycles (trial_cache_sim): estimated cycles, L1 misses (instruction and data),
    # last-level misses and mispredicted branches of its windows; None: not simulated
    cycles: int | None
    l1_misses: int | None
    ll_misses: int | None
    branch_misses: int | None
    # every syscall by name over the window (trial_syscalls); None: counted by /proc/io
    syscalls_by_name: Mapping[str, int] | None = None

    @property
    def point_order(self) -> int:
        """The point's sort key: its pipeline depth."""
        return point_order(self.params)


class StoredCost(NamedTuple):
    """One function's instruction cost in one valid instruction trial, with the trial's
    point, workload, server calls (never 0) and version; under the simulation its
    exclusive cycles and misses too (None: not simulated)."""

    trial_id: int
    function: str
    exclusive: int
    inclusive: int
    cycles: int | None
    l1_misses: int | None
    ll_misses: int | None
    branch_misses: int | None
    point: str
    workload: str
    server_calls: int
    target: str
    point_order: int


class StoredCommand(NamedTuple):
    """One command's figures in one trial: the server's (calls, usec, failed calls: INFO
    commandstats deltas) or the load generator's (calls, ops/s, latencies), with the trial's
    cell, validity and mode."""

    trial_id: int
    source: str  # server | loadgen
    command: str
    calls: float | None
    usec: float | None
    failed_calls: float | None
    ops_per_sec: float | None
    p50_ms: float | None
    p99_ms: float | None
    workload: str
    point: str
    valid: bool
    mode: str
    repetition: int
    target: str
    point_order: int


def point_order(params: Mapping[str, Any]) -> int:
    """A point's sort key from its settings (stored_values checks ``pipeline`` is an int)."""
    return params.get("pipeline", 0)


def trials(conn: sqlite3.Connection, db: Path, run_id: int) -> list[StoredTrial]:
    """Every trial of a run, in the order it was planned."""
    reasons = trial_reasons(conn, run_id)
    tasks = lifecycle(conn, db, run_id)
    calls = syscalls(conn, run_id)
    simulated = cache_sim(conn, db, run_id)
    rows = conn.execute(
        "SELECT t.*, g.label AS target, g.run_id AS target_run FROM trials t"
        " JOIN targets g ON g.id = t.target_id WHERE t.run_id = ? ORDER BY t.seq",
        (run_id,),
    ).fetchall()
    out = []
    for row in rows:
        item = stored_values.row(db, "trials", row, _VERSION)
        if item.pop("target_run") != run_id:
            why = f"its version {item['target']!r} is not one of run {run_id}'s"
            raise stored_values.refused(db, "trials", item, why)
        item["valid"] = bool(item["valid"])
        if item.get("argv") is not None:
            item["argv"] = tuple(item["argv"])
        item["reasons"] = reasons.get(item["id"], ())
        facts = tasks.get(item["id"])
        item["enqueue_per_sec"] = facts.enqueue_per_sec if facts else None
        item["round_trips_per_task"] = facts.round_trips_per_task if facts else None
        item["syscalls_by_name"] = calls.get(item["id"])
        events = simulated.get(item["id"])
        grouped = cycles.grouped(_named(events)) if events else None
        item["cycles"] = events.cycles if events else None
        item["l1_misses"] = grouped.l1_misses if grouped else None
        item["ll_misses"] = grouped.ll_misses if grouped else None
        item["branch_misses"] = grouped.branch_misses if grouped else None
        out.append(record(db, "trials", StoredTrial, item))
    return out


def lifecycle(conn: sqlite3.Connection, db: Path, run_id: int) -> dict[int, LifecycleFacts]:
    """The lifecycle engine's counts by trial id (trial_lifecycle); a trial without a row
    has none."""
    return _by_trial(conn, db, run_id, "trial_lifecycle", LifecycleFacts)


def syscalls(conn: sqlite3.Connection, run_id: int) -> dict[int, dict[str, int]]:
    """Each trial's syscalls by name (trial_syscalls); a row that is not a name and a
    count is left out, never passed on."""
    out: dict[int, dict[str, int]] = {}
    for trial_id, name, calls in conn.execute(
        "SELECT s.trial_id, s.name, s.calls FROM trial_syscalls s"
        " JOIN trials t ON t.id = s.trial_id WHERE t.run_id = ? ORDER BY s.trial_id, s.name",
        (run_id,),
    ):
        if isinstance(name, str) and type(calls) is int and calls >= 0:
            out.setdefault(trial_id, {})[name] = calls
    return out


def cache_sim(conn: sqlite3.Connection, db: Path, run_id: int) -> dict[int, CacheSimFacts]:
    """What the cache and branch simulation counted, by trial id (trial_cache_sim); a trial
    without a row was not simulated."""
    return _by_trial(conn, db, run_id, "trial_cache_sim", CacheSimFacts)


def _by_trial(
    conn: sqlite3.Connection, db: Path, run_id: int, table: str, kind: Callable[..., Fact]
) -> dict[int, Fact]:
    """One record per trial of a run from a table keyed by trial_id (a constant name of
    ours), each value checked as it is read."""
    rows = conn.execute(
        f"SELECT x.* FROM {table} x JOIN trials t ON t.id = x.trial_id WHERE t.run_id = ?",
        (run_id,),
    ).fetchall()
    out = {}
    for row in rows:
        item = stored_values.row(db, table, row)
        trial_id = item.pop("trial_id")
        out[trial_id] = kind(**item)
    return out


def _named(facts: CacheSimFacts) -> dict[str, int]:
    """A trial's simulated events under callgrind's names (Ir, I1mr, ...)."""
    return {name: getattr(facts, name.lower()) for name in cycles.EVENTS}


def trial_reasons(conn: sqlite3.Connection, run_id: int) -> dict[int, tuple[TrialReason, ...]]:
    """Invalid reasons by trial id, in the order they were found."""
    out: dict[int, tuple[TrialReason, ...]] = {}
    for trial_id, code, detail in conn.execute(
        "SELECT r.trial_id, r.code, r.detail FROM trial_reasons r"
        " JOIN trials t ON t.id = r.trial_id WHERE t.run_id = ?"
        " ORDER BY r.trial_id, r.position",
        (run_id,),
    ):
        out[trial_id] = (*out.get(trial_id, ()), TrialReason.stored(code, detail))
    return out


def function_costs(conn: sqlite3.Connection, db: Path, run_id: int) -> list[StoredCost]:
    """Per-function costs of the valid instruction trials of a run, with their context."""
    rows = conn.execute(
        "SELECT f.trial_id, f.function, f.exclusive, f.inclusive, f.cycles, f.l1_misses,"
        " f.ll_misses, f.branch_misses, t.point, t.workload,"
        " t.server_calls, t.params, g.label AS target"
        " FROM function_costs f JOIN trials t ON t.id = f.trial_id"
        " JOIN targets g ON g.id = t.target_id"
        " WHERE t.run_id = ? AND t.valid = 1 AND t.server_calls > 0",
        (run_id,),
    ).fetchall()
    return [
        record(db, "function_costs", StoredCost, _with_point_order(db, "function_costs", row))
        for row in rows
    ]


def command_stats(conn: sqlite3.Connection, db: Path, run_id: int) -> list[StoredCommand]:
    """Per-command rows of every trial of a run (server deltas and load generator)."""
    rows = conn.execute(
        "SELECT c.*, t.workload, t.point, t.params, t.valid, t.mode, t.repetition,"
        " g.label AS target FROM command_stats c JOIN trials t ON t.id = c.trial_id"
        " JOIN targets g ON g.id = t.target_id WHERE t.run_id = ? ORDER BY t.seq",
        (run_id,),
    ).fetchall()
    out = []
    for row in rows:
        item = _with_point_order(db, "command_stats", row)
        item["valid"] = bool(item["valid"])
        out.append(record(db, "command_stats", StoredCommand, item))
    return out


Fact = TypeVar("Fact")  # a per-trial record of a table keyed by trial_id
Row = TypeVar("Row", bound=tuple)  # a NamedTuple record of a table's rows


def record(db: Path, table: str, kind: type[Row], item: dict[str, Any]) -> Row:
    """The record of a checked row; a row without one of its fields, or with a column no
    field reads, is refused in one line."""
    try:
        return kind(**item)
    except TypeError:
        missing = [name for name in kind._fields if name not in item]
        extra = [name for name in item if name not in kind._fields]
        if not (missing or extra):
            raise
        why = f"lacks {missing[0]}" if missing else f"has {extra[0]}, which regtrack never stores"
        raise stored_values.refused(db, table, item, why) from None


# A trial's version: its label and its run.
_VERSION = {"target": "targets.label", "target_run": "targets.run_id"}
# The columns of a trial (and of its version) that function costs and command rows are
# read with.
_OF_TRIAL = {
    name: f"trials.{name}"
    for name in ("point", "workload", "server_calls", "params", "valid", "mode", "repetition")
} | {"target": "targets.label"}


def _with_point_order(db: Path, table: str, row: sqlite3.Row) -> dict[str, Any]:
    """A checked joined row with its trial's params reduced to the point's sort key."""
    item = stored_values.row(db, table, row, _OF_TRIAL)
    item["point_order"] = point_order(item.pop("params"))
    return item
