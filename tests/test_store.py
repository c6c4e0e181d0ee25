import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from regtrack.core.errors import BadInput
from regtrack.core.records import InvalidReason, LifecycleFacts, TrialReason, TrialRecord
from regtrack.results import loaded, stored_trials
from regtrack.results.migrations import SCHEMA_VERSION
from regtrack.results.store import Store
from regtrack.targets.versions import Target
from tests.conftest import cli_in_process, stored_plan
from tests.test_cycles import before_cache_sim


def _trial(seq: int, valid: bool = True) -> TrialRecord:
    record = TrialRecord(
        seq=seq,
        repetition=0,
        target_label="a",
        workload="get-pipeline",
        point="pipeline=1",
        params={"pipeline": 1},
        started_at="2026-01-01T00:00:00+00:00",
        ops_per_sec=1000.0 + seq,
        latency_ms={"p50": 0.5, "p99": 1.0},
        valid=valid,
    )
    if not valid:
        record.mark_invalid(InvalidReason.CLIENT_BOUND, "99% CPU")
    return record


def test_new_database_is_versioned_and_in_wal_mode(tmp_path):
    store = Store.open(tmp_path / "sub" / "r.db")
    conn = store.conn
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.close()


def test_each_trial_is_committed_when_added(tmp_path):
    path = tmp_path / "r.db"
    store = Store.open(path)
    run_id = store.create_run(
        ["regtrack", "run"], stored_plan(), {"fingerprint": "f"}, {"name": "rb"}
    )
    target_id = store.add_target(run_id, 0, Target("a", "bin:/x", "bin"), {"redis_version": "7"})
    store.add_trial(run_id, target_id, _trial(0))
    store.add_trial(run_id, target_id, _trial(1, valid=False))
    # A second connection (another process would see the same) reads both trials at once.
    other = sqlite3.connect(path)
    rows = other.execute(
        "SELECT t.seq, t.valid, r.code, r.detail FROM trials t"
        " LEFT JOIN trial_reasons r ON r.trial_id = t.id ORDER BY t.seq"
    ).fetchall()
    assert rows == [(0, 1, None, None), (1, 0, "client-bound", "99% CPU")]
    other.close()
    assert store.run(run_id).status == "running"
    store.finish_run(run_id, "complete")
    assert store.runs()[0].status == "complete"
    trials = store.trials(run_id)
    assert [t.target for t in trials] == ["a", "a"]
    assert trials[0].lat_p50_ms == 0.5
    assert trials[1].reasons == (TrialReason(InvalidReason.CLIENT_BOUND, "99% CPU"),)
    store.close()


def test_reopening_keeps_data_and_does_not_migrate_again(tmp_path):
    path = tmp_path / "r.db"
    store = Store.open(path)
    run_id = store.create_run([], stored_plan(), {}, {})
    store.close()
    again = Store.open(path)
    assert [r.id for r in again.runs()] == [run_id]
    again.close()


def test_database_from_a_newer_regtrack_is_refused(tmp_path):
    path = tmp_path / "r.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(BadInput, match="newer than this regtrack"):
        Store.open(path)


def test_a_file_that_is_not_a_database_is_bad_input(tmp_path):
    path = tmp_path / "r.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(BadInput, match="cannot use database"):
        Store.open(path)


def test_reading_a_missing_database_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="does not exist"):
        Store.open(tmp_path / "none.db", create=False)
    assert not (tmp_path / "none.db").exists()


FIXTURES = Path(__file__).parent / "fixtures"


def test_a_database_from_an_older_regtrack_opens_in_read_only_commands(tmp_path):
    """tests/fixtures/schema-v4.db was written by regtrack 278c5fe (schema 4, before
    seeds): `report` and `baseline save` upgrade it in place and keep its results."""
    path = tmp_path / "old.db"
    shutil.copy(FIXTURES / "schema-v4.db", path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 4
    report = cli_in_process("report", "--db", str(path), "--out", str(tmp_path / "html"))
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "html" / "index.html").exists()
    saved = cli_in_process("baseline", "save", "old", "--run", "1", "--db", str(path))
    assert saved.returncode == 0, saved.stderr
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    (ops, seed) = conn.execute("SELECT ops_per_sec, seed FROM trials").fetchone()
    assert ops > 0 and seed is None  # measured before seeds existed: none is invented
    # Its one invalid trial's free text became a code, the text after "contended: " its detail.
    (code, detail) = conn.execute("SELECT code, detail FROM trial_reasons").fetchone()
    assert code == "contended" and detail.startswith("other processes used 59%")


def test_an_empty_file_is_not_a_regtrack_database_for_read_only_commands(tmp_path):
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()
    path.touch()
    with pytest.raises(BadInput, match="not a regtrack database"):
        Store.open(path, create=False)


def test_two_processes_upgrading_one_old_database_do_not_collide(tmp_path):
    """Each step's version is read inside its write transaction: stores opened at the
    same moment on one old database all open (read outside, the second ran the first's
    step again: "duplicate column name", exit 3)."""
    path = tmp_path / "old.db"
    shutil.copy(FIXTURES / "schema-v4.db", path)
    start = threading.Barrier(4)
    errors: list[BaseException] = []

    def open_it() -> None:
        start.wait()
        try:
            Store.open(path).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0] > 0


FACTS = LifecycleFacts(
    enqueued=2000, completed=1990, not_done=10, enqueue_per_sec=1000.5, commands_per_task=9.0,
    round_trips_per_task=4.25, empty_dequeues=3, foreign_tasks=0,
)  # fmt: skip


def _one_of_each(path: Path) -> tuple[Store, int]:
    """A store with a lifecycle trial (its engine's counts) and a GET trial (none)."""
    store = Store.open(path)
    run_id = store.create_run(["regtrack", "run"], stored_plan(), {}, {})
    target_id = store.add_target(run_id, 0, Target("a", "bin:/x", "bin"), {})
    task = _trial(0)
    task.mode, task.lifecycle = "tasks", FACTS
    store.add_trial(run_id, target_id, task)
    store.add_trial(run_id, target_id, _trial(1))
    return store, run_id


def test_a_lifecycle_trials_engine_counts_are_stored_and_read_back_as_they_were(tmp_path):
    store, run_id = _one_of_each(tmp_path / "r.db")
    first, second = store.trials(run_id)
    assert stored_trials.lifecycle(store.conn, store.path, run_id) == {first.id: FACTS}
    assert (first.enqueue_per_sec, first.round_trips_per_task) == (1000.5, 4.25)
    assert second.enqueue_per_sec is None and second.round_trips_per_task is None
    frame = loaded.trials_frame(store, run_id)
    assert frame["enqueue_per_sec"].dtype == "float64"
    assert frame["round_trips_per_task"].iloc[0] == 4.25
    assert frame["round_trips_per_task"].isna().iloc[1]
    store.close()


def test_a_database_from_before_lifecycle_facts_upgrades_and_reads_none(tmp_path):
    """A schema 10 database (no trial_lifecycle, as regtrack before it wrote one) opens,
    gains the table, and its trials read as having no lifecycle counts."""
    path = tmp_path / "v10.db"
    store, run_id = _one_of_each(path)
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE trial_lifecycle")
        before_cache_sim(conn)
        conn.execute("PRAGMA user_version = 10")
    conn.close()
    store = Store.open(path, create=False)
    assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert stored_trials.lifecycle(store.conn, store.path, run_id) == {}
    assert [t.round_trips_per_task for t in store.trials(run_id)] == [None, None]
    store.close()
