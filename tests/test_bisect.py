"""`regtrack bisect` on a real Redis history made on purpose (tests/histories.py), measured
under callgrind: it names the commit that added a spin loop to GET and the function that
changed, measures few commits, skips one that does not build, and resumes after Ctrl-C.
The search's other answers (more than one step, --all-steps, ends that do not differ,
ranges and their history pages) are test_bisect_flow.py, on fake histories in seconds."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.conftest import BUILD_FLAGS, ROOT, TEST_CACHE, run_cli
from tests.histories import ONE_STEP, make_history

pytestmark = pytest.mark.slow

# Instructions per GET at pipeline 10 are deterministic with fixed seeds: few requests and
# two repetitions decide a 1% threshold.
FAST = [
    "--point", "pipeline=10", "--keys", "1000", "--instruction-requests", "40000",
    "--repetitions", "2", *BUILD_FLAGS,
]  # fmt: skip


@pytest.fixture(scope="module")
def one_step(offline_redis) -> tuple[str, list[str]]:
    repo = TEST_CACHE / "history-redis"
    return str(repo), make_history(offline_redis, repo, "7.0.15", "one-step", ONE_STEP)


def _runs(db) -> list[dict]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT id, status, config FROM runs ORDER BY id").fetchall()
    return [{"id": i, "status": s, "role": json.loads(c)["bisection"]["role"]} for i, s, c in rows]


def _started(db) -> list[dict]:
    """The runs so far; none while the database is still being created (its file exists
    before its tables do)."""
    try:
        return _runs(db)
    except sqlite3.OperationalError:
        return []


# Its command builds what it measures: its own time limit (run_cli's, plus a minute).
@pytest.mark.timeout(2460)
def test_ctrl_c_during_a_step_then_resume_names_the_spin_commit(tmp_path, one_step, env):
    repo, commits = one_step
    db, out = tmp_path / "r.db", tmp_path / "b.json"
    argv = [
        sys.executable, "-m", "regtrack", "bisect", "--good", commits[0], "--bad", commits[-1],
        "--metric", "instructions", "--source-repo", repo, *FAST, "--db", str(db), "--no-report",
        "--server-config", "hz=10",  # a setting, kept by --resume and shown in the answer
    ]  # fmt: skip
    proc = subprocess.Popen(
        argv, cwd=ROOT, env={**os.environ, **env}, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline and proc.poll() is None:
        if db.exists() and any(r["role"] == "step" for r in _started(db)):
            break
        time.sleep(1)
    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    time.sleep(3)  # inside the first step's measurement
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    resumed = run_cli(
        "bisect", "--resume", "--db", str(db), "--json", str(out), "--no-report",
        env=env, timeout=2400,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    answer = json.loads(out.read_text())
    (step,) = answer["result"]["steps"]
    assert step["first_bad"] == commits[5], "the commit that added the spin loop"
    assert step["last_good"] == commits[4]
    assert step["change"]["verdict"] == "regression" and step["change"]["change_pct"] > 3
    measured = answer["result"]["measured_commits"]
    assert commits[0] in measured and commits[-1] in measured
    assert len(measured) == 4, measured
    # The search looks at commit 3 first: skipped before the interrupt, kept by --resume.
    assert f"skipped {commits[3][:7]}: it does not build" in stderr
    assert commits[3] in answer["result"]["skipped"]
    assert "First bad commit: " + commits[5] in resumed.stdout
    assert "getGenericCommand" in resumed.stdout, "the explain table names the function"
    assert "server: hz 10" in resumed.stdout and answer["result"]["server_config"] == {"hz": "10"}
    runs = _runs(db)
    assert [r["role"] for r in runs].count("ends") == 1
    assert [r["role"] for r in runs].count("confirm") == 0, "instructions: no extra run"
    steps = [r for r in runs if r["role"] == "step" and r["status"] == "complete"]
    # Every complete step run is in the log (an undecided commit is measured once more,
    # in a run of its own), and every measured commit but the ends has one.
    logged = [e for e in answer["log"] if e.get("run_id") and e.get("role") != "end"]
    assert {e["run_id"] for e in logged} == {r["id"] for r in steps}
    assert {e["commit"] for e in logged} == set(measured) - {commits[0], commits[-1]}
