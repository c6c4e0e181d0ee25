"""A run's open-loop trials as stored (trial_open_loop): the rate each offered, how well
its engine kept the schedule, and its latency histogram, with the trial's version, point,
repetition and validity. Every value is checked as it is read (results/stored_values.py):
a crafted database is refused in one line, never a traceback."""

from __future__ import annotations

from regtrack.results import stored_values
from regtrack.results.records import StoredOpenLoop
from regtrack.results.store import Store
from regtrack.results.stored_trials import record

_JOINED = {
    "target": "targets.label",
    "point": "trials.point",
    "repetition": "trials.repetition",
    "valid": "trials.valid",
}


def open_loop(store: Store, run_id: int) -> list[StoredOpenLoop]:
    """Every open-loop trial of a run, in the order they were measured."""
    rows = store.conn.execute(
        "SELECT o.*, g.label AS target, t.point, t.repetition, t.valid"
        " FROM trial_open_loop o JOIN trials t ON t.id = o.trial_id"
        " JOIN targets g ON g.id = t.target_id WHERE t.run_id = ? ORDER BY t.seq",
        (run_id,),
    ).fetchall()
    out = []
    for row in rows:
        item = stored_values.row(store.path, "trial_open_loop", row, _JOINED)
        item["valid"] = bool(item["valid"])
        out.append(record(store.path, "trial_open_loop", StoredOpenLoop, item))
    return out
