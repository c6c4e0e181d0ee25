"""Every database connection regtrack opens: SQLite set up for a file that may be crafted,
and statements that stop when the user (or CI) asks regtrack to stop.

A statement runs inside SQLite's C code, where Python's signal handlers wait until it
returns: a query over a huge (or crafted) database would ignore Ctrl-C and SIGTERM for as
long as it runs. The progress handler, called every PROGRESS_STEPS steps of a statement,
is where a waiting handler runs (core/interrupts.py records the signal); a statement that
was running when a signal arrived is aborted, and the abort is raised as ``Interrupted``,
which ends the command with its one line and exit code 130. Statements started after the
signal (recording that a run was interrupted) run to their end.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from regtrack.core import interrupts

# SQLite's virtual machine steps between two calls of the progress handler: a few
# microseconds of work, so a statement stops at once and the calls cost nothing.
PROGRESS_STEPS = 10_000

Parameters = Sequence[Any] | Mapping[str, Any]


def connect(path: Path | str, timeout_ms: int) -> sqlite3.Connection:
    """A connection to ``path`` (rows as sqlite3.Row, autocommit: transactions are the
    store's) whose statements stop at a signal; raises sqlite3.DatabaseError for a file
    that is not a database."""
    conn = sqlite3.connect(
        path, timeout=timeout_ms / 1000, isolation_level=None, factory=StoppableConnection
    )
    try:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(timeout_ms)}")
        conn.execute("PRAGMA foreign_keys = ON")
        # Functions and virtual tables with side effects may not run from the schema (a
        # trigger, view, default or index): results/schema_objects.py refuses foreign
        # objects, this also keeps SQLite from running such a function while it does.
        conn.execute("PRAGMA trusted_schema = OFF")
        # Check each b-tree cell's size as it is read: a crafted page is an error, not a
        # read past the cell.
        conn.execute("PRAGMA cell_size_check = ON")
        # SQLITE_DBCONFIG_DEFENSIVE (no writable_schema, no writes to shadow tables) needs
        # Connection.setconfig (Python 3.12); Python 3.11's sqlite3 does not expose the
        # handle it would be set on. regtrack runs none of the statements it forbids, and
        # the schema objects that could are refused before any statement runs.
        if hasattr(conn, "setconfig"):
            conn.setconfig(sqlite3.SQLITE_DBCONFIG_DEFENSIVE, True)  # type: ignore[attr-defined]
    except BaseException:
        conn.close()
        raise
    return conn


def _raise_signal(exc: sqlite3.OperationalError) -> None:
    """An abort by the progress handler (SQLITE_INTERRUPT) is the signal, raised again."""
    if getattr(exc, "sqlite_errorname", "") == "SQLITE_INTERRUPT":
        interrupts.check()


@contextlib.contextmanager
def _signal_raised() -> Iterator[None]:
    """A statement's SQLITE_INTERRUPT raised as the signal that caused it."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        _raise_signal(exc)
        raise


class StoppableCursor(sqlite3.Cursor):
    """A cursor whose statement (executed or fetched from) stops at a signal."""

    connection: StoppableConnection

    def execute(self, sql: str, parameters: Parameters = (), /) -> StoppableCursor:
        self.connection.started()
        with _signal_raised():
            return super().execute(sql, parameters)

    def executemany(self, sql: str, seq: Iterable[Parameters], /) -> StoppableCursor:
        self.connection.started()
        with _signal_raised():
            return super().executemany(sql, seq)

    def executescript(self, script: str, /) -> StoppableCursor:
        self.connection.started()
        with _signal_raised():
            return super().executescript(script)

    def fetchone(self) -> Any:
        with _signal_raised():
            return super().fetchone()

    def fetchmany(self, size: int | None = None) -> list[Any]:
        with _signal_raised():
            return super().fetchmany(self.arraysize if size is None else size)

    def fetchall(self) -> list[Any]:
        with _signal_raised():
            return super().fetchall()

    def __next__(self) -> Any:
        # Called once per row: a plain try, not _signal_raised (a generator's context
        # manager made iterating 200,000 rows take 255 ms instead of 96).
        try:
            return super().__next__()
        except sqlite3.OperationalError as exc:
            _raise_signal(exc)
            raise


class StoppableConnection(sqlite3.Connection):
    """A connection whose every statement goes through a StoppableCursor."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._signals = interrupts.received()
        self.set_progress_handler(self._stop, PROGRESS_STEPS)

    def started(self) -> None:
        """A statement starts: only a signal that arrives from now on stops it."""
        self._signals = interrupts.received()

    def _stop(self) -> bool:
        # Python code runs here, so a signal's handler runs here too: it records the
        # signal and raises Interrupted, which SQLite takes as "abort", as it takes True.
        return interrupts.received() > self._signals

    def cursor(self, factory: Any = None) -> StoppableCursor:  # type: ignore[override]
        return super().cursor(factory or StoppableCursor)

    def execute(self, sql: str, parameters: Parameters = (), /) -> StoppableCursor:
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, seq: Iterable[Parameters], /) -> StoppableCursor:
        return self.cursor().executemany(sql, seq)

    def executescript(self, script: str, /) -> StoppableCursor:
        return self.cursor().executescript(script)
