"""A database regtrack opens may be crafted (a pull request commits reports/regtrack.db into
the checkout CI runs in): schema objects regtrack did not create are refused before any of
them can run, a statement still running stops at Ctrl-C or SIGTERM, and a value of the
wrong type or shape is one line of bad input (exit 2), never a traceback or a verdict."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import closing, suppress
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from regtrack.analysis import commands
from regtrack.analysis.report_data import RunSummary
from regtrack.core.errors import BadInput
from regtrack.core.records import InvalidReason, LifecycleFacts, TrialRecord
from regtrack.flows import readout, report
from regtrack.results import analysis_cache, baselines, loaded
from regtrack.results.migrations import SCHEMA_VERSION
from regtrack.results.records import LoadedRun, StoredRun
from regtrack.results.run_row import HostFacts, LoadgenFacts
from regtrack.results.store import Store
from regtrack.targets.versions import Target
from tests import fakebench, tiers
from tests.conftest import cli_in_process, redis_server_path, stored_plan

REPO = Path(__file__).parent.parent
FIXTURES = Path(__file__).parent / "fixtures"
SPIN = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


def _record(seq: int, label: str = "a", **fields) -> TrialRecord:
    return TrialRecord(
        seq=seq,
        repetition=seq,
        target_label=label,
        workload="get-pipeline",
        point="pipeline=1",
        params={"pipeline": 1},
        started_at="2026-01-01T00:00:00+00:00",
        valid=True,
        **fields,
    )


def _small(path: Path) -> tuple[int, int]:
    """A database regtrack wrote: one run, one version, one instruction trial."""
    store = Store.open(path)
    run_id = store.create_run(["regtrack", "run"], stored_plan(metric="instructions"), {}, {})
    target_id = store.add_target(run_id, 0, Target("a", "bin:/x", "bin"), {})
    store.add_trial(run_id, target_id, _record(0, mode="instructions", instructions_per_op=1000.0))
    store.finish_run(run_id, "complete")
    store.close()
    return run_id, target_id


def _craft(path: Path, *statements: str) -> None:
    with closing(sqlite3.connect(path)) as conn:
        for sql in statements:
            conn.execute(sql)
        conn.commit()


def _one_line(exc: pytest.ExceptionInfo[BadInput]) -> str:
    message = str(exc.value)
    assert message and "\n" not in message, message
    return message


def test_a_trigger_that_forges_stored_trials_is_refused_before_it_fires(tmp_path):
    """Issue 45's reproduction: a trigger planted in the database made a same-binary gate
    print "instructions per op -20.0%". The open (as a run's, which then stores trials)
    is refused, so nothing is stored and the trigger never fires."""
    db = tmp_path / "r.db"
    run_id, target_id = _small(db)
    _craft(
        db,
        "CREATE TRIGGER forge AFTER INSERT ON trials BEGIN UPDATE trials SET "
        "instructions_per_op = instructions_per_op*0.8 WHERE id = NEW.id; END",
    )
    with pytest.raises(BadInput) as refused:
        store = Store.open(db)
        store.add_trial(run_id, target_id, _record(1, mode="instructions", instructions_per_op=1e3))
    assert "trigger 'forge'" in _one_line(refused)
    with closing(sqlite3.connect(db)) as conn:
        stored = conn.execute("SELECT seq, instructions_per_op FROM trials ORDER BY seq").fetchall()
    assert stored == [(0, 1000.0)], "nothing stored, nothing forged"


def test_a_trigger_on_the_report_cache_is_refused_by_read_only_report(tmp_path):
    """The trigger fired during the read-only `report` (its cache writes) and multiplied
    every stored ops/s by 1,000."""
    db = tmp_path / "r.db"
    _small(db)
    _craft(
        db,
        "UPDATE trials SET ops_per_sec = 100.0",
        "CREATE TRIGGER boost AFTER INSERT ON run_analysis BEGIN "
        "UPDATE trials SET ops_per_sec = ops_per_sec * 1000; END",
    )
    proc = cli_in_process("report", "--db", str(db), "--out", str(tmp_path / "html"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("regtrack: error: ") and proc.stderr.count("\n") == 1
    assert "trigger 'boost'" in proc.stderr
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT ops_per_sec FROM trials").fetchall() == [(100.0,)]


@pytest.mark.parametrize(
    "plant",
    [
        f"CREATE VIEW spin AS {SPIN}",
        f"CREATE TRIGGER spin AFTER INSERT ON run_analysis BEGIN SELECT ({SPIN}); END",
        f"CREATE TRIGGER spin BEFORE UPDATE ON runs BEGIN SELECT ({SPIN}); END",
    ],
    ids=["view", "trigger-on-cache", "trigger-on-runs"],
)
def test_an_unbounded_query_in_the_schema_is_refused_before_it_runs(tmp_path, plant):
    """A trigger whose query never ends made `report` spin for 10 minutes."""
    db = tmp_path / "r.db"
    _small(db)
    _craft(db, plant)
    started = time.monotonic()
    with pytest.raises(BadInput) as refused:
        Store.open(db, create=False).close()
    assert "'spin'" in _one_line(refused) and time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("plant", "named"),
    [
        ("CREATE TABLE notes (x)", "table 'notes'"),
        ("CREATE INDEX by_ops ON trials (ops_per_sec)", "index 'by_ops'"),
        ("ALTER TABLE trials ADD COLUMN forged REAL", "table 'trials'"),
        (
            "ALTER TABLE trials ADD COLUMN fake REAL GENERATED ALWAYS AS (ops_per_sec * 2)",
            "table 'trials'",
        ),
        ("DROP TABLE baselines", "table 'baselines'"),
    ],
    ids=["table", "index", "column", "generated-column", "missing-table"],
)
def test_tables_indexes_and_columns_other_than_regtracks_are_refused(tmp_path, plant, named):
    db = tmp_path / "r.db"
    _small(db)
    _craft(db, plant)
    with pytest.raises(BadInput) as refused:
        Store.open(db, create=False)
    message = _one_line(refused)
    assert named in message and str(db) in message, message


def test_an_older_database_with_a_trigger_is_refused_before_it_is_upgraded(tmp_path):
    """The schema an old database must have is the migrations up to its version: the
    check runs before upgrading (a trigger would fire on the upgrade's own writes)."""
    db = tmp_path / "old.db"
    shutil.copy(FIXTURES / "schema-v4.db", db)
    _craft(db, "CREATE TRIGGER t AFTER UPDATE ON trials BEGIN DELETE FROM runs; END")
    with pytest.raises(BadInput, match="trigger 't'"):
        Store.open(db)
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 4, "not upgraded"


def test_an_older_database_as_regtrack_wrote_it_is_accepted_and_upgraded(tmp_path):
    db = tmp_path / "old.db"
    shutil.copy(FIXTURES / "schema-v4.db", db)
    store = Store.open(db, create=False)
    assert store.runs(), "its runs are read"
    store.close()
    Store.open(db, create=False).close()  # and the upgraded schema is regtrack's too


def test_a_store_connection_trusts_no_schema_and_checks_cells(tmp_path):
    store = Store.open(tmp_path / "r.db")
    assert store.conn.execute("PRAGMA trusted_schema").fetchone()[0] == 0
    assert store.conn.execute("PRAGMA cell_size_check").fetchone()[0] == 1
    store.close()


# A long statement (a crafted database's huge tables, or any pathological query) run from
# a real `regtrack compare --list`: Store.runs is replaced by one that spins in SQLite.
SPINNING = f"""
import sys
from regtrack.cli import main
from regtrack.results.store import Store

def spinning(self):
    print("spinning", flush=True)
    return self.conn.execute({SPIN!r}).fetchall()

Store.runs = spinning
main(["compare", "--list", "--db", sys.argv[1]])
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_statement_that_never_ends_stops_at_a_signal(tmp_path, sig):
    """SQLite runs a statement in C, where Python's signal handlers wait: without a
    progress handler, SIGTERM was ignored for as long as the statement ran."""
    db = tmp_path / "r.db"
    _small(db)
    proc = subprocess.Popen(
        [sys.executable, "-c", SPINNING, str(db)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "spinning\n"
        time.sleep(0.3)  # well inside the statement
        sent = time.monotonic()
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert time.monotonic() - sent < 3
    assert proc.returncode == 130, stderr
    # click ends the terminal's ^C echo with a blank line first.
    assert stderr.lstrip("\n") == (
        f"regtrack: interrupted by {sig.name}; results measured so far are kept\n"
    )


# --- values of the wrong type or shape -------------------------------------------------


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> Path:
    """A database as regtrack writes it: two modelled runs of two versions at two points,
    throughput and instructions (tests/fakebench.py), open-loop trials in the first, a
    baseline, an invalid trial with per-command rows, a lifecycle's capacity trials with
    their engine's counts, a run that failed before measuring, and the report's cache."""
    server = redis_server_path()
    root = tmp_path_factory.mktemp("measured")
    (root / "configs").mkdir()
    (root / "configs" / "regtrack.toml").write_text("[run]\nseed_offset = 0\n")
    db = root / "r.db"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REGTRACK_CONFIG_DIR", str(root / "configs"))
        model = fakebench.Model(
            instructions={"a": 3500.0, "b": 3570.0}, throughput={"a": 4e5, "b": 3.8e5}
        )
        for rates in (["--rate", "1000"], []):  # run 1 has open-loop trials too
            proc = cli_in_process(
                "run", "--versions", f"a=bin:{server},b=bin:{server}", "--metric", "both",
                "--pipelines", "1,10", "--repetitions", "2", "--db", str(db), "--no-report",
                *rates, measuring=model,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr
        saved = cli_in_process("baseline", "save", "main", "--run", "1", "--label", "a",
                               "--db", str(db), measuring=model)  # fmt: skip
        assert saved.returncode == 0, saved.stderr
    store = Store.open(db, create=False)
    target = store.targets(2)[1]
    record = _record(
        100,
        "b",
        server_stats={"commands": {"get": {"calls": 10, "usec": 5, "failed_calls": 0}}},
        per_command={"get": {"count": 10, "ops_per_sec": 1e5, "p50": 0.1, "p99": 0.3}},
    )
    record.mark_invalid(InvalidReason.CLIENT_BOUND, "99% CPU")
    store.add_trial(2, target["id"], record)
    for seq, version in ((101, store.targets(2)[0]), (102, target)):  # a lifecycle's capacity
        task = _record(seq, version["label"], mode="tasks", ops_per_sec=900.0, requests=900)
        task.point, task.params = "capacity", {}
        task.lifecycle = LifecycleFacts(900, 900, 0, 905.0, 3.0, 2.5, 4, 0)
        store.add_trial(2, version["id"], task)
    failed = store.create_run(["regtrack", "run"], stored_plan(), {}, {})
    store.finish_run(failed, "failed", "the server did not start")
    report.gather(store)
    store.keep_whole()  # every commit in the .db file: tests copy that file alone
    store.close()
    return db


def plant(db: Path, table: str, column: str, value: object, rowid: int | None = None) -> None:
    """Set one value (of the first row, or ``rowid``) as a crafted file may hold it: past
    NOT NULL too (the table's SQL is edited around the write, as PRAGMA writable_schema
    lets anyone do, then put back)."""
    with closing(sqlite3.connect(db)) as conn:
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
        if rowid is None:
            (rowid,) = conn.execute(f"SELECT MIN(rowid) FROM {table}").fetchone()
        conn.execute("PRAGMA writable_schema = ON")
        loose = re.sub(r"\bNOT NULL\b", "", sql)
        conn.execute("UPDATE sqlite_master SET sql = ? WHERE name = ?", (loose, table))
        conn.commit()
    with closing(sqlite3.connect(db)) as conn:
        conn.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?", (value, rowid))
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute("UPDATE sqlite_master SET sql = ? WHERE name = ?", (sql, table))
        conn.commit()


SHAPES = [
    ("trials", "ops_per_sec", "abc", "ops_per_sec is 'abc', not a number"),
    ("trials", "params", "{not json", "params is not JSON"),
    ("targets", "details", "[1,2]", "details is not a JSON object"),
    ("runs", "environment", json.dumps("a string"), "environment is not a JSON object"),
    ("trials", "workload", None, "workload is NULL"),
    ("targets", "server_info", "<html>", "server_info is not JSON"),
    ("trials", "valid", "yes", "valid is 'yes', not 0 or 1"),
]


@pytest.mark.parametrize(
    ("table", "column", "value", "why"), SHAPES, ids=[f"{s[0]}.{s[1]}" for s in SHAPES]
)
@pytest.mark.parametrize("command", [["compare", "--run", "1"], ["report"]], ids=lambda c: c[0])
def test_a_value_of_the_wrong_type_is_one_line_of_bad_input(
    measured, tmp_path, table, column, value, why, command
):
    """Issue 45: each ended in exit 4 with a traceback (valid='yes' counted as valid)."""
    db = tmp_path / "r.db"
    shutil.copy(measured, db)
    plant(db, table, column, value)
    if command == ["report"]:
        command = ["report", "--out", str(tmp_path / "html")]
    proc = cli_in_process(*command, "--db", str(db))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert f"database {db}: {table} row 1: {why}" in proc.stderr, proc.stderr
    assert "use a database regtrack wrote" in proc.stderr


@pytest.mark.parametrize(
    ("column", "value", "why"),
    [
        ("round_trips_per_task", -1.0, "round_trips_per_task is -1.0, not a measure"),
        ("enqueued", None, "enqueued is NULL"),
        ("enqueue_per_sec", "fast", "enqueue_per_sec is 'fast', not a number"),
    ],
)
def test_a_crafted_lifecycle_count_is_one_line_of_bad_input(measured, tmp_path, column, value, why):
    """The lifecycle engine's counts (trial_lifecycle) are read with the run's trials, each
    checked as the trials' own columns are."""
    db = tmp_path / "r.db"
    shutil.copy(measured, db)
    plant(db, "trial_lifecycle", column, value)
    proc = cli_in_process("compare", "--run", "2", "--db", str(db))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert "trial_lifecycle row of trial" in proc.stderr and why in proc.stderr, proc.stderr


def test_an_interval_too_wide_to_square_is_compared_or_refused(measured, tmp_path):
    """A trial's instructions per op 1.4e7 times its cell's others (a crafted value of the
    right type, within what a measure may be): the interval is finite, its square is not,
    so no number of extra repetitions is offered (analysis.stats.extra_repetitions)."""
    db = tmp_path / "r.db"
    shutil.copy(measured, db)
    with closing(sqlite3.connect(db)) as conn:
        (trial,) = conn.execute(
            "SELECT MIN(id) FROM trials WHERE run_id = 1 AND mode = 'instructions'"
        ).fetchone()
    plant(db, "trials", "instructions_per_op", 5e10, trial)
    store = Store.open(db, create=False)
    try:
        readout.within_run(store, 1, None, None)
    except BadInput as exc:
        assert "\n" not in str(exc)
    finally:
        store.close()


# --- any crafted value, anywhere ---------------------------------------------------------

TABLES = ("runs", "targets", "trials", "trial_reasons", "command_stats", "function_costs",
          "trial_open_loop", "trial_lifecycle", "baselines", "run_analysis")  # fmt: skip
RUNS = (1, 2)  # the measured runs; run 3 failed before measuring
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=5,
)
HOSTILE_TEXT = ["abc", "yes", "", "1e999", "NaN", "-inf", "[1,2]", '"text"', "{}", "[]", "null",
                "true", "{", "[" * 5000 + "]" * 5000, "x" * 100_000,
                "\x00\x1b]0;title\x07\n\r"]  # fmt: skip
HOSTILE = st.one_of(
    st.none(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([0, 1, 2, -1, 10**18, 1e308, -1e308, 5e-324]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(HOSTILE_TEXT),
    st.binary(max_size=8),
    JSON_VALUES.map(json.dumps),
)
SCHEMA_CHANGES = [
    "CREATE TRIGGER t AFTER INSERT ON run_analysis BEGIN UPDATE trials SET ops_per_sec = 1; END",
    "CREATE TRIGGER t BEFORE DELETE ON trials BEGIN SELECT 1; END",
    f"CREATE VIEW v AS {SPIN}",
    "CREATE TABLE extra (x)",
    "CREATE INDEX i ON trials (ops_per_sec)",
    "ALTER TABLE runs ADD COLUMN z TEXT",
    "DROP INDEX trials_by_run",
    "DROP TABLE baselines",
]


class Base:
    """The measured database, read once: its bytes with NOT NULL taken out of its tables'
    SQL (each example starts from a copy, sets values, then puts the SQL back), where its
    values are, and what the commands' analysis reads of each run (an example whose
    crafted values leave that as it was needs no analysis again: it is the same input)."""

    def __init__(self, db: Path, folder: Path):
        with closing(sqlite3.connect(db)) as conn:
            self.rowids = {
                t: [r[0] for r in conn.execute(f"SELECT rowid FROM {t}")] for t in TABLES
            }
            self.columns = {
                t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")] for t in TABLES
            }
            self.schema = dict(
                conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
            )
        loose = folder / "loose.db"
        shutil.copy(db, loose)
        with closing(sqlite3.connect(loose, isolation_level=None)) as conn:
            conn.execute("PRAGMA journal_mode = DELETE")  # one file, whatever the example does
            conn.execute("PRAGMA writable_schema = ON")
            for name, sql in self.schema.items():
                stripped = re.sub(r"\bNOT NULL\b", "", sql)
                conn.execute("UPDATE sqlite_master SET sql = ? WHERE name = ?", (stripped, name))
        self.loose = loose.read_bytes()
        self.strict = db.read_bytes()
        store = Store.open(db, create=False)
        self.inputs = {run_id: _inputs(store, run_id) for run_id in RUNS}
        self.cache = _cache(store)
        store.close()

    def __repr__(self) -> str:  # what a failing example prints
        return "Base(the measured database)"


def _inputs(store: Store, run_id: int) -> tuple[LoadedRun, pd.DataFrame, pd.DataFrame]:
    """What analysis computes a run's answers from: the run with its trials, its function
    costs, its command rows."""
    costs = loaded.costs(store, run_id).costs
    return loaded.run(store, run_id), costs, loaded.command_stats(store, run_id)


@pytest.fixture(scope="module")
def base(measured, tmp_path_factory) -> Base:
    found = Base(measured, tmp_path_factory.mktemp("base"))
    assert all(found.rowids.values()), {t: len(r) for t, r in found.rowids.items()}
    return found


def _json_edit(text: object, data: st.DataObject) -> object:
    """The document with one value replaced or one key removed, at any depth."""
    try:
        document = json.loads(text)  # type: ignore[arg-type]
    except (TypeError, ValueError, RecursionError):
        return text
    parent, key = None, None
    value = document
    while isinstance(value, dict | list) and value and data.draw(st.booleans()):
        keys = list(value) if isinstance(value, dict) else list(range(len(value)))
        parent, key = value, data.draw(st.sampled_from(keys))
        value = value[key]
    if parent is None:
        return json.dumps(data.draw(JSON_VALUES))
    if isinstance(parent, dict) and data.draw(st.booleans()):
        del parent[key]
    else:
        parent[key] = data.draw(JSON_VALUES)
    return json.dumps(document)


def _craft_copy(db: Path, base: Base, data: st.DataObject) -> set[int] | None:
    """A fresh copy of the measured database with 1 to 3 crafted values (returns the
    runs whose rows they are in), or with a schema object added or removed (returns None:
    the copy is not regtrack's any more)."""
    for leftover in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), Path(f"{db}-journal")):
        leftover.unlink(missing_ok=True)
    change = (
        data.draw(st.sampled_from([*SCHEMA_CHANGES, "ANALYZE"]))
        if data.draw(st.integers(0, 9)) == 0
        else ""
    )
    db.write_bytes(base.strict if change else base.loose)
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.execute("PRAGMA synchronous = OFF")
        if change:
            conn.execute(change)
            return None if change != "ANALYZE" else set()
        conn.execute("BEGIN")
        runs: set[int] = set()
        for _ in range(data.draw(st.integers(1, 3))):
            runs |= _craft_value(conn, base, data)
        conn.execute("PRAGMA writable_schema = ON")  # its tables' SQL as regtrack wrote it
        for name, sql in base.schema.items():
            conn.execute("UPDATE sqlite_master SET sql = ? WHERE name = ?", (sql, name))
        conn.execute("COMMIT")
    return runs


def _craft_value(conn: sqlite3.Connection, base: Base, data: st.DataObject) -> set[int]:
    """One value of a row set to a hostile one; the runs the row is in (every run where
    the value is one of the keys that tie rows to runs)."""
    table = data.draw(st.sampled_from(TABLES))
    rowid = data.draw(st.sampled_from(base.rowids[table]))
    column = data.draw(st.sampled_from(base.columns[table]))
    row = conn.execute(f"SELECT {column} FROM {table} WHERE rowid = ?", (rowid,)).fetchone()
    if row is None:  # its id was crafted by an earlier draw
        return set()
    value = _json_edit(row[0], data) if data.draw(st.booleans()) else data.draw(HOSTILE)
    with suppress(sqlite3.Error):  # what SQLite itself refuses crafts nothing
        conn.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?", (value, rowid))
    if column in ("id", "run_id", "target_id", "trial_id"):
        return set(RUNS)
    of_trial = "SELECT t.run_id FROM {} c JOIN trials t ON t.id = c.trial_id WHERE c.rowid = ?"
    query = {"runs": "SELECT id FROM runs WHERE rowid = ?"}.get(
        table,
        of_trial.format(table)
        if "trial_id" in base.columns[table]
        else f"SELECT run_id FROM {table} WHERE rowid = ?",
    )
    found = conn.execute(query, (rowid,)).fetchone()
    return {found[0]} & set(RUNS) if found else set()


def _one_line_or_fine(step: Callable[[], object]) -> None:
    try:
        step()
    except BadInput as exc:
        assert str(exc) and "\n" not in str(exc) and "\r" not in str(exc), repr(str(exc))


def _read_as_commands_do(db: Path, base: Base, runs: set[int]) -> None:
    """What compare --list, baseline list and report read, and what compare, explain,
    history and report compute from what the crafted values changed (the report's data,
    not its HTML); each may be one line of bad input."""
    try:
        store = Store.open(db, create=False)
    except BadInput as exc:
        assert "\n" not in str(exc), str(exc)
        return
    try:
        _one_line_or_fine(lambda: readout.runs(store))
        _one_line_or_fine(lambda: baselines.listed(store))
        _one_line_or_fine(lambda: _report_from_cache(store, base))
        for run_id in sorted(runs):
            _one_line_or_fine(lambda run_id=run_id: _analyse_what_changed(store, base, run_id))
        _one_line_or_fine(lambda: readout.latency(store, 1))
    finally:
        store.close()


def _report_from_cache(store: Store, base: Base) -> None:
    """The report reads each run's line and points back from its cache, under their key:
    with a crafted line or points that it takes as they are, it does so, asking for the
    page of the run with nothing to compare (cheap). A crafted key, run or shape only has
    the run derived again, from the input the base's report derived it from."""
    cached = _cache(store)
    if cached == base.cache or [r[:2] for r in cached] != [r[:2] for r in base.cache]:
        return
    read_back = analysis_cache.load(store)
    with suppress(ValueError):  # pydantic's ValidationError: derived again
        if len(read_back) == len(cached) and all(
            RunSummary.from_json(summary) for _, summary, _ in read_back.values()
        ):
            report.gather(store, [3])


def _cache(store: Store) -> list[tuple]:
    return [tuple(r) for r in store.conn.execute("SELECT * FROM run_analysis ORDER BY rowid")]


def _analyse_what_changed(store: Store, base: Base, run_id: int) -> None:
    """Analysis again of what changed (the same input gives the same answer): a run or
    its trials (the report's comparison, line, history points, attribution and command
    breakdown, as compare, history and explain compute them too), or only its function
    costs (explain), or only its command rows."""
    before, costs_before, commands_before = base.inputs[run_id]
    run = loaded.run(store, run_id)
    if _analysed_run(run.run) != _analysed_run(before.run) or not _analysed(run.trials).equals(
        _analysed(before.trials)
    ):
        report.gather(store, [run_id])
    elif not loaded.costs(store, run_id).costs.equals(costs_before):
        readout.functions(store, run_id, "a", "b", None, 5)
    elif not (frame := loaded.command_stats(store, run_id)).equals(commands_before):
        commands.breakdown(frame)


# Trial columns no analysis reads (evidence that pages show): checked as they are read,
# then the same input to analysis whatever they hold.
EVIDENCE = ["raw_output", "argv", "started_at", "server_stats", "wall_s", "warmup_s",
            "exit_code", "lat_avg_ms", "lat_min_ms", "lat_p95_ms", "lat_p999_ms", "lat_max_ms",
            "keyspace_hits", "keyspace_misses", "error_replies", "requests", "instructions",
            "instructions_repeat_pct", "steal_pct", "contention_pct", "client_cpu_pct"]  # fmt: skip


def _analysed(trials: pd.DataFrame) -> pd.DataFrame:
    return trials.drop(columns=EVIDENCE, errors="ignore")


def _analysed_run(run: StoredRun) -> StoredRun:
    """A run without what no analysis reads of it (its machine, load generator and
    seeds reach analysis through its comparability key, which is kept)."""
    return dataclasses.replace(
        run, command=(), environment=HostFacts(), loadgen=LoadgenFacts(), seeds=None
    )


@settings(max_examples=tiers.examples(2000), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_any_crafted_value_is_read_or_refused_in_one_line(base, tmp_path_factory, data):
    """Issue 45: a crafted database (any value of any row of the tables the commands read
    set to a hostile one, or a schema object added or removed) gives the answer or one
    line of bad input, never another exception; a changed schema is refused at once."""
    db = tmp_path_factory.getbasetemp() / "crafted.db"
    runs = _craft_copy(db, base, data)
    if runs is None:
        with pytest.raises(BadInput, match=rf"\(schema {SCHEMA_VERSION}\): use a database"):
            Store.open(db, create=False)
        return
    _read_as_commands_do(db, base, runs)
