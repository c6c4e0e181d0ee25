"""A database regtrack opens may be crafted (a pull request commits reports/regtrack.db into
the checkout CI runs in): schema objects regtrack did not create are refused before any of
them can run, a statement still running stops at Ctrl-C or SIGTERM, and a value of the
wrong type or shape is one line of bad input (exit 2), never a traceback or a verdict."""

from __future__ import annotations

import json
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from regtrack.core.errors import BadInput
from regtrack.core.records import TrialRecord
from regtrack.flows import report
from regtrack.results.store import Store
from regtrack.targets.versions import Target
from tests import fakebench
from tests.conftest import cli_in_process, redis_server_path

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
    run_id = store.create_run(["regtrack", "run"], {"metric": "instructions"}, {}, {})
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
    throughput and instructions (tests/fakebench.py), a baseline, an invalid trial with
    per-command rows, and the report's cache of both runs."""
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
        fakebench.install(patch, model)
        for _ in range(2):
            proc = cli_in_process(
                "run", "--versions", f"a=bin:{server},b=bin:{server}", "--metric", "both",
                "--pipelines", "1,10", "--repetitions", "2", "--db", str(db), "--no-report",
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr
        saved = cli_in_process("baseline", "save", "main", "--run", "1", "--label", "a",
                               "--db", str(db))  # fmt: skip
        assert saved.returncode == 0, saved.stderr
    store = Store.open(db, create=False)
    target = store.targets(2)[1]
    record = _record(
        100,
        "b",
        server_stats={"commands": {"get": {"calls": 10, "usec": 5, "failed_calls": 0}}},
        per_command={"get": {"count": 10, "ops_per_sec": 1e5, "p50": 0.1, "p99": 0.3}},
    )
    record.valid = False
    store.add_trial(2, target["id"], record)
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
