"""A load generator that fails the same way on every version stops the run after each
version's first visit (bench/failing_loadgen.py); one that fails on one version only is a
finding, and the run goes on."""

from __future__ import annotations

import sqlite3
import sys

import pytest

from tests import fakebench
from tests.conftest import cli_in_process

FAST = ["--pipelines", "10", "--repetitions", "4", "--no-report", "--pairing", "separate"]


def _trials(db) -> list[tuple[str, int]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT g.label, t.valid FROM trials t JOIN targets g ON g.id = t.target_id"
        ).fetchall()


@pytest.mark.parametrize(
    ("failures", "stops"),
    [
        ({"a": "memtier exited 1: bad option", "b": "memtier exited 1: bad option"}, True),
        ({"a": "memtier exited 1: bad option", "b": "memtier exited 1: other words"}, False),
        ({"b": "memtier exited 1: bad option"}, False),
    ],
)
def test_a_load_generator_failing_alike_on_every_version_stops_the_run(
    tmp_path, redis_server, failures, stops
):
    model = fakebench.Model(loadgen_failure=failures)
    db = tmp_path / "r.db"
    proc = cli_in_process(
        "run", "--versions", f"a=bin:{redis_server},b=bin:{redis_server}", *FAST,
        "--db", str(db), measuring=model,
    )  # fmt: skip
    trials = _trials(db)
    if stops:
        assert proc.returncode == 3, proc.stderr
        assert proc.stderr.strip().splitlines()[-1] == (
            "regtrack: error: the load generator failed the same way on every version, so no "
            "trial can be measured: memtier exited 1: bad option. Fix it and start a new run "
            "(run 1 keeps the failed trials)"
        )
        assert sorted(trials) == [("a", 0), ("b", 0)], "each version's first visit, stored"
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT status FROM runs").fetchone() == ("failed",)
    else:
        assert proc.returncode == 0, proc.stderr
        assert len(trials) == 2 * 4


@pytest.mark.slow
def test_a_driver_that_fails_on_every_version_ends_the_run_after_one_trial_each(
    tmp_path, redis_server
):
    """A real --driver program that exits at once: one trial per version, then one line."""
    db = tmp_path / "r.db"
    command = f"{sys.executable} -c 'import sys; sys.exit(\"no module named tasks\")'"
    proc = cli_in_process(
        "run", "--versions", f"a=bin:{redis_server},b=bin:{redis_server}", "--driver", command,
        "--repetitions", "3", "--db", str(db), "--no-report",
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "failed the same way on every version" in last
    assert "the driver exited with code 1: no module named tasks" in last
    assert sorted(_trials(db)) == [("a", 0), ("b", 0)]
