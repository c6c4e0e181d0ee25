"""regtrack ci against real builds: a known regression fails the job, with the function
that changed (explain). The gate's other paths (A/A, undecided, sequential blocks, stored
baselines) are test_ci_flow.py, on modelled trials in seconds."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from regtrack.analysis.gate import gate
from regtrack.analysis.records import GateContext
from regtrack.output.answer_text import change_text
from regtrack.output.ci_summary import ci_headline
from regtrack.results.store import Store
from tests import answers
from tests.conftest import BUILD_FLAGS, cli_in_process, run_cli

INSTR = [
    "--metric", "instructions", "--pipelines", "10", "--instruction-requests", "60000",
    "--keys", "10000", *BUILD_FLAGS,
]  # fmt: skip


# Its command builds what it measures: its own time limit (run_cli's, plus a minute).
@pytest.mark.timeout(1860)
@pytest.mark.slow
@pytest.mark.usefixtures("redis_benchmark_bin")
def test_a_known_regression_fails_the_job_and_names_the_function(tmp_path, slow_repo, env):
    """7.0.15 against itself with 25 wasted loop iterations in getGenericCommand: seed-
    matched callgrind counts decide it at the first look, the summary says so everywhere it
    is read, and explain names the function (the gate's run keeps its profiles)."""
    repo, branch = slow_repo
    db, summary, records = tmp_path / "r.db", tmp_path / "s.md", tmp_path / "r.json"
    step = tmp_path / "step.md"
    proc = run_cli(
        "ci", "--baseline-version", "7.0.15", "--candidate-version", branch,
        "--source-repo", str(repo),
        *INSTR, "--db", str(db), "--summary", str(summary), "--json", str(records),
        env={**env, "GITHUB_STEP_SUMMARY": str(step)}, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    text = summary.read_text()
    # Seeds are matched, so the first look (4 repetitions) decides it.
    assert text.startswith("## regtrack: ❌ Regression after 4 repetitions: instructions per op +")
    assert f"Candidate `{branch}` vs baseline `7.0.15`" in text
    assert step.read_text() == text, "the GitHub step summary gets the same text"
    data = json.loads(records.read_text())
    assert data["outcome"] == "regression" and data["decided"] and data["seeds"] == "fixed"
    gates = {g["metric"]: g for g in data["gate"]}
    assert set(gates) == {"instructions_per_op", "syscalls_per_op"}, "both counted, both gate"
    gated = gates["instructions_per_op"]
    # A pair whose trial was not trusted (its two windows 0.5% apart: libc's string
    # routines cost more or less with where malloc put their argument; passing runs here
    # spread 0.01-0.47%) leaves 3 blocks, two such pairs 2 (once, in CI on a noisy VM);
    # the first look decides either way, with a wider interval from fewer blocks.
    blocks = gated["n_blocks"]
    assert blocks in (2, 3, 4), data
    assert f"**instructions per op** over pipeline=10 ({blocks} blocks)" in text, text
    # 25 loop iterations are ~175 instructions on ~3,670 per GET (libc malloc): about +5%.
    assert gated["verdict"] == "regression"
    assert 0 < gated["ci_low_pct"] <= gated["change_pct"] <= gated["ci_high_pct"]
    assert 3.5 < gated["change_pct"] < 6.5, data
    if blocks >= 3:
        assert gated["ci_low_pct"] > 3.5 and gated["ci_high_pct"] < 6.5, data
    (rec,) = [r for r in data["records"] if r["metric"] == "instructions_per_op"]
    assert rec["verdict"] == "regression" and rec["gating"]

    explained = cli_in_process("explain", "--db", str(db), "--baseline", "7.0.15",
                               "--candidate", branch, "--format", "json")  # fmt: skip
    assert explained.returncode == 0, explained.stderr
    (table,) = json.loads(explained.stdout)
    top = table["functions"][0]
    assert top["function"] == "getGenericCommand", table["functions"][:3]
    # 25 iterations of a volatile loop: ~6 instructions each.
    assert 100 < top["diff_per_op"] < 250
    assert top["share_pct"] > 80, "the patched function explains most of the change"
    assert table["diff_total"] > 0


def test_a_gate_without_an_estimate_says_why():
    """One contended trial of two repetitions leaves one complete block: no estimate at
    all. The headline says so and why, not a bare "-" (the record as pooling made it on
    a fresh clone)."""
    record = answers.pooled(
        verdict="inconclusive", n_blocks=1, change_pct=None, ci_low_pct=None, ci_high_pct=None,
        mde_pct=None,
    )  # fmt: skip
    decision = gate(answers.result((record,)))
    assert decision.outcome == "inconclusive"
    line = ci_headline(decision, GateContext(repetitions=2, stopped="max-repetitions"))
    assert line.endswith("(--max-repetitions): throughput n/a (1 complete block, 2 needed)"), line
    decision = gate(answers.result((dataclasses.replace(record, n_blocks=0),)))
    assert decision.outcome == "not measured"
    assert "n/a (0 complete blocks, 2 needed)" in ci_headline(decision, GateContext(repetitions=2))


def test_an_interval_too_wide_to_read_is_not_printed_as_figures():
    """Two blocks under a fixed t interval (a t quantile of 12.7) or a look that spends
    nothing give ends like +285035887888.7%: printed as too wide, without an MDE."""
    record = answers.pooled(
        verdict="inconclusive", n_blocks=2, change_pct=-1.0, ci_low_pct=-100.0,
        ci_high_pct=285035887888.7, mde_pct=256153300040.1,
    )  # fmt: skip
    text = change_text(record)
    assert text == "-1.0% [too wide to read] inconclusive", text
    assert change_text(dataclasses.replace(record, ci_high_pct=math.inf)) == text
    readable = dataclasses.replace(record, ci_low_pct=-40.0, ci_high_pct=60.0, mde_pct=130.0)
    assert change_text(readable) == ("-1.0% [-40.0, +60.0] inconclusive (detectable: over ±100%)")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give exactly one of --baseline-version SPEC"),
        (["--baseline-version", "bin:/x", "--baseline-name", "b"], "give exactly one of"),
        (["--baseline-name", "nope"], "no baseline named 'nope'"),
        (["--baseline-version", "bin:/nonexistent", "--threshold", "0"], "'--threshold': '0'"),
    ],
)
def test_ci_bad_usage_is_exit_2(tmp_path, redis_server, args, message):
    db = tmp_path / "r.db"
    Store.open(db).close()  # an empty regtrack database
    candidate = ["--candidate-version", f"bin:{redis_server}"]
    proc = cli_in_process("ci", *candidate, *args, "--db", str(db))
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
