"""Every row the store hands on, checked against what regtrack stores in it: a value of
another type or shape (a crafted or damaged database) is one line of bad input here,
never a traceback deeper in, nor a wrong kind of number reaching a verdict.

A column holds the type regtrack's schema declares for it (INTEGER, REAL, TEXT and NOT
NULL, read from the schema its migrations create: results/schema_objects.py), a number is
finite, a measure is within what can be measured, a flag is 0 or 1, and a JSON column is
JSON of the shape its readers rely on (the models below: what they read, with its type;
what else a document holds is kept, unread).
"""

from __future__ import annotations

import functools
import json
import math
import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pydantic

from regtrack.core import limits
from regtrack.core.errors import BadInput
from regtrack.core.settings import one_line
from regtrack.results.schema_objects import REMEDY, columns


class _Read(pydantic.BaseModel, strict=True, extra="allow"):
    """A stored document: the fields its readers rely on, with their types."""


class _Settings(_Read):
    repetitions: int | None = None
    seed_offset: int | None = None


class _Workload(_Read):
    name: str | None = None
    server: dict[str, Any] | None = None


class _Comparison(_Read):
    baseline: str | None = None
    forced: list[str] | None = None


class _Build(_Read):
    compiler: str | None = None
    flags: list[str] | None = None
    environment: dict[str, Any] | None = None


class _Docker(_Read):
    image: str | None = None


class _Details(_Read):
    """A version's details (targets.details, and each of a run's config targets)."""

    subject: str | None = None
    commit_date: str | None = None
    server_config: dict[str, str] | None = None
    build: _Build | None = None
    docker: _Docker | None = None


class _ConfigTarget(_Read):
    label: str | None = None
    details: _Details | None = None


class _Config(_Read):
    """A run's config as StoredRun and its comparability key read it. Tables read with
    ``config.get(name, {})`` may be absent, not null."""

    settings: _Settings = _Settings()
    workload: _Workload = _Workload()
    cpus: dict[str, Any] = {}
    metric: str | None = None
    points: list[str] | None = None
    runtime: str | None = None
    seeds: str | None = None
    comparison: _Comparison | None = None
    bisection: dict[str, Any] | None = None
    design: str | None = None
    rounds: list[int] | None = None
    server_data: dict[str, Any] | None = None
    targets: list[_ConfigTarget] | None = None


class _Params(_Read):
    pipeline: int = 0  # the point's sort key


Document = dict[str, Any]
# Each JSON column, and the shape of what it holds.
JSON_SHAPES: dict[str, Any] = {
    "runs.command": list[str],
    "runs.config": _Config,
    "runs.environment": Document,
    "runs.loadgen": Document,
    "runs.comparability": Document,
    "targets.server_info": Document,
    "targets.details": _Details,
    "trials.params": _Params,
    "trials.argv": list[str],
    "trials.server_stats": Document,
}
# INTEGER columns that are flags.
FLAGS = ("trials.valid",)
# What a trial, a command row or a function cost measured: counts, rates, times, shares,
# never negative, and below MEASURED_MAX (a billion operations a second for eleven days).
# Analysis takes ratios and logs of them: a crafted 1e300 overflows where no measure can.
MEASURES = frozenset(
    [f"trials.{c}" for c in (
        "wall_s", "warmup_s", "requests", "ops_per_sec", "lat_avg_ms", "lat_min_ms",
        "lat_p50_ms", "lat_p95_ms", "lat_p99_ms", "lat_p999_ms", "lat_max_ms",
        "client_cpu_pct", "server_cpu_pct", "steal_pct", "contention_pct", "keyspace_hits",
        "keyspace_misses", "error_replies", "server_calls", "syscalls_read", "syscalls_write",
        "instructions", "instructions_per_op", "instructions_repeat_pct",
    )]
    + [f"command_stats.{c}" for c in (
        "calls", "usec", "failed_calls", "ops_per_sec", "p50_ms", "p99_ms",
    )]
    + [f"function_costs.{c}" for c in (
        "exclusive", "inclusive", "cycles", "l1_misses", "ll_misses", "branch_misses",
    )]
    + [f"trial_cache_sim.{c}" for c in (
        "ir", "dr", "dw", "i1mr", "d1mr", "d1mw", "ilmr", "dlmr", "dlmw", "bc", "bcm", "bi",
        "bim", "cycles",
    )]
    + [f"trial_open_loop.{c}" for c in (
        "offered_rate", "lag_p99_us", "lag_max_us", "engine_busy_pct",
    )]
    + [f"trial_lifecycle.{c}" for c in (
        "enqueued", "completed", "not_done", "enqueue_per_sec", "commands_per_task",
        "round_trips_per_task", "empty_dequeues", "foreign_tasks",
    )]
)  # fmt: skip
MEASURED_MAX = 1e15


class _Wrong(Exception):
    """Why a value is not what its column holds (the row is named by the caller)."""


Check = Callable[[Any], Any]  # a stored value -> the value read (JSON decoded), or _Wrong


def row(
    db: Path,
    table: str,
    stored: sqlite3.Row | Mapping[str, Any],
    joined: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A row of ``table`` as a dict, every value checked and each JSON column decoded;
    ``joined`` names the source ("table.column") of a column another table gave the
    query, or "" for one the query computed. BadInput names the first value that is
    not what regtrack stores."""
    item = dict(stored)
    for name, check in _checks(table, tuple(item), tuple((joined or {}).items())):
        try:
            item[name] = check(item[name])
        except _Wrong as exc:
            raise refused(db, table, item, f"{name} {exc}") from None
    return item


def refused(db: Path, table: str, item: Mapping[str, Any], why: str) -> BadInput:
    """The one line a row that is not what regtrack stores is refused with."""
    return BadInput(f"database {db}: {table} row {_which(item)}: {why}; {REMEDY}")


@functools.cache
def _checks(
    table: str, names: tuple[str, ...], joined: tuple[tuple[str, str], ...]
) -> list[tuple[str, Check]]:
    """Each column of a query's rows with its check, made once per query (a run's
    trials are thousands of rows)."""
    sources = dict(joined)
    out = []
    for name in names:
        source = sources.get(name, f"{table}.{name}")
        if source:
            out.append((name, _check(source)))
    return out


def _check(source: str) -> Check:
    table, column = source.split(".", 1)
    declared, required = columns(table).get(column, ("", False))
    kind = _flag if source in FLAGS else _KINDS.get(declared, _any)
    measure = source in MEASURES
    shape = JSON_SHAPES.get(source)

    def check(value: Any) -> Any:
        if value is None:
            if required:
                raise _Wrong("is NULL")
            return None
        kind(value)
        if measure and not 0 <= value <= MEASURED_MAX:
            raise _Wrong(f"is {_shown(value)}, not a measure (0 to {MEASURED_MAX:g})")
        return value if shape is None else _document(value, shape)

    return check


def _flag(value: Any) -> None:
    if type(value) is not int or value not in (0, 1):
        raise _Wrong(f"is {_shown(value)}, not 0 or 1")


def _integer(value: Any) -> None:
    if type(value) is not int:
        raise _Wrong(f"is {_shown(value)}, not an integer")


def _real(value: Any) -> None:
    if type(value) is int or (type(value) is float and math.isfinite(value)):
        return
    raise _Wrong(f"is {_shown(value)}, not a number")


def _text(value: Any) -> None:
    if type(value) is not str:
        raise _Wrong(f"is {_shown(value)}, not text")


def _any(value: Any) -> None:
    """A column the schema declares no type for (none of regtrack's)."""


_KINDS = {"INTEGER": _integer, "REAL": _real, "TEXT": _text}


def _document(text: str, shape: Any) -> Any:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise _Wrong("is not JSON") from None
    if shape is Document or _is_model(shape):
        if not isinstance(value, dict):
            raise _Wrong("is not a JSON object")
    elif not isinstance(value, list):
        raise _Wrong("is not a JSON list")
    try:
        _adapter(shape).validate_python(value)
    except pydantic.ValidationError as exc:
        raise _Wrong(f"is not what regtrack stores ({one_line(exc)})") from None
    return value


@functools.cache
def _adapter(shape: Any) -> pydantic.TypeAdapter:
    config = None if _is_model(shape) else pydantic.ConfigDict(strict=True)
    return pydantic.TypeAdapter(shape, config=config)


def _is_model(shape: Any) -> bool:
    return isinstance(shape, type) and issubclass(shape, pydantic.BaseModel)


def _which(item: Mapping[str, Any]) -> str:
    """The row as a message names it: its id, else its trial's or run's, else its name."""
    for key, how in (("id", "{}"), ("trial_id", "of trial {}"), ("run_id", "of run {}")):
        if type(item.get(key)) is int:
            return how.format(item[key])
    return _shown(item.get("name", "?"))


def _shown(value: Any) -> str:
    """A stored value as a message quotes it: short, escaped, one line."""
    return f"a blob of {len(value)} bytes" if isinstance(value, bytes) else limits.shown(value)
