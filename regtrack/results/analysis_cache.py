"""What the report derived from each run (its index row, its history points), kept with a
key of everything it depends on, so the report after a run re-reads one run, not all.

With hundreds of tracked runs, recomputing every run's comparison after each new run
grows by ~0.08 s per stored run (benchmarks/report_speed.py); a run's derived data only
changes when its trials, its comparison settings or regtrack do, which the key covers.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pydantic

from regtrack.core.errors import RegtrackError
from regtrack.results.store import Store


def trial_marks(store: Store) -> dict[int, tuple[int, int]]:
    """Per run: (number of trials, newest trial id), the part of the key trials decide."""
    rows = store.conn.execute(
        "SELECT run_id, COUNT(*), MAX(id) FROM trials GROUP BY run_id"
    ).fetchall()
    return {r[0]: (r[1], r[2]) for r in rows}


class _Point(pydantic.BaseModel, strict=True, extra="allow"):
    """A history point as the report keeps it (analysis.history.run_points): the fields
    the report sorts, groups and draws points by, with their types."""

    run_id: int
    created_at: str
    fingerprint: str
    comparability: str
    server: str
    series: str
    source_repo: str
    label: str
    commit: str
    subject: str
    commit_date: str
    redis_version: str
    workload: str
    point: str
    point_order: int
    metric: str
    value: pydantic.FiniteFloat
    min: pydantic.FiniteFloat | None
    max: pydantic.FiniteFloat | None
    n_valid: int


_POINTS = pydantic.TypeAdapter(list[_Point])


def load(store: Store) -> dict[int, tuple[str, Any, list[dict[str, Any]]]]:
    """run id -> (key, summary, history rows) as last stored; a row whose points are not
    of the shape the report keeps (an older regtrack's, a crafted file's) is left out, and
    its run derived again. The caller checks the shape of the summary it reuses."""
    rows = store.conn.execute("SELECT run_id, key, summary, history FROM run_analysis")
    out = {}
    for run_id, key, summary, history in rows.fetchall():
        try:
            points = json.loads(history)
            _POINTS.validate_python(points)
            out[run_id] = (key, json.loads(summary), points)
        except (TypeError, ValueError, RecursionError):  # ValidationError is a ValueError
            continue
    return out


def save(
    store: Store, run_id: int, key: str, summary: dict[str, Any], history: list[dict[str, Any]]
) -> None:
    """Keep a run's derived data; a database that cannot be written is simply not cached."""
    try:
        with store.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO run_analysis (run_id, key, summary, history)"
                " VALUES (?, ?, ?, ?)",
                (run_id, key, json.dumps(summary), json.dumps(history)),
            )
    except (RegtrackError, sqlite3.Error):
        pass
