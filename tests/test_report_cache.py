"""The report at the end of a run derives that run only: every other run's index row and
history points are read back from the store (results/analysis_cache.py), until what they
depend on changes. Synthetic trials (benchmarks/report_speed.py's filler): nothing is
measured, only what the report reads and writes is checked."""

from __future__ import annotations

from benchmarks.report_speed import fill
from regtrack.core.records import TrialRecord
from regtrack.flows import report
from regtrack.output.report import ReportFiles, write_report
from regtrack.results.store import Store, now

MARK = "read-back-from-the-cache"


def _report(store: Store, folder, runs: list[int] | None = None) -> ReportFiles:
    return write_report(report.gather(store, runs), folder)


def _mark(store: Store, run_id: int) -> None:
    """Change run ``run_id``'s cached index row where a recomputation would undo it."""
    with store.transaction() as conn:
        conn.execute(
            "UPDATE run_analysis SET summary = json_set(summary, '$.created_at', ?)"
            " WHERE run_id = ?",
            (MARK, run_id),
        )


def test_other_runs_are_read_back_until_their_trials_change(tmp_path):
    store = Store.open(tmp_path / "r.db")
    fill(store, 2, ["a", "b"], 2)
    files = _report(store, tmp_path)
    keys = dict(store.conn.execute("SELECT run_id, key FROM run_analysis").fetchall())
    assert sorted(keys) == [1, 2], "both runs' derived data stored"

    _mark(store, 1)
    _report(store, tmp_path, [2])
    assert MARK in files.index.read_text(), "run 1 was not derived again"

    # One more trial for run 1 changes what its row depends on: it is derived again.
    trials = store.trials(1)
    target = store.targets(1)[0]
    record = TrialRecord(
        seq=max(t.seq for t in trials) + 1,
        repetition=2,
        target_label=target["label"],
        workload="get-pipeline",
        point="pipeline=1",
        params={"pipeline": 1},
        started_at=now(),
        ops_per_sec=90_000.0,
        valid=True,
    )
    store.add_trial(1, target["id"], record)
    _report(store, tmp_path, [2])
    assert MARK not in files.index.read_text()
    new_key = store.conn.execute("SELECT key FROM run_analysis WHERE run_id = 1").fetchone()[0]
    assert new_key != keys[1]


def test_the_run_whose_page_is_written_is_always_derived_again(tmp_path):
    store = Store.open(tmp_path / "r.db")
    fill(store, 2, ["a", "b"], 2)
    files = _report(store, tmp_path)
    _mark(store, 2)
    _report(store, tmp_path, [2])
    assert MARK not in files.index.read_text()


def test_a_cached_row_of_another_shape_is_derived_again(tmp_path):
    """A row an older regtrack or a crafted file stored under a current key is not shown
    as it is: the run's line is derived again."""
    store = Store.open(tmp_path / "r.db")
    fill(store, 2, ["a", "b"], 2)
    files = _report(store, tmp_path)
    with store.transaction() as conn:
        conn.execute(
            "UPDATE run_analysis SET summary = json_set(summary, '$.versions', 'x',"
            " '$.created_at', ?) WHERE run_id = 1",
            (MARK,),
        )
    _report(store, tmp_path, [2])
    assert MARK not in files.index.read_text()
