"""Instructions per operation on real builds: stable, different between versions, and
attributed to the function a patch changed."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.conftest import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("redis_benchmark_bin")]

INSTR = [
    "--metric", "instructions", "--pipelines", "10", "--repetitions", "3",
    "--instruction-requests", "60000", "--keys", "10000",
]  # fmt: skip


def test_real_versions_differ_and_each_is_repeatable(tmp_path, offline_redis, env):
    db = tmp_path / "r.db"
    proc = run_cli(
        "run", "--versions", "6.2,7.0", "--source-repo", str(offline_redis), *INSTR,
        "--db", str(db), env=env, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    repeats = (
        sqlite3.connect(db)
        .execute("SELECT instructions_repeat_pct FROM trials WHERE valid = 1")
        .fetchall()
    )
    assert len(repeats) >= 5, "at most one trial may be flagged"
    assert all(r[0] < 0.5 for r in repeats), "two windows in one server agree within 0.5%"
    (rec,) = json.loads(
        run_cli("compare", "--db", str(db), "--format", "json", "--metric",
                "instructions_per_op").stdout
    )  # fmt: skip
    # 7.0.15 executes ~10% more instructions per GET than 6.2.14 (docs/methodology.md).
    assert rec["verdict"] == "regression"
    # Each process draws its own hash seed (~2% per-process scatter), so with three
    # repetitions the interval is a few percent wide: bound the estimate, not the interval.
    assert 6 < rec["change_pct"] < 15
    assert 1 < rec["ci_low_pct"] <= rec["change_pct"] <= rec["ci_high_pct"] < 25
    # Between processes (hash seed, batching on a loaded machine): ~2%, up to ~4% seen in CI.
    assert rec["spread_pct_baseline"] < 5 and rec["spread_pct_candidate"] < 5


def test_a_patched_get_is_attributed_to_the_function_that_changed(tmp_path, slow_repo, env):
    repo, branch = slow_repo
    db = tmp_path / "r.db"
    proc = run_cli(
        "run", "--versions", f"base=7.0.15,patched={branch}", "--source-repo", str(repo),
        *INSTR, "--db", str(db), env=env, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    explained = run_cli(
        "explain", "--db", str(db), "--baseline", "base", "--candidate", "patched",
        "--format", "json",
    )  # fmt: skip
    assert explained.returncode == 0, explained.stderr
    (table,) = json.loads(explained.stdout)
    top = table["functions"][0]
    assert top["function"] == "getGenericCommand", table["functions"][:3]
    # 25 iterations of a volatile loop: ~6 instructions each.
    assert 100 < top["diff_per_op"] < 250
    assert top["share_pct"] > 80, "the patched function explains most of the change"
    assert table["diff_total"] > 0
