"""regtrack ci against real builds: a known regression fails the job, A/A does not."""

from __future__ import annotations

import json
import sqlite3

import pytest

from regtrack.store import Store
from tests.conftest import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("redis_benchmark_bin")]

INSTR = [
    "--metric", "instructions", "--pipelines", "10", "--repetitions", "3",
    "--instruction-requests", "60000", "--keys", "10000",
]  # fmt: skip
TPUT = ["--pipelines", "10", "--repetitions", "3", "--duration", "1", "--warmup", "0.3"]


def test_a_known_regression_fails_the_job_with_a_summary(tmp_path, slow_repo, env):
    repo, branch = slow_repo
    summary, records, step = tmp_path / "s.md", tmp_path / "r.json", tmp_path / "step.md"
    proc = run_cli(
        "ci", "--baseline", "7.0.15", "--candidate", branch, "--source-repo", str(repo),
        *INSTR, "--db", str(tmp_path / "r.db"), "--summary", str(summary),
        "--json", str(records),
        env={**env, "GITHUB_STEP_SUMMARY": str(step)}, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    text = summary.read_text()
    assert text.startswith("## regtrack: ❌ Regression")
    assert f"Candidate `{branch}` vs baseline `7.0.15`" in text
    assert "**instructions_per_op** at pipeline=10" in text
    assert step.read_text() == text, "the GitHub step summary gets the same text"
    data = json.loads(records.read_text())
    assert data["outcome"] == "regression"
    (rec,) = [r for r in data["records"] if r["metric"] == "instructions_per_op"]
    # A trial whose two callgrind windows disagree (a loaded machine changes how requests
    # batch per event-loop turn) is flagged and left out: at most one of three here.
    assert rec["verdict"] == "regression" and rec["n_valid"] >= 2
    # 25 loop iterations are ~150 instructions on ~3,600 per GET: about +4%.
    assert 0 < rec["ci_low_pct"] <= rec["change_pct"] <= rec["ci_high_pct"]
    assert 2.5 < rec["change_pct"] < 6


def test_an_a_a_comparison_does_not_fail(tmp_path, offline_redis, env):
    proc = run_cli(
        "ci", "--baseline", "7.0.15", "--candidate", "7.0.15", "--source-repo",
        str(offline_redis), *INSTR, "--db", str(tmp_path / "r.db"),
        "--json", str(tmp_path / "r.json"), env=env, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["outcome"] in ("no regression", "inconclusive")
    assert [r["candidate"] for r in data["records"]][:1] == ["candidate"]
    assert "## regtrack: " in proc.stdout


def test_stored_baseline_needs_a_matching_machine(tmp_path, redis_server, monkeypatch):
    # This test is about machine fingerprints, not noise: a busy runner must not turn
    # every trial invalid (contended, client-bound) and leave nothing to compare.
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "regtrack.toml").write_text(
        "[run]\ncontention_limit_pct = 100\nclient_bound_cpu_pct = 100\n"
    )
    monkeypatch.setenv("REGTRACK_CONFIG_DIR", str(configs))
    db = tmp_path / "r.db"
    first = run_cli("run", "--versions", f"shipped=bin:{redis_server}", *TPUT, "--db", str(db))
    assert first.returncode == 0, first.stderr
    saved = run_cli("baseline", "save", "prod", "--run", "1", "--db", str(db))
    assert saved.returncode == 0 and "baseline 'prod' = shipped of run 1" in saved.stdout
    assert "prod" in run_cli("baseline", "list", "--db", str(db)).stdout

    ok = run_cli(
        "ci", "--baseline-run", "prod", "--candidate", f"new=bin:{redis_server}", *TPUT,
        "--db", str(db), "--json", str(tmp_path / "r.json"),
    )  # fmt: skip
    assert ok.returncode in (0, 1), ok.stderr  # a verdict, whichever the noise allows
    data = json.loads((tmp_path / "r.json").read_text())
    (rec,) = [r for r in data["records"] if r["metric"] == "throughput"]
    assert rec["method"] == "welch-t" and rec["baseline"] == "shipped"

    # Fault: the stored run says it was measured on a different kernel.
    conn = sqlite3.connect(db)
    env_json = json.loads(conn.execute("SELECT environment FROM runs WHERE id = 1").fetchone()[0])
    env_json["kernel"] = "0.0.0-elsewhere"
    conn.execute("UPDATE runs SET environment = ? WHERE id = 1", (json.dumps(env_json),))
    conn.commit()
    refused = run_cli(
        "ci", "--baseline-run", "prod", "--candidate", f"new=bin:{redis_server}", *TPUT,
        "--db", str(db),
    )  # fmt: skip
    assert refused.returncode == 2
    assert "measured on another machine (kernel 0.0.0-elsewhere" in refused.stderr
    runs_before = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    forced = run_cli(
        "ci", "--baseline-run", "prod", "--candidate", f"new=bin:{redis_server}", *TPUT,
        "--db", str(db), "--force",
    )  # fmt: skip
    assert forced.returncode in (0, 1), forced.stderr
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == runs_before + 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give exactly one of --baseline SPEC"),
        (["--baseline", "bin:/x", "--baseline-run", "b"], "give exactly one of"),
        (["--baseline-run", "nope"], "no baseline named 'nope'"),
        (["--baseline", "bin:/nonexistent", "--threshold", "0"], "--threshold 0"),
    ],
)
def test_ci_bad_usage_is_exit_2(tmp_path, redis_server, args, message):
    db = tmp_path / "r.db"
    Store.open(db).close()  # an empty regtrack database
    proc = run_cli("ci", "--candidate", f"bin:{redis_server}", *args, "--db", str(db))
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_compare_json_carries_intervals_and_verdicts(tmp_path, redis_server):
    db = tmp_path / "r.db"
    proc = run_cli(
        "run", "--versions", f"a=bin:{redis_server},b=bin:{redis_server}", *TPUT,
        "--db", str(db),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(run_cli("compare", "--db", str(db), "--format", "json").stdout)
    (rec,) = [r for r in rows if r["metric"] == "throughput"]
    assert rec["verdict"] in ("no change", "inconclusive", "regression", "improvement")
    assert rec["n_valid"] <= 3 and rec["method"] in ("welch-t", None)
    if rec["n_valid"] >= 2:
        assert rec["ci_low_pct"] <= rec["change_pct"] <= rec["ci_high_pct"]
    assert "ci_low_pct" in rec and "ci_high_pct" in rec
