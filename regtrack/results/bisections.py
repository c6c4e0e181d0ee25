"""Bisections as the store keeps them: what was asked, the log of every step, the answer.

Each step's measurements are ordinary runs (runs.config["bisection"] names the bisection),
so compare, explain and the reports read them like any other; this table holds the search
itself, so `regtrack bisect --resume` continues where an interrupted one stopped.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic

from regtrack.core.errors import BadInput
from regtrack.core.settings import one_line
from regtrack.results import stored_values
from regtrack.results.bisection_plan import BisectionPlan
from regtrack.results.records import StoredBisection
from regtrack.results.store import Store, config_field, now

FINISHED = ("done", "refused")


def create(store: Store, plan: BisectionPlan) -> int:
    with store.transaction() as conn:
        cursor = conn.execute(
            "INSERT INTO bisections (created_at, status, config) VALUES (?, 'running', ?)",
            (now(), json.dumps(plan.to_json())),
        )
    return int(cursor.lastrowid or 0)


def log_step(store: Store, bisection_id: int, entry: dict[str, Any]) -> None:
    """Append one step (a commit measured, skipped, or judged) to the bisection's log."""
    with store.transaction() as conn:
        row = conn.execute("SELECT log FROM bisections WHERE id = ?", (bisection_id,)).fetchone()
        log = [*json.loads(row[0]), entry]
        conn.execute("UPDATE bisections SET log = ? WHERE id = ?", (json.dumps(log), bisection_id))


def finish(
    store: Store, bisection_id: int, status: str, result: dict[str, Any] | None = None
) -> None:
    with store.transaction() as conn:
        conn.execute(
            "UPDATE bisections SET status = ?, result = ? WHERE id = ?",
            (status, json.dumps(result) if result is not None else None, bisection_id),
        )


def get(store: Store, bisection_id: int) -> StoredBisection:
    row = store.conn.execute(
        "SELECT id, created_at, status, config, log, result FROM bisections WHERE id = ?",
        (bisection_id,),
    ).fetchone()
    if row is None:
        raise BadInput(f"no bisection {bisection_id} in {store.path} (regtrack bisect --list)")
    return _record(store, row)


def all_of(store: Store) -> list[StoredBisection]:
    rows = store.conn.execute(
        "SELECT id, created_at, status, config, log, result FROM bisections ORDER BY id"
    ).fetchall()
    return [_record(store, r) for r in rows]


def latest_unfinished(store: Store) -> int:
    """The newest bisection that did not finish, for a bare ``--resume``."""
    marks = ", ".join("?" * len(FINISHED))
    row = store.conn.execute(
        f"SELECT id FROM bisections WHERE status NOT IN ({marks}) ORDER BY id DESC LIMIT 1",
        FINISHED,
    ).fetchone()
    if row is None:
        raise BadInput(f"no unfinished bisection in {store.path}: nothing to resume")
    return int(row[0])


def runs(store: Store, bisection_id: int) -> list[int]:
    """The runs that measured for a bisection (ends, steps, confirmations), in order."""
    rows = store.conn.execute(
        f"SELECT id FROM runs WHERE {config_field('$.bisection.id')} = ? ORDER BY id",
        (bisection_id,),
    ).fetchall()
    return [r[0] for r in rows]


class _Columns(pydantic.BaseModel, strict=True):
    """A stored bisection's log and answer columns (their entries: analysis.bisect_records)."""

    log: list[dict[str, Any]]
    result: dict[str, Any] | None


def _record(store: Store, stored: Any) -> StoredBisection:
    """A stored bisection, its shape checked: a database edited by hand is one line."""
    row = stored_values.row(store.path, "bisections", stored)
    try:
        config, log, result = (json.loads(row[k]) if row[k] else None for k in _JSON)
        _Columns.model_validate({"log": log, "result": result})
        plan = BisectionPlan.from_json(config)
    except (ValueError, RecursionError) as exc:  # pydantic's ValidationError is a ValueError
        why = one_line(exc) if isinstance(exc, pydantic.ValidationError) else "not JSON"
        raise BadInput(
            f"bisection {row['id']} in {store.path} is not what regtrack stores ({why}): "
            "was the database edited? Start a new bisection"
        ) from None
    return StoredBisection(
        id=row["id"],
        created_at=row["created_at"],
        status=row["status"],
        config=plan,
        log=tuple(log),
        result=result,
        runs=tuple(runs(store, row["id"])),
    )


_JSON = ("config", "log", "result")
