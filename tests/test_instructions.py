"""Instructions per operation under callgrind, with real servers and redis-benchmark."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3

import pytest

from regtrack.analysis import comparison
from regtrack.core.records import InvalidReason
from regtrack.results import loaded
from regtrack.results.store import Store
from tests.conftest import (
    cli_in_process,
    finish,
    our_processes,
    run_cli,
    settings_dir,
    start_cli,
    wait_for_trials,
)
from tests.reasons import codes, has_code, stored_reasons

pytestmark = pytest.mark.usefixtures("redis_benchmark_bin")

INSTR = ["--metric", "instructions", "--pipelines", "10", "--warmup", "0.2", "--keys", "2000"]


@pytest.fixture(autouse=True)
def valgrind():
    if not shutil.which("valgrind"):
        pytest.skip("valgrind is not installed (apt-get install valgrind)")


def test_instructions_per_op_function_costs_and_syscalls_are_stored(tmp_path, redis_server):
    db = tmp_path / "r.db"
    proc = run_cli(
        "run",
        "--versions",
        f"a=bin:{redis_server},b=bin:{redis_server}",
        *INSTR,
        "--repetitions",
        "2",
        "--instruction-requests",
        "20000",
        "--no-report",
        "--db",
        str(db),
    )
    assert proc.returncode == 0, proc.stderr
    assert "instructions_per_op (Ir/op, lower is better)" in proc.stdout
    assert "largest spread between server processes" in proc.stdout
    conn = sqlite3.connect(db)
    trials = conn.execute(
        "SELECT mode, instructions, instructions_per_op, server_calls, syscalls_read,"
        " syscalls_write, id FROM trials"
    ).fetchall()
    assert len(trials) == 4
    for mode, instr, per_op, calls, sysr, sysw, trial_id in trials:
        assert mode == "instructions"
        assert calls >= 20000
        assert per_op == pytest.approx(instr / calls)
        assert 500 < per_op < 100_000
        assert sysr > 0 and sysw > 0
        total = conn.execute(
            "SELECT SUM(exclusive) FROM function_costs WHERE trial_id = ?", (trial_id,)
        ).fetchone()[0]
        assert total == instr, "per-function exclusive costs add up to the total"

    records = json.loads(
        cli_in_process(
            "compare", "--db", str(db), "--format", "json", "--show", "instructions_per_op"
        ).stdout
    )["records"]
    (record,) = records
    assert record["metric"] == "instructions_per_op" and record["higher_is_better"] is False
    assert record["spread_pct_baseline"] is not None
    # The same binary twice: an A/A comparison, so the count barely moves.
    assert abs(record["change_pct"]) < 3

    explained = cli_in_process(
        "explain", "--db", str(db), "--baseline", "a", "--candidate", "b", "--format", "json"
    )
    assert explained.returncode == 0, explained.stderr
    (table,) = json.loads(explained.stdout)
    assert table["point"] == "pipeline=10"
    diffs = sum(f["diff_per_op"] for f in table["functions"])
    assert diffs == pytest.approx(table["diff_total"], abs=1e-6), "rows reconcile to the total"
    text = cli_in_process("explain", "--db", str(db), "--baseline", "a", "--candidate", "b").stdout
    assert "share of difference" in text and "total" in text


def test_throughput_trials_record_syscalls_too(tmp_path, redis_server):
    db = tmp_path / "r.db"
    proc = run_cli("run", "--versions", f"bin:{redis_server}", "--pipelines", "1",
                   "--repetitions", "1", "--duration", "0.5", "--warmup", "0.2", "--keys", "1000",
                   "--db", str(db))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    sysr, sysw, calls = (
        sqlite3.connect(db)
        .execute("SELECT syscalls_read, syscalls_write, server_calls FROM trials")
        .fetchone()
    )
    # Pipeline 1: about one read and one write per request, batched over 50 connections.
    assert 0 < sysr <= calls * 1.1 and 0 < sysw <= calls * 1.1
    assert "syscalls_per_op" in cli_in_process("compare", "--db", str(db)).stdout


def test_missing_valgrind_is_one_line_and_exit_3(tmp_path, redis_server):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("taskset", "redis-benchmark", "git"):
        (bindir / tool).symlink_to(shutil.which(tool))
    proc = cli_in_process(
        "run", "--versions", f"bin:{redis_server}", "--metric", "instructions",
        "--db", str(tmp_path / "r.db"), env={"PATH": str(bindir)},
    )  # fmt: skip
    assert proc.returncode == 3
    lines = proc.stderr.strip().splitlines()
    assert (
        len(lines) == 1 and "needs valgrind" in lines[0] and "apt-get install valgrind" in lines[0]
    )
    assert not (tmp_path / "r.db").exists()


def test_a_server_killed_under_callgrind_ends_its_visit_and_keeps_trials(tmp_path, redis_server):
    db = tmp_path / "r.db"
    proc = start_cli(
        "run", "--versions", f"bin:{redis_server}", "--metric", "instructions",
        "--pipelines", "1,5,10,15", "--repetitions", "1", "--instruction-requests", "20000",
        "--warmup", "0.2", "--keys", "1000", "--db", str(db),
        env={"PYTHONFAULTHANDLER": "1"},
    )  # fmt: skip
    measured = wait_for_trials(db, 1)
    assert measured >= 1
    victims = [p.split(":")[0] for p in our_processes() if "valgrind" in p or "callgrind" in p]
    assert victims, our_processes()
    for pid in victims:
        os.kill(int(pid), signal.SIGKILL)
    _, err = finish(proc, 120)
    assert proc.returncode == 3, err
    assert "exited" in err and "Traceback" not in err
    assert "run 1 is incomplete" in err.strip().splitlines()[-1]
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT status FROM runs").fetchone()[0] == "incomplete"
    assert conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0] >= 2
    died = conn.execute(f"SELECT COUNT(*) FROM trials WHERE {has_code(InvalidReason.SERVER_DIED)}")
    assert died.fetchone()[0] == 1


def test_windows_that_disagree_make_the_trial_not_repeatable(tmp_path, redis_server):
    """With a limit no real measurement meets, every trial is flagged, none is compared."""
    configs = settings_dir(tmp_path, "[run]\nrepeatability_pct = 0.000001\n")
    db = tmp_path / "r.db"
    proc = run_cli(
        "run",
        "--versions",
        f"a=bin:{redis_server},b=bin:{redis_server}",
        *INSTR,
        "--repetitions",
        "1",
        "--instruction-requests",
        "10000",
        "--db",
        str(db),
        env={"REGTRACK_CONFIG_DIR": str(configs)},
    )
    assert proc.returncode == 0, proc.stderr
    rows = (
        sqlite3.connect(db).execute("SELECT valid, instructions_repeat_pct FROM trials").fetchall()
    )
    reasons = stored_reasons(db)
    assert rows and not any(valid for valid, _ in rows)
    assert all(InvalidReason.NOT_REPEATABLE in codes(r) for r in reasons), reasons
    assert all(pct is not None and pct > 0 for _, pct in rows)
    store = Store.open(db, create=False)
    result = comparison.compare(loaded.run(store, 1), "a")
    (record,) = result.points_of("instructions_per_op")
    assert record.trusted is False
    assert any("not repeatable" in p for p in record.problems)
    assert "not repeatable" in proc.stdout and " !" in proc.stdout


@pytest.mark.parametrize(
    ("busy_s", "per_op", "valid"),
    [
        (9.0, 3_500, True),  # saturated: 1 idle s against 70M instructions
        (3.0, 3_500, True),  # a slow client: 7 idle s at 5,000/s are 0.05% of 70M
        (0.3, 100, False),  # 9.7 idle s against 2M: up to 2.4% may be time-driven
    ],
)
def test_a_window_is_judged_by_what_its_idle_time_could_have_counted(busy_s, per_op, valid):
    """The time-driven share of an instruction count is bounded by the idle seconds at
    protocol.TIME_DRIVEN_PER_S (measured: benchmarks/idle_instructions.py), not by a CPU
    percentage: a server that waits on a slow client counts its operations as a busy
    one does (serverCron is not counted, hz is 1)."""
    from types import SimpleNamespace

    from regtrack.bench.callgrind import protocol
    from regtrack.bench.callgrind.profile import Profile
    from regtrack.bench.loadgen.base import LoadgenResult
    from regtrack.core.records import TrialRecord
    from regtrack.core.settings import RunSettings

    ops, wall_s = 10_000, 10.0
    profiles = [Profile(events=["Ir"], totals={"Ir": ops * per_op}) for _ in range(2)]
    windows = [(LoadgenResult([], 0, wall_s / 2, 0.0, ops), busy_s / 2, ops) for _ in range(2)]
    record = TrialRecord(0, 0, "a", "w", "p", {}, "now", mode="instructions", valid=True)
    ctx = SimpleNamespace(settings=RunSettings())
    protocol._counted(ctx, record, profiles, windows)  # type: ignore[arg-type]
    assert record.instructions_per_op == per_op and record.instructions_repeat_pct == 0
    assert record.valid is valid, record.reason_text
    assert valid or "idle seconds may have counted up to 2.42%" in record.reason_text
