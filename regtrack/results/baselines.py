"""Named baselines: a version of a complete run that later candidates are compared with
(`regtrack baseline save NAME`, `ci --baseline-name NAME`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from regtrack.core.errors import BadInput
from regtrack.results import comparability, stored_values
from regtrack.results.store import Store, now


def save(store: Store, name: str, run_id: int, label: str) -> None:
    """Name a version of a run as a baseline; an existing name is moved to it."""
    run = store.run(run_id)
    labels = [t["label"] for t in store.targets(run_id)]
    if label not in labels:
        raise BadInput(
            f"{label!r} is not a version of run {run_id}: its versions are {', '.join(labels)}"
        )
    if run.status != "complete":
        raise BadInput(f"run {run_id} is {run.status}: only a complete run can be a baseline")
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO baselines (name, run_id, label, created_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT(name) DO UPDATE SET run_id = excluded.run_id,"
            " label = excluded.label, created_at = excluded.created_at",
            (name, run_id, label, now()),
        )


@dataclass(frozen=True)
class Baseline:
    """A saved baseline: which version of which run, and when it was saved."""

    name: str
    run_id: int
    label: str
    created_at: str


@dataclass(frozen=True)
class Listed(Baseline):
    """A saved baseline as `baseline list` shows it: with its run's machine fingerprint,
    when the run was made and its setup (the comparability digest `ci` checks)."""

    fingerprint: str | None
    run_created_at: str
    setup: str

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def named(store: Store, name: str) -> Baseline:
    row = store.conn.execute(
        "SELECT name, run_id, label, created_at FROM baselines WHERE name = ?", (name,)
    ).fetchone()
    if row is None:
        known = [r[0] for r in store.conn.execute("SELECT name FROM baselines ORDER BY name")]
        raise BadInput(
            f"no baseline named {name!r} in {store.path}; known: {', '.join(known) or 'none'}"
            " (regtrack baseline save NAME --run ID)"
        )
    return Baseline(**stored_values.row(store.path, "baselines", row))


def listed(store: Store) -> list[Listed]:
    rows = store.conn.execute(
        "SELECT b.name, b.run_id, b.label, b.created_at, r.fingerprint,"
        " r.created_at AS run_created_at FROM baselines b"
        " JOIN runs r ON r.id = b.run_id ORDER BY b.name"
    ).fetchall()
    joined = {"fingerprint": "runs.fingerprint", "run_created_at": "runs.created_at"}
    listed = [stored_values.row(store.path, "baselines", r, joined) for r in rows]
    return [
        Listed(**r, setup=comparability.digest(comparability.of_run(store.run(r["run_id"]))))
        for r in listed
    ]
