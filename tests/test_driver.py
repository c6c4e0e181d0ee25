"""--driver: a user's own producer/worker program against each version, its JSON lines
read, the server's work per task measured (docs/drivers.md)."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from regtrack.bench.loadgen import driver
from tests.conftest import cli_in_process, run_cli

TINY = Path(__file__).parent / "fixtures" / "tiny_driver.py"


def test_the_json_lines_protocol_reads_tasks_latencies_and_the_span_and_skips_the_rest():
    lines = [
        "starting worker...",
        json.dumps({"event": "task", "latency_ms": 2.5}),
        json.dumps({"event": "task", "enqueued_at": 100.0, "done_at": 100.004}),
        json.dumps({"event": "task", "enqueued_at": 99.5, "done_at": 101.0}),
        "{not json",
        json.dumps(["event", "task"]),
        '{"event": "task", "latency_ms": NaN}',
        json.dumps({"event": "task", "latency_ms": True}),
        json.dumps({"event": "done", "tasks": 3, "seconds": 1.5}),
    ]
    report = driver.read_lines("\n".join(lines))
    assert report.tasks == 5 and report.done_line and report.seconds == 1.5
    assert report.latencies_ms == pytest.approx([2.5, 4.0, 1500.0])
    assert report.span_s == pytest.approx(1.5)
    assert driver.read_lines(json.dumps({"event": "done", "tasks": 40})).tasks == 40


def test_a_driver_run_measures_tasks_and_the_servers_work_per_task(tmp_path, redis_server):
    db = tmp_path / "d.db"
    command = f"{sys.executable} {TINY} --tasks 1200"
    proc = run_cli(
        "run", "--versions", f"bin:{redis_server}", "--driver", command, "--repetitions", "1",
        "--db", str(db), "--no-report",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "your --driver program sets the pace" in proc.stderr
    row = (
        sqlite3.connect(db)
        .execute(
            "SELECT mode, requests, ops_per_sec, server_calls, lat_p50_ms, lat_p99_ms, "
            "server_stats FROM trials"
        )
        .fetchone()
    )
    mode, requests, rate, calls, p50, p99, stats = row
    assert mode == "tasks" and requests == 1200 and rate > 0
    # one LPUSH and one BRPOP per task, and a few commands of redis-py's connections
    assert 2.0 <= calls / requests <= 2.1
    assert json.loads(stats)["server_cpu_s"] > 0 and 0 < p50 <= p99
    shown = run_cli("compare", "--db", str(db), "--run", "1").stdout
    for title in ("tasks_per_sec (tasks/s", "server_cpu_per_task (us/task", "task_p99 (ms"):
        assert title in shown
    with sqlite3.connect(db) as conn:  # as if it had been stopped before its last trial
        conn.execute("UPDATE runs SET status = 'interrupted'")
        for table in ("command_stats", "trial_reasons", "trials"):
            conn.execute(f"DELETE FROM {table}")
    resumed = cli_in_process("run", "--resume", "1", "--db", str(db))
    assert resumed.returncode == 2 and "would run a command read from the database" in (
        resumed.stderr
    )


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--driver", "no-such-program-here --tasks 3"], "'no-such-program-here' is not a program"),
        (["--driver", "python3 w.py", "--rate", "100"], "--rate does not apply to --driver"),
        (["--driver", "'unbalanced"], "No closing quotation"),
    ],
)
def test_a_bad_driver_is_one_line_and_exit_2_before_anything_runs(redis_server, extra, words):
    proc = cli_in_process("run", "--versions", f"bin:{redis_server}", *extra)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert words in proc.stderr


def test_a_driver_run_counts_the_servers_instructions_per_task(tmp_path, redis_server):
    """Under callgrind the program runs three times (a warm-up, two counted windows), each
    from an emptied database; instructions divide by the tasks it reported."""
    db = tmp_path / "i.db"
    command = f"{sys.executable} {TINY} --tasks 1500 --enqueue-first"
    proc = run_cli(
        "run", "--versions", f"bin:{redis_server}", "--driver", command, "--repetitions", "1",
        "--metric", "instructions", "--db", str(db), "--no-report",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    mode, valid, requests, calls, per_task, apart = (
        sqlite3.connect(db)
        .execute(
            "SELECT mode, valid, requests, server_calls, instructions_per_op,"
            " instructions_repeat_pct FROM trials"
        )
        .fetchone()
    )
    assert mode == "instructions" and valid == 1, proc.stderr
    assert requests == 2 * 1500 and calls == 2 * 1500  # both windows' tasks, each counted
    # an LPUSH and a BRPOP that finds its task: thousands of instructions each, not millions
    assert 2_000 < per_task < 100_000 and apart < 0.5
    shown = run_cli("compare", "--db", str(db), "--run", "1").stdout
    assert "instructions" in shown


def test_the_rq_example_driver_runs_the_real_library_against_each_version(tmp_path, redis_server):
    """examples/drivers/rq_driver.py: RQ's own producer and SimpleWorker under --driver."""
    db = tmp_path / "rq.db"
    example = Path(__file__).parent.parent / "examples" / "drivers" / "rq_driver.py"
    proc = run_cli(
        "run", "--versions", f"bin:{redis_server}", "--driver",
        f"{sys.executable} {example} --tasks 300", "--repetitions", "1", "--db", str(db),
        "--no-report",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    requests, calls, valid = (
        sqlite3.connect(db).execute("SELECT requests, server_calls, valid FROM trials").fetchone()
    )
    # RQ 3.0 sends 65 commands per job (benchmarks/results/library_lifecycles.md), and its
    # worker's registration and clean-up a few dozen more over the whole run
    assert requests == 300 and valid == 1
    assert 65 <= calls / requests <= 70, calls / requests
