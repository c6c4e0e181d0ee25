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
from regtrack.results.records import HistoryPoint
from regtrack.results.store import Store


def trial_marks(store: Store) -> dict[int, tuple[int, int]]:
    """Per run: (number of trials, newest trial id), the part of the key trials decide."""
    rows = store.conn.execute(
        "SELECT run_id, COUNT(*), MAX(id) FROM trials GROUP BY run_id"
    ).fetchall()
    return {r[0]: (r[1], r[2]) for r in rows}


_POINTS = pydantic.TypeAdapter(list[HistoryPoint])


def load(store: Store) -> dict[int, tuple[str, Any, list[HistoryPoint]]]:
    """run id -> (key, summary, history points) as last stored; a row whose points are not
    of the shape the report keeps (an older regtrack's, a crafted file's) is left out, and
    its run derived again. The caller checks the shape of the summary it reuses."""
    rows = store.conn.execute("SELECT run_id, key, summary, history FROM run_analysis")
    out = {}
    for run_id, key, summary, history in rows.fetchall():
        try:
            points = _POINTS.validate_json(history)
            out[run_id] = (key, json.loads(summary), points)
        except (TypeError, ValueError, RecursionError):  # ValidationError is a ValueError
            continue
    return out


def save(
    store: Store, run_id: int, key: str, summary: dict[str, Any], history: list[HistoryPoint]
) -> None:
    """Keep a run's derived data; a database that cannot be written is simply not cached."""
    points = json.dumps([point.to_json() for point in history])
    try:
        with store.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO run_analysis (run_id, key, summary, history)"
                " VALUES (?, ?, ?, ?)",
                (run_id, key, json.dumps(summary), points),
            )
    except (RegtrackError, sqlite3.Error):
        pass
