"""The store's schema: its DDL, its version, and the steps that bring an older database to it.

A database records its schema version (PRAGMA user_version); each step adds tables or
columns, or moves stored values into a typed form (v9), in its own transaction, so a
database from an older regtrack upgrades in place and keeps every result.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.results import legacy_reasons

if TYPE_CHECKING:
    from regtrack.results.store import Store


def _reasons_as_codes(conn: sqlite3.Connection) -> None:
    """Schema 9: each trial's reasons become rows of trial_reasons and the text column
    goes; every part of a text is kept, as a code or as OTHER (results/legacy_reasons.py
    reads the old wording, only when a database holds some)."""
    conn.execute(
        """
        CREATE TABLE trial_reasons (
            trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            code TEXT NOT NULL,
            detail TEXT NOT NULL,
            PRIMARY KEY (trial_id, position)
        )
        """
    )
    texts = conn.execute(
        "SELECT id, invalid_reason FROM trials WHERE invalid_reason IS NOT NULL"
    ).fetchall()
    if texts:
        conn.executemany(
            "INSERT INTO trial_reasons (trial_id, position, code, detail) VALUES (?, ?, ?, ?)",
            legacy_reasons.rows(texts),
        )
    conn.execute("ALTER TABLE trials DROP COLUMN invalid_reason")


# A step is SQL statements, or a function for one that must read what it converts.
MIGRATIONS: list[str | Callable[[sqlite3.Connection], None]] = [
    # v1: runs, their targets and trials.
    """
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        created_at TEXT NOT NULL,
        finished_at TEXT,
        status TEXT NOT NULL,
        status_detail TEXT,
        command TEXT NOT NULL,
        config TEXT NOT NULL,
        environment TEXT NOT NULL,
        fingerprint TEXT,
        loadgen TEXT
    );
    CREATE TABLE targets (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        label TEXT NOT NULL,
        spec TEXT NOT NULL,
        kind TEXT NOT NULL,
        binary TEXT,
        binary_sha256 TEXT,
        commit_sha TEXT,
        ref TEXT,
        source_repo TEXT,
        image TEXT,
        redis_version TEXT,
        server_info TEXT,
        details TEXT,
        UNIQUE (run_id, label)
    );
    CREATE TABLE trials (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        target_id INTEGER NOT NULL REFERENCES targets(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        repetition INTEGER NOT NULL,
        workload TEXT NOT NULL,
        point TEXT NOT NULL,
        params TEXT NOT NULL,
        started_at TEXT NOT NULL,
        wall_s REAL,
        warmup_s REAL,
        requests INTEGER,
        ops_per_sec REAL,
        lat_avg_ms REAL,
        lat_min_ms REAL,
        lat_p50_ms REAL,
        lat_p95_ms REAL,
        lat_p99_ms REAL,
        lat_p999_ms REAL,
        lat_max_ms REAL,
        client_cpu_pct REAL,
        server_cpu_pct REAL,
        steal_pct REAL,
        contention_pct REAL,
        keyspace_hits INTEGER,
        keyspace_misses INTEGER,
        error_replies INTEGER,
        server_calls INTEGER,
        exit_code INTEGER,
        valid INTEGER NOT NULL,
        invalid_reason TEXT,
        argv TEXT,
        raw_output TEXT,
        server_stats TEXT,
        UNIQUE (run_id, seq)
    );
    CREATE INDEX trials_by_run ON trials (run_id, workload, point);
    """,
    # v2: instruction trials under callgrind, syscalls per trial, per-function costs.
    """
    ALTER TABLE trials ADD COLUMN mode TEXT NOT NULL DEFAULT 'throughput';
    ALTER TABLE trials ADD COLUMN syscalls_read INTEGER;
    ALTER TABLE trials ADD COLUMN syscalls_write INTEGER;
    ALTER TABLE trials ADD COLUMN instructions INTEGER;
    ALTER TABLE trials ADD COLUMN instructions_per_op REAL;
    ALTER TABLE trials ADD COLUMN instructions_repeat_pct REAL;
    CREATE TABLE function_costs (
        trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
        function TEXT NOT NULL,
        file TEXT,
        object TEXT,
        exclusive INTEGER NOT NULL,
        inclusive INTEGER NOT NULL,
        PRIMARY KEY (trial_id, function)
    );
    """,
    # v3: named baselines (a version of a stored run that later candidates compare with).
    """
    CREATE TABLE baselines (
        name TEXT PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        label TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    """,
    # v4: per-command figures of every trial, from the server (INFO commandstats deltas)
    # and from the load generator (memtier's per-command rows).
    """
    CREATE TABLE command_stats (
        trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
        source TEXT NOT NULL,
        command TEXT NOT NULL,
        calls REAL,
        usec REAL,
        failed_calls REAL,
        ops_per_sec REAL,
        p50_ms REAL,
        p99_ms REAL,
        PRIMARY KEY (trial_id, source, command)
    );
    """,
    # v5: the seed each trial's server read from /dev/urandom (common random numbers).
    """
    ALTER TABLE trials ADD COLUMN seed TEXT;
    """,
    # v6: each run's comparability key (regtrack.results.comparability), as it was when created.
    """
    ALTER TABLE runs ADD COLUMN comparability TEXT;
    """,
    # v7: bisections (regtrack bisect): what was asked, each step's run and verdict, the answer;
    # run_analysis: what the report derived from each run, keyed by what it depends on.
    """
    CREATE TABLE bisections (
        id INTEGER PRIMARY KEY,
        created_at TEXT NOT NULL,
        status TEXT NOT NULL,
        config TEXT NOT NULL,
        log TEXT NOT NULL DEFAULT '[]',
        result TEXT
    );
    CREATE TABLE run_analysis (
        run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
        key TEXT NOT NULL,
        summary TEXT NOT NULL,
        history TEXT NOT NULL
    );
    """,
    # v8: shards of one plan measured on several hosts, merged (regtrack merge): the host
    # that measured each trial, and which shard of which database each merged run holds.
    """
    ALTER TABLE trials ADD COLUMN host TEXT;
    CREATE TABLE merged_shards (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        shard INTEGER NOT NULL,
        shards INTEGER NOT NULL,
        host TEXT NOT NULL,
        source TEXT NOT NULL,
        source_run INTEGER NOT NULL,
        environment TEXT NOT NULL,
        trials INTEGER NOT NULL,
        merged_at TEXT NOT NULL,
        PRIMARY KEY (run_id, shard, host, source_run)
    );
    """,
    # v9: why a trial is invalid, as codes with their details (trial_reasons), parsed from
    # the free text of trials.invalid_reason, which goes.
    _reasons_as_codes,
    # v10: open-loop latency trials (regtrack-openloop): the rate offered, how well the
    # engine kept its schedule, and the trial's HDR latency histogram (export-hgrm).
    """
    CREATE TABLE trial_open_loop (
        trial_id INTEGER PRIMARY KEY REFERENCES trials(id) ON DELETE CASCADE,
        offered_rate REAL NOT NULL,
        arrival TEXT NOT NULL,
        lag_p99_us REAL,
        lag_max_us REAL,
        engine_busy_pct REAL,
        hdr_unit TEXT NOT NULL,
        hdr TEXT NOT NULL
    );
    """,
    # v11: task lifecycle trials: what the engine counted that a trial's row does not hold
    # (tasks enqueued, the producers' rate, round trips per task, empty dequeues); a
    # trial stored before has none, read as no lifecycle facts.
    """
    CREATE TABLE trial_lifecycle (
        trial_id INTEGER PRIMARY KEY REFERENCES trials(id) ON DELETE CASCADE,
        enqueued INTEGER NOT NULL,
        completed INTEGER NOT NULL,
        not_done INTEGER NOT NULL,
        enqueue_per_sec REAL NOT NULL,
        commands_per_task REAL NOT NULL,
        round_trips_per_task REAL NOT NULL,
        empty_dequeues INTEGER NOT NULL,
        foreign_tasks INTEGER NOT NULL
    );
    """,
    # v12: --metric cycles: what callgrind's cache and branch simulation counted in each
    # instruction trial (every event's total, its estimated cycles, the simulated caches),
    # and per function its exclusive cycles and misses; a trial or function cost stored
    # before has none, read as not simulated.
    """
    CREATE TABLE trial_cache_sim (
        trial_id INTEGER PRIMARY KEY REFERENCES trials(id) ON DELETE CASCADE,
        ir INTEGER NOT NULL,
        dr INTEGER NOT NULL,
        dw INTEGER NOT NULL,
        i1mr INTEGER NOT NULL,
        d1mr INTEGER NOT NULL,
        d1mw INTEGER NOT NULL,
        ilmr INTEGER NOT NULL,
        dlmr INTEGER NOT NULL,
        dlmw INTEGER NOT NULL,
        bc INTEGER NOT NULL,
        bcm INTEGER NOT NULL,
        bi INTEGER NOT NULL,
        bim INTEGER NOT NULL,
        cycles INTEGER NOT NULL,
        geometry TEXT NOT NULL
    );
    ALTER TABLE function_costs ADD COLUMN cycles INTEGER;
    ALTER TABLE function_costs ADD COLUMN l1_misses INTEGER;
    ALTER TABLE function_costs ADD COLUMN ll_misses INTEGER;
    ALTER TABLE function_costs ADD COLUMN branch_misses INTEGER;
    """,
    # v13: every syscall by name over a trial's measured window (bench/kernel_calls.py);
    # a trial without rows has its read and write counts alone (/proc/PID/io), as before.
    """
    CREATE TABLE trial_syscalls (
        trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        calls INTEGER NOT NULL,
        PRIMARY KEY (trial_id, name)
    );
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)


def schema_version(conn: sqlite3.Connection) -> int:
    """The database's schema version (0: new or empty)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def refuse_unusable(db: Path, version: int, *, create: bool) -> None:
    """Refuse a schema version this regtrack cannot read: a newer one, or none (an
    empty file) where nothing is to be created."""
    if version > SCHEMA_VERSION:
        raise BadInput(
            f"database {db} has schema version {version}, newer than this regtrack "
            f"understands ({SCHEMA_VERSION}): upgrade regtrack"
        )
    if version == 0 and not create:
        raise BadInput(f"database {db} is not a regtrack database (or is empty)")


def _wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL mode, waiting as long as the busy timeout while another process that
    opened the same old database holds it (switching can report "locked" at once instead
    of waiting; seen with four openers while one ran a long step)."""
    deadline = time.monotonic() + conn.execute("PRAGMA busy_timeout").fetchone()[0] / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def upgrade(store: Store, version: int, *, create: bool) -> None:
    """Bring a database older than SCHEMA_VERSION up to it (read-only commands too: only
    a read-only file stops it); one about to be created or upgraded by a command that
    writes is switched to WAL mode first. Its version is one refuse_unusable let by."""
    if version == SCHEMA_VERSION:
        return
    conn, db = store.conn, store.path
    if not create and not (os.access(db, os.W_OK) and os.access(db.parent, os.W_OK)):
        conn.close()
        raise BadInput(
            f"database {db} has schema version {version}, older than this regtrack's "
            f"({SCHEMA_VERSION}), and is read-only: make it writable once, and regtrack "
            "upgrades it in place, keeping every result"
        )
    if create:
        try:
            _wal(conn)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise BadInput(f"cannot use database {db}: {exc}") from None
    _migrate(store, version)  # no step drops a result: older ones stay as they were


def _migrate(store: Store, current: int) -> None:
    """One step per write transaction, its version read inside it: another process that
    opened the same old database at the same moment finds the step done and moves on
    (read outside, both would run it: "duplicate column name")."""
    try:
        while current < SCHEMA_VERSION:
            with store.transaction():
                current = store.conn.execute("PRAGMA user_version").fetchone()[0]
                if current >= SCHEMA_VERSION:
                    break
                _step(store, current)
                current += 1
                store.conn.execute(f"PRAGMA user_version = {current}")
    except sqlite3.DatabaseError as exc:
        raise CannotMeasure(f"cannot set up database {store.path}: {exc}") from None


def apply(conn: sqlite3.Connection, step: str | Callable[[sqlite3.Connection], None]) -> None:
    """Run one step: its statements, or its function."""
    if callable(step):
        step(conn)
        return
    for statement in step.split(";"):
        if statement.strip():
            conn.execute(statement)


def _step(store: Store, current: int) -> None:
    """Step ``current`` -> ``current + 1``; one that fails on what the file holds (not on
    the machine: space, locks, I/O) is bad input, rolled back by the transaction."""
    try:
        apply(store.conn, MIGRATIONS[current])
    except sqlite3.DatabaseError as exc:
        if (getattr(exc, "sqlite_errorname", "") or "").startswith(MACHINE_ERRORS):
            raise
        raise BadInput(
            f"database {store.path} cannot be upgraded to schema {current + 1} ({exc}): it "
            "holds something regtrack did not make; use a copy from before it was changed, "
            "and run again (the failed step was rolled back)"
        ) from None


# SQLite's result codes that come from the machine (space, I/O, locks, permissions), not
# from what the database holds: they exit 3, the others 2 (the file is the bad input).
MACHINE_ERRORS = (
    "SQLITE_FULL",
    "SQLITE_IOERR",
    "SQLITE_BUSY",
    "SQLITE_LOCKED",
    "SQLITE_READONLY",
    "SQLITE_CANTOPEN",
    "SQLITE_NOMEM",
    "SQLITE_PERM",
    "SQLITE_NOLFS",
    "SQLITE_INTERRUPT",
)
