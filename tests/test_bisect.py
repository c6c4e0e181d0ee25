"""`regtrack bisect` on real Redis histories made on purpose (tests/histories.py): it names
the commit that added a spin loop to GET, measures few commits, skips one that does not
build, says when a range holds more than one step, finds every step with --all-steps,
refuses ends that do not differ, and resumes after Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, TEST_CACHE, run_cli
from tests.histories import ONE_STEP, UP_DOWN_UP, make_history
from tests.test_report import Page
from tests.test_report import browser as browser  # the Chromium fixture

pytestmark = pytest.mark.slow

# Instructions per GET at pipeline 10 are deterministic with fixed seeds: few requests and
# two repetitions decide a 1% threshold. libc malloc skips building jemalloc per commit.
FAST = [
    "--point", "pipeline=10", "--keys", "1000", "--instruction-requests", "40000",
    "--repetitions", "2", "--build-flags", "MALLOC=libc",
]  # fmt: skip


@pytest.fixture(scope="module")
def one_step(offline_redis) -> tuple[str, list[str]]:
    repo = TEST_CACHE / "history-redis"
    return str(repo), make_history(offline_redis, repo, "7.0.15", "one-step", ONE_STEP)


def _bisect(*args: str, repo: str, db, env, timeout: float = 2400):
    return run_cli(
        "bisect", *args, "--source-repo", repo, *FAST, "--db", str(db), "--no-report",
        env=env, timeout=timeout,
    )  # fmt: skip


def _runs(db) -> list[dict]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT id, status, config FROM runs ORDER BY id").fetchall()
    return [{"id": i, "status": s, "role": json.loads(c)["bisection"]["role"]} for i, s, c in rows]


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
        if db.exists() and any(r["role"] == "step" for r in _runs(db)):
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
    assert step["first_bad"] == commits[9], "the commit that added the spin loop"
    assert step["last_good"] == commits[8]
    assert step["change"]["verdict"] == "regression" and step["change"]["change_pct"] > 3
    measured = answer["result"]["measured_commits"]
    assert commits[0] in measured and commits[-1] in measured
    assert len(measured) <= 7, measured
    assert f"skipped {commits[11][:7]}: it does not build" in resumed.stderr
    assert commits[11] in answer["result"]["skipped"]
    assert "First bad commit: " + commits[9] in resumed.stdout
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


def test_ends_that_do_not_differ_are_refused_with_what_was_measured(tmp_path, one_step, env):
    repo, commits = one_step
    proc = _bisect("--good", commits[0], "--bad", commits[3], repo=repo, db=tmp_path / "r.db",
                   env=env)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "nothing to bisect" in proc.stderr and "measured" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_ref_that_does_not_exist_is_bad_input(tmp_path, one_step, env):
    repo, commits = one_step
    proc = _bisect("--good", "no-such-ref", "--bad", commits[-1], repo=repo,
                   db=tmp_path / "r.db", env=env)  # fmt: skip
    assert proc.returncode == 2
    assert "no-such-ref" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_range_with_three_steps(tmp_path, offline_redis, env):
    repo = TEST_CACHE / "history-redis"
    commits = make_history(offline_redis, repo, "7.0.15", "up-down-up", UP_DOWN_UP)
    db = tmp_path / "r.db"
    plain = _bisect("--good", commits[0], "--bad", commits[-1], repo=str(repo), db=db, env=env)
    assert plain.returncode == 0, plain.stderr
    assert "the range holds more than one step" in plain.stdout
    out = tmp_path / "all.json"
    every = _bisect("--good", commits[0], "--bad", commits[-1], "--all-steps", "--json",
                    str(out), repo=str(repo), db=db, env=env)  # fmt: skip
    assert every.returncode == 0, every.stderr
    steps = json.loads(out.read_text())["result"]["steps"]
    assert [s["first_bad"] for s in steps] == [commits[3], commits[6], commits[9]]
    assert [s["change"]["verdict"] for s in steps] == ["regression", "improvement", "regression"]


def test_a_range_run_draws_the_step_at_the_spin_commit(tmp_path, one_step, env, browser):
    repo, commits = one_step
    db = tmp_path / "r.db"
    proc = run_cli(
        "run", "--versions", f"{commits[0]}..{commits[-1]}", "--every", "2",
        "--metric", "instructions", "--source-repo", repo, "--pipelines", "10",
        *FAST[2:], "--db", str(db), env=env, timeout=2400,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    history = run_cli("history", "--db", str(db), env=env)
    assert history.returncode == 0, history.stderr
    assert f"skipped {commits[11][:7]}" in proc.stderr, "the commit that does not build"
    assert f"between {commits[7][:7]} and {commits[9][:7]}" in history.stdout, history.stdout
    page_file = next(db.parent.glob("history-get-pipeline-*instructions*.html"))
    page = Page(browser, page_file)
    steps = page.page.locator("#commit-steps tbody tr")
    assert steps.count() == 1
    assert steps.first.inner_text().split()[:2] == [commits[7][:12], commits[9][:12]]
    ticks = page.page.locator("#chart-1 .xtick text").all_text_contents()
    assert any(t.startswith(commits[9][:7]) for t in ticks), ticks
    page.shot("history-by-commit")
    page.clean()
