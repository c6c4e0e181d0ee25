"""The real command line against real servers and the real redis-benchmark."""

from __future__ import annotations

import csv
import io
import json
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from regtrack.core.records import InvalidReason
from tests.conftest import (
    SHORT_RUN,
    cli_in_process,
    our_processes,
    quiet_configs,
    run_cli,
    settings_dir,
    start_cli,
    wait_for_trials,
)
from tests.reasons import codes, stored_reasons

pytestmark = pytest.mark.usefixtures("redis_benchmark_bin")


def _one_line_error(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert "Traceback" not in proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("regtrack: error: ")
    return lines[0]


def test_two_labels_on_one_binary_end_to_end(tmp_path, redis_server):
    """Separate trials (test_paired has the default, paired in time): latency too.

    Throughput is judged at 50%, not the 5% default. Two blocks of separate 1-second
    trials on this VM have an sd near 10% (docs/methodology.md), so at 5% a sound
    interval calls one binary changed at its alpha: a CI run did (`2 <= 2 and
    'regression'`). A 2-block mean 50% down is about 6 sd out: no sound method gets there.
    """
    db = tmp_path / "r.db"
    specs = f"a=bin:{redis_server},b=bin:{redis_server}"
    env = {"REGTRACK_CONFIG_DIR": str(settings_dir(tmp_path, "[verdict]\nthroughput_pct = 50\n"))}
    proc = run_cli(
        "run",
        "--versions",
        specs,
        "--pipelines",
        "1,10",
        "--repetitions",
        "2",
        "--pairing",
        "separate",
        "--db",
        str(db),
        *SHORT_RUN,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "% change b vs a" in proc.stdout
    assert f"Results: {db} (run 1)" in proc.stdout

    compared = cli_in_process("compare", "--db", str(db), "--format", "json", env=env)
    rows = json.loads(compared.stdout)["records"]
    throughput = [r for r in rows if r["metric"] == "throughput"]
    assert sorted((r["point"], r["candidate"]) for r in throughput) == [
        ("pipeline=1", "b"),
        ("pipeline=10", "b"),
    ]
    for r in throughput:
        assert r["baseline"] == "a" and r["workload"] == "get-pipeline"
        assert r["baseline_value"] > 1000 and r["candidate_value"] > 1000
        assert r["n_valid"] <= 2 and r["verdict"] in ("inconclusive", "no change")
        assert r["threshold_pct"] == 50
        if r["ci_low_pct"] is not None:
            assert r["ci_low_pct"] <= r["change_pct"] <= r["ci_high_pct"]
    assert {r["metric"] for r in rows} == {
        "throughput",
        "latency_p50",
        "latency_p99",
        "syscalls_per_op",
    }

    conn = sqlite3.connect(db)
    status, loadgen, env = conn.execute("SELECT status, loadgen, environment FROM runs").fetchone()
    assert status == "complete"
    assert json.loads(loadgen)["name"] == "redis-benchmark"
    env = json.loads(env)
    assert env["server_cpus"] != env["client_cpus"] and env["cpu_model"]
    versions = conn.execute("SELECT label, redis_version FROM targets ORDER BY position").fetchall()
    assert [v[0] for v in versions] == ["a", "b"] and all(v[1] for v in versions)
    trials = conn.execute(
        "SELECT t.repetition, g.label, t.point, t.ops_per_sec, t.requests, t.server_calls,"
        " t.keyspace_misses, t.client_cpu_pct, t.server_cpu_pct, t.valid,"
        " (SELECT COUNT(*) FROM trial_reasons r WHERE r.trial_id = t.id),"
        " t.raw_output FROM trials t JOIN targets g ON g.id = t.target_id ORDER BY t.seq"
    ).fetchall()
    assert len(trials) == 2 * 2 * 2
    # Interleaved: rep 1 visits a then b, rep 2 visits b then a, points reversed.
    assert [(t[0], t[1], t[2]) for t in trials[:4]] == [
        (0, "a", "pipeline=1"),
        (0, "a", "pipeline=10"),
        (0, "b", "pipeline=1"),
        (0, "b", "pipeline=10"),
    ]
    assert [(t[1], t[2]) for t in trials[4:6]] == [("b", "pipeline=10"), ("b", "pipeline=1")]
    for t in trials:
        assert t[3] > 0 and t[4] > 0
        assert t[5] >= t[4], "the server must have seen every GET the client claims"
        assert t[6] == 0, "populate must make every GET hit"
        assert t[7] > 0 and t[8] > 0
        assert bool(t[9]) == (t[10] == 0)
        assert '"test","rps"' in t[11]


def test_compare_formats(tmp_path, redis_server):
    db = tmp_path / "r.db"
    proc = run_cli(
        "run",
        "--versions",
        f"old=bin:{redis_server},new=bin:{redis_server}",
        "--pipelines",
        "5",
        "--repetitions",
        "1",
        "--db",
        str(db),
        *SHORT_RUN,
    )
    assert proc.returncode == 0, proc.stderr
    md = cli_in_process("compare", "--db", str(db), "--format", "markdown", "--show", "throughput")
    assert "| point | old ops/s | new ops/s | % change new vs old |" in md.stdout
    assert "| pipeline=5 |" in md.stdout
    assert re.search(r"\| pipeline=5 \| [\d,]+ \(server \d+%\)", md.stdout), md.stdout
    csv_out = cli_in_process("compare", "--db", str(db), "--format", "csv", "--baseline", "new")
    rows = list(csv.DictReader(io.StringIO(csv_out.stdout)))
    assert {(r["baseline"], r["candidate"]) for r in rows} == {("new", "old")}
    assert {r["point"] for r in rows} >= {"pooled"} and float(rows[0]["candidate_value"]) > 0
    bad = cli_in_process("compare", "--db", str(db), "--baseline", "nope")
    assert bad.returncode == 2
    assert "is not a version of run 1" in _one_line_error(bad)
    listing = cli_in_process("compare", "--db", str(db), "--list")
    assert "run 1" in listing.stdout and "complete" in listing.stdout


def test_client_bound_trials_are_flagged_and_marked_in_the_table(tmp_path, redis_server):
    configs = settings_dir(tmp_path, "[run]\nclient_bound_cpu_pct = 1\n")
    db = tmp_path / "r.db"
    proc = run_cli(
        "run",
        "--versions",
        f"bin:{redis_server}",
        "--pipelines",
        "1",
        "--repetitions",
        "1",
        "--db",
        str(db),
        *SHORT_RUN,
        env={"REGTRACK_CONFIG_DIR": str(configs)},
    )
    assert proc.returncode == 0, proc.stderr
    (valid,) = sqlite3.connect(db).execute("SELECT valid FROM trials").fetchone()
    assert valid == 0 and InvalidReason.CLIENT_BOUND in codes(stored_reasons(db)[0])
    assert " !" in proc.stdout and "client-bound" in proc.stdout


def test_a_trial_where_neither_side_is_saturated_is_flagged(tmp_path, redis_server):
    """One connection at pipeline 1: every GET waits for its round trip, so neither the
    server nor the load generator is busy; such a trial is not the server's capacity."""
    env = quiet_configs(tmp_path)  # not about noise: only the server-bound check acts
    db = tmp_path / "r.db"
    proc = run_cli(
        "run", "--versions", f"bin:{redis_server}", "--pipelines", "1", "--clients", "1",
        "--repetitions", "1", "--db", str(db), "--no-report", *SHORT_RUN,
        env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    valid, server, client = (
        sqlite3.connect(db)
        .execute("SELECT valid, server_cpu_pct, client_cpu_pct FROM trials")
        .fetchone()
    )
    assert server < 85 and client < 100, (server, client)
    (reasons,) = stored_reasons(db)
    (bound,) = [r for r in reasons if r.code is InvalidReason.NOT_SERVER_BOUND]
    assert valid == 0 and bound.detail.startswith(f"server busy {server:.0f}%"), reasons


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--versions", "bin:/nonexistent/redis-server"], 2, "does not exist"),
        (
            ["--versions", "bin:{server}", "--server-cpus", "0", "--client-cpus", "0"],
            2,
            "overlap on CPU 0",
        ),
        (["--versions", "bin:{server}", "--server-cpus", "x"], 2, "is not a CPU list"),
        (["--versions", "bin:{server}", "--client-cpus", "999"], 2, "does not exist"),
        (
            ["--versions", "bin:{server}", "--loadgen-bin", "/nonexistent/rb"],
            2,
            "load generator /nonexistent/rb does not exist",
        ),
        (["--versions", "bin:{server}", "--pipelines", "0,1"], 2, "positive numbers"),
        (["--versions", "bin:{server}", "--workload", "nope"], 2, "unknown workload 'nope'"),
        (["--versions", "bin:{server}", "--duration", "-1"], 2, "'--duration': '-1'"),
        (["--versions", "a=bin:{server},a=bin:{server}"], 2, "used twice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, redis_server, args, code, message):
    db = tmp_path / "r.db"
    args = [a.replace("{server}", redis_server) for a in args]
    proc = cli_in_process("run", *SHORT_RUN, *args, "--db", str(db))
    assert proc.returncode == code
    assert message in _one_line_error(proc)
    assert not db.exists(), "bad input must be caught before anything is recorded"


def test_missing_redis_benchmark_is_exit_3(tmp_path, redis_server):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "taskset").symlink_to("/usr/bin/taskset")
    proc = cli_in_process(
        "run", "--versions", f"bin:{redis_server}", "--db", str(tmp_path / "r.db"),
        env={"PATH": str(bindir)},
    )  # fmt: skip
    assert proc.returncode == 3
    assert "redis-benchmark is not installed" in _one_line_error(proc)


def test_unreadable_database_is_exit_2(tmp_path):
    db = tmp_path / "r.db"
    db.write_bytes(b"garbage" * 1000)
    proc = cli_in_process("compare", "--db", str(db))
    assert proc.returncode == 2
    assert "cannot use database" in _one_line_error(proc)
    missing = cli_in_process("compare", "--db", str(tmp_path / "none.db"))
    assert missing.returncode == 2
    assert "does not exist" in _one_line_error(missing)


def test_a_server_that_will_not_start_is_exit_3_and_recorded(tmp_path):
    fake = tmp_path / "redis-server"
    fake.write_text("#!/bin/sh\necho 'fatal: cannot start' >&2\nexit 1\n")
    fake.chmod(0o755)
    db = tmp_path / "r.db"
    proc = run_cli("run", "--versions", f"bin:{fake}", "--db", str(db), *SHORT_RUN)
    assert proc.returncode == 3
    assert "exited with code 1: fatal: cannot start" in proc.stderr
    assert "Traceback" not in proc.stderr
    status, detail = (
        sqlite3.connect(db).execute("SELECT status, status_detail FROM runs").fetchone()
    )
    assert status == "failed" and "cannot start" in detail


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_keeps_measured_trials_and_leaves_nothing(tmp_path, redis_server, sig):
    db = tmp_path / "r.db"
    proc = start_cli(
        "run", "--versions", f"a=bin:{redis_server},b=bin:{redis_server}",
        "--pipelines", "1,5,10", "--repetitions", "3", "--db", str(db), *SHORT_RUN,
    )  # fmt: skip
    measured = wait_for_trials(db, 2, timeout=60)
    assert measured >= 2, "the run never stored a trial"
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT status FROM runs").fetchone()[0] == "interrupted"
    kept = conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
    assert measured <= kept < 18
    assert not our_processes()


def test_a_point_cut_short_keeps_its_windows_and_resume_measures_it_again(tmp_path, redis_server):
    """Ctrl-C in the middle of a paired point stores the point's whole groups of windows
    as interrupted trials (never compared), says what they hold, and `--resume` measures
    the point again, replacing them in the transaction that stores the whole ones. The
    signal lands 2.5 s after the first point is stored: the second point's loads start
    and warm up in about 1.5 s, then measure for 4 s (2 s per server)."""
    db = tmp_path / "r.db"
    proc = start_cli(
        "run", "--versions", f"a=bin:{redis_server},b=bin:{redis_server}",
        "--pipelines", "1,5", "--repetitions", "1", "--loadgen", "redis-benchmark",
        "--db", str(db), *SHORT_RUN, "--duration", "2", "--no-report",
    )  # fmt: skip
    assert wait_for_trials(db, 2, timeout=60) == 2, "the first point was never stored"
    time.sleep(2.5)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "regtrack: interrupted by SIGINT; results measured so far are kept" in err
    assert "Traceback" not in err
    (note,) = [line for line in err.splitlines() if "pipeline=5: its whole groups" in line]
    assert "regtrack run --resume 1 measures the point again" in note, note
    conn = sqlite3.connect(db)
    query = (
        "SELECT t.point, t.requests, t.wall_s, EXISTS (SELECT 1 FROM trial_reasons r"
        " WHERE r.trial_id = t.id AND r.code = 'interrupted') FROM trials t ORDER BY t.point, t.seq"
    )
    rows = conn.execute(query).fetchall()
    assert [(p, cut) for p, *_, cut in rows] == [
        ("pipeline=1", 0), ("pipeline=1", 0), ("pipeline=5", 1), ("pipeline=5", 1),
    ], rows  # fmt: skip
    assert all(requests > 0 and 0 < wall < 2 for _, requests, wall, _ in rows[2:]), rows
    assert not our_processes()

    resumed = run_cli("run", "--resume", "1", "--db", str(db), "--no-report")
    assert resumed.returncode == 0, resumed.stderr
    assert "2 trials to run" in resumed.stderr, resumed.stderr
    rows = conn.execute(query).fetchall()
    assert [(p, cut) for p, *_, cut in rows] == [
        ("pipeline=1", 0), ("pipeline=1", 0), ("pipeline=5", 0), ("pipeline=5", 0),
    ], rows  # fmt: skip
    assert all(wall >= 1.5 for _, _, wall, _ in rows), rows
    assert conn.execute("SELECT status FROM runs").fetchone()[0] == "complete"


def test_python_m_regtrack_and_console_script_agree():
    """`python -m regtrack` (what the tests run) and the installed `regtrack` script
    are one program: same version, same help."""
    script = Path(sys.executable).parent / "regtrack"
    assert script.is_file(), f"no console script next to {sys.executable}"
    for args in (["--version"], ["run", "--help"]):
        module = run_cli(*args)
        console = subprocess.run([str(script), *args], capture_output=True, text=True, timeout=60)
        assert module.returncode == console.returncode == 0, console.stderr
        assert module.stdout == console.stdout
    assert "Exit codes" in console.stdout and "--versions" in console.stdout
