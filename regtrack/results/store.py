"""The SQLite store and its queries: one file, WAL, one commit per finished trial, which is
what lets an interrupted or failed run keep everything it measured (schema: migrations.py).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pydantic

from regtrack.core import writes
from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.core.records import FunctionCost, InvalidReason, TrialRecord
from regtrack.core.settings import one_line
from regtrack.plan.run_plan import RunPlan, UnreadablePlan
from regtrack.results import (
    comparability,
    connection,
    schema_objects,
    stored_trials,
    stored_values,
    trial_rows,
)
from regtrack.results.migrations import refuse_unusable, schema_version, upgrade
from regtrack.results.run_row import HostFacts, LoadgenFacts, RunRow
from regtrack.results.stored_trials import StoredCommand, StoredCost, StoredTrial
from regtrack.targets.target import Target

BUSY_TIMEOUT_MS = 30_000  # how long a write waits for another writer; $REGTRACK_DB_TIMEOUT_S


def as_json(value: Any) -> str:
    """A stored JSON column: keys sorted, so equal values are equal text."""
    return json.dumps(value, sort_keys=True, default=str)


def config_field(path: str) -> str:
    """SQL for a field of a run's config, NULL where the config is not JSON (a crafted
    file's): json_extract alone stops the whole query at such a row."""
    return f"CASE WHEN json_valid(config) THEN json_extract(config, '{path}') END"


def busy_timeout_ms() -> int:
    try:
        return int(float(os.environ["REGTRACK_DB_TIMEOUT_S"]) * 1000)
    except (KeyError, ValueError):
        return BUSY_TIMEOUT_MS


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Store:
    """The queries of runs, targets, trials, costs and baselines; callers see plain dicts
    and records. The other tables' queries are in their own results modules (bisections,
    merge, analysis_cache): no query lives outside this package."""

    def __init__(self, conn: sqlite3.Connection, path: Path):
        self.conn = conn
        self.path = path
        # A shard's database is copied elsewhere as one file, perhaps after a kill -9 that
        # left no time to close it: with this set, every commit is checkpointed into the
        # .db file at once, so the file alone holds every trial stored (keep_whole()).
        self.whole_file = False

    def keep_whole(self) -> None:
        """Checkpoint the WAL into the .db file now and after every later commit."""
        self.whole_file = True
        self._checkpoint()

    def _checkpoint(self) -> None:
        try:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.OperationalError as exc:
            raise CannotMeasure(self._write_problem(exc)) from None

    @classmethod
    def open(cls, path: str | Path, *, create: bool = True) -> Store:
        db = Path(path)
        writes.database_path(db)  # no link on the way; under CI, not in the checkout
        if not create and not db.is_file():
            raise BadInput(f"database {db} does not exist: run `regtrack run` first or pass --db")
        if create:
            try:
                db.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise BadInput(f"cannot create the directory of {db}: {exc.strerror}") from None
            target = db if db.exists() else db.parent
            if not os.access(target, os.W_OK):
                raise BadInput(
                    f"cannot write the database {db}: {target} is read-only; pass --db with a "
                    "path in a writable directory"
                )
        conn = None
        try:
            conn = connection.connect(db, busy_timeout_ms())
            # One snapshot of the version and the schema: another process may be
            # upgrading the same file meanwhile.
            conn.execute("BEGIN")
            version = schema_version(conn)
            refuse_unusable(db, version, create=create)
            # Before any statement touches its data: a foreign trigger would fire on it.
            schema_objects.require_regtracks(conn, db, version)
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, sqlite3.DatabaseError):
                raise BadInput(f"cannot use database {db}: {exc}") from None
            raise
        store = cls(conn, db)
        upgrade(store, version, create=create)
        return store

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write; a locked database, a full disk or a read-only file become one clear
        error (what was committed before stays committed). Inside another transaction it
        is part of that one, which commits or rolls back the whole (a merge)."""
        if self.conn.in_transaction:
            yield self.conn
            return
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            raise CannotMeasure(self._write_problem(exc)) from None
        if self.whole_file:
            self._checkpoint()

    def _write_problem(self, exc: sqlite3.OperationalError) -> str:
        text = str(exc)
        if "locked" in text or "busy" in text:
            return (
                f"database {self.path} stayed locked by another process for "
                f"{busy_timeout_ms() / 1000:g} s; what was stored before is kept; stop the other "
                "writer (or use another --db) and resume with regtrack run --resume RUN_ID"
            )
        if "full" in text:
            return (
                f"the disk holding {self.path} is full; what was stored before is kept; free "
                "space and resume with regtrack run --resume RUN_ID"
            )
        if "readonly" in text or "read-only" in text:
            return (
                f"database {self.path} has become read-only; what was stored before is kept; "
                "make it writable and resume with regtrack run --resume RUN_ID"
            )
        return f"cannot write database {self.path}: {text}"

    def close(self) -> None:
        self.conn.close()

    # --- writing -------------------------------------------------------------------------

    def create_run(
        self,
        command: list[str],
        plan: RunPlan,
        environment: dict[str, Any],
        loadgen: dict[str, Any],
    ) -> int:
        with self.transaction() as conn:
            cur = conn.execute(
                "INSERT INTO runs (created_at, status, command, config, environment, fingerprint,"
                " loadgen, comparability) VALUES (?, 'running', ?, ?, ?, ?, ?, ?)",
                (
                    now(),
                    as_json(command),
                    as_json(plan.to_json()),
                    as_json(environment),
                    environment.get("fingerprint"),
                    as_json(loadgen),
                    as_json(comparability.key(plan, environment, loadgen)),
                ),
            )
            return int(cur.lastrowid)

    def update_config(self, run_id: int, plan: RunPlan) -> None:
        """The run's plan as it grew (sequential repetitions, merge rounds): what --resume
        rebuilds. Why the run was measured (its purpose) stays as recorded, and so do its
        merge rounds unless ``plan`` brings new ones."""
        stored = self.run(run_id).plan
        kept = replace(plan, purpose=stored.purpose, merged=plan.merged or stored.merged)
        with self.transaction() as conn:
            conn.execute(
                "UPDATE runs SET config = ? WHERE id = ?", (as_json(kept.to_json()), run_id)
            )

    def add_target(
        self, run_id: int, position: int, target: Target, server_info: dict[str, Any]
    ) -> int:
        with self.transaction() as conn:
            cur = conn.execute(
                "INSERT INTO targets (run_id, position, label, spec, kind, binary, binary_sha256,"
                " commit_sha, ref, source_repo, image, redis_version, server_info, details)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    position,
                    target.label,
                    target.spec,
                    target.kind,
                    target.binary,
                    target.binary_sha256,
                    target.commit,
                    target.ref,
                    target.source_repo,
                    target.image,
                    server_info.get("version") or server_info.get("redis_version"),
                    as_json(server_info),
                    as_json(target.details_json()),
                ),
            )
            return int(cur.lastrowid)

    def add_trial(
        self,
        run_id: int,
        target_id: int,
        t: TrialRecord,
        functions: list[FunctionCost] | None = None,
    ) -> int:
        """Store a trial (and its per-function costs) in one transaction; an interrupted
        trial stored for the same planned trial (a paired point cut short) is replaced in
        that transaction: never lost before the whole one is stored."""
        row = trial_rows.trial(run_id, target_id, t)
        row.update({name: as_json(row[name]) for name in trial_rows.JSON_COLUMNS})
        columns = ", ".join(row)
        marks = ", ".join("?" * len(row))
        with self.transaction() as conn:
            conn.execute(
                f"DELETE FROM trials WHERE run_id = ? AND seq = ? AND id IN ({_INTERRUPTED})",
                (run_id, t.seq),
            )
            cur = conn.execute(
                f"INSERT INTO trials ({columns}) VALUES ({marks})", tuple(row.values())
            )
            trial_id = int(cur.lastrowid)
            conn.executemany(
                "INSERT INTO trial_reasons (trial_id, position, code, detail) VALUES (?, ?, ?, ?)",
                [(trial_id, i, r.code.value, r.detail) for i, r in enumerate(t.reasons)],
            )
            conn.executemany(
                "INSERT INTO command_stats (trial_id, source, command, calls, usec,"
                " failed_calls, ops_per_sec, p50_ms, p99_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                trial_rows.commands(trial_id, t),
            )
            conn.executemany(
                "INSERT INTO trial_syscalls (trial_id, name, calls) VALUES (?, ?, ?)",
                trial_rows.syscalls(trial_id, t),
            )
            for table, fact in trial_rows.facts(trial_id, t):
                names, holes = ", ".join(fact), ", ".join("?" * len(fact))
                conn.execute(f"INSERT INTO {table} ({names}) VALUES ({holes})", [*fact.values()])
            conn.executemany(
                "INSERT INTO function_costs (trial_id, function, file, object, exclusive,"
                " inclusive, cycles, l1_misses, ll_misses, branch_misses)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (trial_id, f.key, f.file, f.object, f.exclusive, f.inclusive,
                     *trial_rows.simulated(f))
                    for f in functions or []
                    if f.exclusive or f.inclusive
                ],
            )  # fmt: skip
            return trial_id

    def finish_run(self, run_id: int, status: str, detail: str | None = None) -> None:
        with self.transaction() as conn:
            conn.execute(
                "UPDATE runs SET status = ?, status_detail = ?, finished_at = ? WHERE id = ?",
                (status, detail, now(), run_id),
            )

    # --- reading -------------------------------------------------------------------------

    def runs(self) -> list[RunRow]:
        rows = self.conn.execute(
            "SELECT r.*, (SELECT COUNT(*) FROM trials t WHERE t.run_id = r.id) AS n_trials"
            " FROM runs r ORDER BY r.id DESC"
        ).fetchall()
        return [self._run_row(row) for row in rows]

    def run(self, run_id: int) -> RunRow:
        row = self.conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise BadInput(
                f"run {run_id} is not in {self.path}: `regtrack compare --list` shows runs"
            )
        return self._run_row(row)

    def latest_run_id(self) -> int:
        row = self.conn.execute(
            "SELECT r.id FROM runs r WHERE EXISTS (SELECT 1 FROM trials t WHERE t.run_id = r.id)"
            " ORDER BY r.id DESC LIMIT 1"
        ).fetchone()
        if row is None:
            raise BadInput(f"{self.path} holds no measured run yet: run `regtrack run` first")
        return int(row[0])

    def targets(self, run_id: int) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            "SELECT * FROM targets WHERE run_id = ? ORDER BY position", (run_id,)
        ).fetchall()
        return [stored_values.row(self.path, "targets", row) for row in rows]

    def targets_by_run(self) -> dict[int, list[dict[str, Any]]]:
        """Every run's targets in one read (a report or a bisection step reads all runs)."""
        out: dict[int, list[dict[str, Any]]] = {}
        for row in self.conn.execute("SELECT * FROM targets ORDER BY run_id, position"):
            target = stored_values.row(self.path, "targets", row)
            out.setdefault(target["run_id"], []).append(target)
        return out

    def trial_seqs(self, run_id: int) -> set[int]:
        """Which planned trials of a run are stored (what --resume skips): not those
        stored interrupted, which --resume measures again."""
        rows = self.conn.execute(
            f"SELECT id, seq FROM trials WHERE run_id = ? AND id NOT IN ({_INTERRUPTED})",
            (run_id,),
        )
        return {stored_values.row(self.path, "trials", r)["seq"] for r in rows}

    def repetitions_reached(self, run_id: int) -> int:
        """How many repetitions of a run hold a trial (a merged run's rounds count them)."""
        row = self.conn.execute(
            "SELECT COUNT(DISTINCT repetition) FROM trials WHERE run_id = ?", (run_id,)
        ).fetchone()
        return int(row[0])

    def reopen_run(self, run_id: int) -> None:
        """Mark a run running again (regtrack run --resume)."""
        with self.transaction() as conn:
            conn.execute(
                "UPDATE runs SET status = 'running', status_detail = NULL, finished_at = NULL"
                " WHERE id = ?",
                (run_id,),
            )

    def trials(self, run_id: int) -> list[StoredTrial]:
        """Every trial of a run (results/stored_trials.py)."""
        return stored_trials.trials(self.conn, self.path, run_id)

    def function_costs(self, run_id: int) -> list[StoredCost]:
        """Per-function costs of the valid instruction trials of a run, with their context."""
        return stored_trials.function_costs(self.conn, self.path, run_id)

    def command_stats(self, run_id: int) -> list[StoredCommand]:
        """Per-command rows of every trial of a run (server deltas and load generator)."""
        return stored_trials.command_stats(self.conn, self.path, run_id)

    def _run_row(self, row: sqlite3.Row) -> RunRow:
        """A run's row with its documents read (one line if one is not what regtrack
        stores)."""
        item = stored_values.row(self.path, "runs", row, {"n_trials": ""})
        try:
            plan = RunPlan.from_json(item["config"] or {})
        except UnreadablePlan as exc:
            why = f"its plan cannot be read ({exc})"
            raise stored_values.refused(self.path, "runs", item, why) from None
        try:
            environment = HostFacts.read(item["environment"])
            loadgen = LoadgenFacts.read(item["loadgen"])
        except pydantic.ValidationError as exc:
            why = f"its machine or load generator facts cannot be read ({one_line(exc)})"
            raise stored_values.refused(self.path, "runs", item, why) from None
        return RunRow(
            id=int(item["id"]),
            plan=plan,
            environment=environment,
            loadgen=loadgen,
            created_at=item.get("created_at") or "",
            status=item.get("status") or "",
            status_detail=item.get("status_detail") or "",
            command=tuple(str(a) for a in item.get("command") or ()),
            fingerprint=item.get("fingerprint") or "",
            comparability=item.get("comparability") or None,
            n_trials=int(item.get("n_trials") or 0),
        )


_INTERRUPTED = (
    f"SELECT trial_id FROM trial_reasons WHERE code = '{InvalidReason.INTERRUPTED.value}'"
)
