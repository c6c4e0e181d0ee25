"""Real Redis sources from package registries: resolve, build, measure, compare, reuse.

The offline repositories and builds come from conftest's cached fixtures (see there).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess

import pytest

from tests.conftest import BUILD_FLAGS, cli_in_process, run_cli

SHORT = ["--repetitions", "1", "--duration", "1", "--warmup", "0.3", "--keys", "2000"]

pytestmark = pytest.mark.slow


def test_series_tags_and_branches_resolve_in_the_offline_repository(offline_redis, env):
    proc = cli_in_process(
        "versions",
        "6.2,7.0,8.0,unstable,7.0.15",
        "--source-repo",
        str(offline_redis),
        "--format",
        "json",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    rows = {r["label"]: r for r in json.loads(proc.stdout)}
    assert (rows["6.2"]["ref"], rows["6.2"]["version"]) == ("tag 6.2.14", "6.2.14")
    assert (rows["7.0"]["ref"], rows["7.0"]["version"]) == ("tag 7.0.15", "7.0.15")
    assert rows["7.0"]["commit"] == rows["7.0.15"]["commit"]
    assert rows["8.0"]["version"] == "8.0.6", "8.0 is the newest 8.0.x tag present"
    assert (rows["unstable"]["ref"], rows["unstable"]["version"]) == ("branch unstable", "8.0.6")
    head = subprocess.run(
        ["git", "-C", str(offline_redis), "rev-parse", "refs/heads/unstable"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert rows["unstable"]["commit"] == head


def test_three_real_versions_are_built_measured_and_compared_then_reused(
    tmp_path, offline_redis, env, redis_benchmark_bin
):
    db = tmp_path / "r.db"
    args = ["run", "--versions", "6.2,7.0,unstable", "--source-repo", str(offline_redis),
            "--db", str(db), *SHORT, "--pipelines", "10", *BUILD_FLAGS, "--no-report"]  # fmt: skip
    first = run_cli(*args, env=env, timeout=1800)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "% change 7.0 vs 6.2" in first.stdout and "% change unstable vs 6.2" in first.stdout
    versions = (
        sqlite3.connect(db)
        .execute("SELECT label, redis_version FROM targets ORDER BY position")
        .fetchall()
    )
    assert versions == [("6.2", "6.2.14"), ("7.0", "7.0.15"), ("unstable", "8.0.6")]
    compared = cli_in_process("compare", "--db", str(db), "--format", "json").stdout
    records = json.loads(compared)["records"]
    pairs = {(r["candidate"], r["point"]) for r in records if r["metric"] == "throughput"}
    assert pairs == {("7.0", "pipeline=10"), ("unstable", "pipeline=10")}

    second = run_cli(*args, env=env, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stderr.count("cached build") == 3
    assert "built in" not in second.stderr


@pytest.mark.extended  # a second fork: the first tier builds and runs Redis's own releases
def test_a_fork_resolves_and_runs_from_its_own_repository(
    tmp_path, offline_valkey, env, redis_server, redis_benchmark_bin
):
    resolved = cli_in_process(
        "versions", "8.1", "--source-repo", str(offline_valkey), "--format", "json", env=env
    )
    assert resolved.returncode == 0, resolved.stderr
    assert json.loads(resolved.stdout)[0]["version"] == "8.1.1"
    db = tmp_path / "r.db"
    proc = run_cli(
        "run",
        "--versions",
        f"redis=bin:{redis_server},valkey=8.1",
        "--source-repo",
        str(offline_valkey),
        "--db",
        str(db),
        "--pipelines",
        "10",
        "--repetitions",
        "1",
        "--duration",
        "1",
        "--warmup",
        "0.3",
        "--keys",
        "2000",
        "--build-flags",
        "MALLOC=libc",  # the fork's own jemalloc build is not what this is about
        env=env,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = (
        sqlite3.connect(db)
        .execute("SELECT label, redis_version, server_info FROM targets ORDER BY position")
        .fetchall()
    )
    assert rows[1][1] == "8.1.1"
    assert json.loads(rows[1][2])["server_name"] == "valkey"
    assert "% change valkey vs redis" in proc.stdout
