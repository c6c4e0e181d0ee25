"""regtrack ci against real builds: a known regression fails the job, A/A does not."""

from __future__ import annotations

import json
import sqlite3

import pytest

from regtrack.analysis.gate import gate
from regtrack.output.ci_summary import ci_headline
from regtrack.results.store import Store
from tests.conftest import quiet_configs, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("redis_benchmark_bin")]

INSTR = [
    "--metric", "instructions", "--pipelines", "10", "--instruction-requests", "60000",
    "--keys", "10000",
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
    # Seeds are matched, so the first look (4 repetitions) decides it.
    assert text.startswith("## regtrack: ❌ Regression after 4 repetitions: instructions per op +")
    assert f"Candidate `{branch}` vs baseline `7.0.15`" in text
    assert "**instructions per op** over pipeline=10 (4 blocks)" in text
    assert step.read_text() == text, "the GitHub step summary gets the same text"
    data = json.loads(records.read_text())
    assert data["outcome"] == "regression" and data["decided"] and data["seeds"] == "fixed"
    (gate,) = data["gate"]
    # 25 loop iterations are ~175 instructions on ~3,560 per GET: about +5%.
    assert gate["verdict"] == "regression" and gate["n_blocks"] == 4
    assert 3.5 < gate["ci_low_pct"] <= gate["change_pct"] <= gate["ci_high_pct"] < 6.5
    (rec,) = [r for r in data["records"] if r["metric"] == "instructions_per_op"]
    assert rec["verdict"] == "regression" and rec["gating"]


def test_an_a_a_comparison_is_decided_no_change(tmp_path, offline_redis, env):
    proc = run_cli(
        "ci", "--baseline", "7.0.15", "--candidate", "7.0.15", "--source-repo",
        str(offline_redis), *INSTR, "--db", str(tmp_path / "r.db"),
        "--json", str(tmp_path / "r.json"), env=env, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("## regtrack: ✅ No regression after 4 repetitions")
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["outcome"] == "no regression" and data["decided"]
    (gate,) = data["gate"]
    # Same build, same seeds: the pairs agree within ~0.05%, far inside the 1% threshold.
    assert gate["verdict"] == "no change"
    assert gate["ci_high_pct"] - gate["ci_low_pct"] < 0.5
    assert [r["candidate"] for r in data["records"]][:1] == ["candidate"]


def test_an_undecided_gate_says_so_first_and_warns(tmp_path, redis_server):
    """Two repetitions cannot bound an interval that stays valid under repeated looks:
    the gate is undecided, says so in its first line, and GitHub gets a warning.

    Quiet settings: one contended trial would leave one complete block and no interval at
    all (seen on a fresh clone), which is another answer (test_a_gate_without_an_estimate_
    says_why)."""
    quiet = quiet_configs(tmp_path)
    args = [
        "ci", "--baseline", f"a=bin:{redis_server}", "--candidate", f"b=bin:{redis_server}",
        *TPUT, "--repetitions", "2", "--max-repetitions", "2", "--metric", "throughput",
        "--db", str(tmp_path / "r.db"), "--json", str(tmp_path / "r.json"), "--no-report",
    ]  # fmt: skip
    proc = run_cli(*args, env={"GITHUB_ACTIONS": "true", **quiet})
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stdout.splitlines()[:2]
    assert first.startswith("::warning title=regtrack: undecided::throughput")
    assert second.startswith("## regtrack: ⚠️ Undecided: no regression found, but the gate")
    assert "(--max-repetitions)" in second and "detectable: ±unbounded" in second
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["outcome"] == "inconclusive" and not data["decided"]
    assert data["stopped"] == "max-repetitions"
    strict = run_cli(*args, "--fail-on-inconclusive", env=quiet)
    assert strict.returncode == 1, strict.stderr


def test_a_gate_without_an_estimate_says_why():
    """One contended trial of two repetitions leaves one complete block: no estimate at
    all. The headline says so and why, not a bare "-" (the record as pooling made it on
    a fresh clone)."""
    record = {
        "metric": "throughput", "verdict": "inconclusive", "gating": True, "n_blocks": 1,
        "change_pct": None, "ci_low_pct": None, "ci_high_pct": None, "mde_pct": None,
    }  # fmt: skip
    decision = gate({"pooled": [record]})
    assert decision["outcome"] == "inconclusive"
    line = ci_headline(decision, {"repetitions": 2, "stopped": "max-repetitions"})
    assert line.endswith(
        "(--max-repetitions): throughput - (no estimate: 1 complete block of valid "
        "trials, 2 needed)"
    ), line
    decision = gate({"pooled": [{**record, "n_blocks": 0}]})
    assert decision["outcome"] == "not measured"
    assert "0 complete blocks of valid trials" in ci_headline(decision, {"repetitions": 2})


def test_blocks_are_added_until_decided_and_a_decided_metric_stops(
    tmp_path, redis_server, monkeypatch
):
    """Instructions decide at the first look (seed-matched pairs agree) and are never
    measured again; throughput, held to a 0.001% guard, usually asks for more blocks, and
    then only throughput is measured in them, until --max-repetitions.

    Usually, not always: two server processes of one binary can differ for real (one
    fresh clone measured b 2-3% slower than a in 4 of 4 blocks), and a 0.001% guard then
    rightly decides at the first look. Either way the rule is checked: a decided metric
    is not measured again, an undecided one is, up to --max-repetitions."""
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "regtrack.toml").write_text(
        "[run]\ncontention_limit_pct = 100\nclient_bound_cpu_pct = 100\n"
        "server_bound_cpu_pct = 0\n"
        "[verdict]\nthroughput_gate_pct = 0.001\n"
    )
    monkeypatch.setenv("REGTRACK_CONFIG_DIR", str(configs))
    db = tmp_path / "r.db"
    proc = run_cli(
        "ci", "--baseline", f"a=bin:{redis_server}", "--candidate", f"b=bin:{redis_server}",
        *TPUT, "--repetitions", "4", "--max-repetitions", "6", "--metric", "both",
        "--instruction-requests", "20000", "--keys", "2000", "--db", str(db),
        "--json", str(tmp_path / "r.json"), "--no-report", timeout=900,
    )  # fmt: skip
    conn = sqlite3.connect(db)
    reps = dict(
        conn.execute("SELECT mode, GROUP_CONCAT(DISTINCT repetition) FROM trials GROUP BY mode")
    )
    assert conn.execute("SELECT status FROM runs").fetchone()[0] == "complete", proc.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    verdicts = {g["metric"]: g["verdict"] for g in data["gate"]}
    assert verdicts["instructions_per_op"] == "no change", proc.stdout
    assert sorted(map(int, reps["instructions"].split(","))) == [0, 1, 2, 3]
    throughput = sorted(map(int, reps["throughput"].split(",")))
    if verdicts["throughput"] == "inconclusive":  # the usual case
        assert proc.returncode == 0, proc.stderr
        assert "undecided after 4 repetitions: measuring 2 more (throughput)" in proc.stderr
        assert throughput == [0, 1, 2, 3, 4, 5]
        assert data["repetitions"] == 6 and data["stopped"] == "max-repetitions"
    else:  # a real difference between the two processes decided the 0.001% guard
        assert verdicts["throughput"] in ("regression", "improvement"), verdicts
        assert proc.returncode == (1 if verdicts["throughput"] == "regression" else 0)
        assert "measuring 2 more" not in proc.stderr
        assert throughput == [0, 1, 2, 3]
        assert data["repetitions"] == 4 and data["stopped"] == "decided"


def test_stored_baseline_needs_a_matching_machine(tmp_path, redis_server, monkeypatch):
    # This test is about machine fingerprints, not noise: a busy runner must not turn
    # every trial invalid (contended, client-bound) and leave nothing to compare.
    for name, value in quiet_configs(tmp_path, server_bound_cpu_pct=0).items():
        monkeypatch.setenv(name, value)
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
    data = json.loads((tmp_path / "r.json").read_text())
    # The noise decides the verdict; the exit code must say what the summary says.
    assert ok.returncode == (1 if data["outcome"] == "regression" else 0), ok.stderr
    assert data["headline"] in ok.stdout.splitlines()[0]
    (rec,) = [r for r in data["records"] if r["metric"] == "throughput"]
    # The stored run's repetition r and the candidate's share a seed: they pair.
    assert rec["method"] == "t-spending" and rec["baseline"] == "shipped"

    # Fault: the stored run says it was measured on a different kernel.
    conn = sqlite3.connect(db)
    key = json.loads(conn.execute("SELECT comparability FROM runs WHERE id = 1").fetchone()[0])
    key["machine.kernel"] = "0.0.0-elsewhere"
    conn.execute("UPDATE runs SET comparability = ? WHERE id = 1", (json.dumps(key),))
    conn.commit()
    refused = run_cli(
        "ci", "--baseline-run", "prod", "--candidate", f"new=bin:{redis_server}", *TPUT,
        "--db", str(db),
    )  # fmt: skip
    assert refused.returncode == 2
    assert "was not measured like this one (kernel 0.0.0-elsewhere != " in refused.stderr
    runs_before = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    forced = run_cli(
        "ci", "--baseline-run", "prod", "--candidate", f"new=bin:{redis_server}", *TPUT,
        "--db", str(db), "--force", "--json", str(tmp_path / "forced.json"),
    )  # fmt: skip
    outcome = json.loads((tmp_path / "forced.json").read_text())["outcome"]
    assert forced.returncode == (1 if outcome == "regression" else 0), forced.stderr
    assert "(FORCED: not like with like)" in forced.stdout.splitlines()[0]
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == runs_before + 1


def test_a_baseline_measured_with_other_settings_is_refused_unless_forced(
    tmp_path, redis_server, monkeypatch
):
    """A baseline saved from a run with --clients 10 is not like a candidate measured with
    the default 50: ci and compare refuse it with the differences (exit 2, nothing
    measured); with --force they compare and every output says so."""
    for name, value in quiet_configs(tmp_path, server_bound_cpu_pct=0).items():
        monkeypatch.setenv(name, value)
    db = tmp_path / "r.db"
    first = run_cli(
        "run", "--versions", f"shipped=bin:{redis_server}", *TPUT, "--clients", "10",
        "--db", str(db), "--no-report",
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert run_cli("baseline", "save", "prod", "--run", "1", "--db", str(db)).returncode == 0
    gate = ["ci", "--baseline-run", "prod", "--candidate", f"new=bin:{redis_server}", *TPUT]
    refused = run_cli(*gate, "--db", str(db))
    assert refused.returncode == 2, refused.stderr
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith("regtrack: error: baseline 'prod' was not measured like this one")
    assert "(clients 10 != 50)" in last
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1, "nothing measured"

    out = tmp_path / "ci.json"
    forced = run_cli(*gate, "--db", str(db), "--force", "--json", str(out), "--no-report")
    assert forced.returncode == (1 if json.loads(out.read_text())["outcome"] == "regression" else 0)
    assert "(FORCED: not like with like)" in forced.stdout.splitlines()[0]
    assert "FORCED comparison, not like with like: clients 10 != 50" in forced.stdout
    assert json.loads(out.read_text())["forced"] == ["clients 10 != 50"]

    compare = ["compare", "--run", "2", "--baseline-run", "1", "--db", str(db)]
    assert run_cli(*compare).returncode == 2
    assert "run 1 was not measured like this one (clients 10 != 50)" in run_cli(*compare).stderr
    for fmt in ("table", "markdown", "csv"):
        shown = run_cli(*compare, "--force", "--format", fmt)
        assert shown.returncode == 0, shown.stderr
        assert "clients 10 != 50" in shown.stdout.splitlines()[0], (fmt, shown.stdout)
    records = json.loads(run_cli(*compare, "--force", "--format", "json").stdout)
    assert records and all(r["forced"] == ["clients 10 != 50"] for r in records)

    # Server settings are part of what must match: the same clients, another hz.
    other = run_cli(*gate, "--clients", "10", "--server-config", "hz=25", "--db", str(db))
    assert other.returncode == 2, other.stderr
    assert 'not measured like this one (server null != {"hz": "25"})' in other.stderr


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
    assert rec["n_valid"] <= 3 and rec["method"] in ("t", None)  # one look: a t interval
    if rec["n_valid"] >= 2:
        assert rec["ci_low_pct"] <= rec["change_pct"] <= rec["ci_high_pct"]
    assert "ci_low_pct" in rec and "ci_high_pct" in rec
