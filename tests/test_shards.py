"""One plan measured as shards (as a CI matrix or a Kubernetes Indexed Job would run it)
and merged back: the split is deterministic and balanced, blocks never straddle hosts,
every planned trial is measured exactly once, and the merged run compares like one run."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from regtrack.bench import seeds, shards
from regtrack.bench.plan import interleave
from regtrack.core.errors import BadInput
from regtrack.plan.run_plan import RunPlan
from regtrack.workloads.points import Point
from tests import fakebench
from tests.conftest import cli_in_process, stored_plan


def _points(n: int) -> list[Point]:
    return [Point("get-pipeline", f"pipeline={p}", {"pipeline": p}) for p in range(1, n + 1)]


# --- the split ----------------------------------------------------------------------------


@given(
    targets=st.integers(1, 4),
    points=st.integers(1, 4),
    repetitions=st.integers(1, 12),
    modes=st.sampled_from([("throughput",), ("instructions",), ("throughput", "instructions")]),
    count=st.integers(1, 9),
)
def test_every_planned_trial_is_in_exactly_one_shard(targets, points, repetitions, modes, count):
    labels = [f"v{i}" for i in range(targets)]
    visits = interleave(labels, _points(points), repetitions, modes)
    seen = [t.seq for k in range(1, count + 1)
            for v in shards.share(visits, shards.Shard(k, count)) for t in v.trials]  # fmt: skip
    assert sorted(seen) == sorted(t.seq for v in visits for t in v.trials)
    loads = [
        sum(len(v.trials) for v in shards.share(visits, shards.Shard(k, count)))
        for k in range(1, count + 1)
    ]
    biggest = max(sum(len(v.trials) for v in b) for b in shards.blocks(visits))
    assert max(loads) - min(loads) <= biggest, "balanced to within one block"


def test_a_block_keeps_its_versions_together_on_one_shard():
    visits = interleave(["a", "b"], _points(2), 6, ("throughput", "instructions"))
    for k in (1, 2, 3):
        mine = shards.share(visits, shards.Shard(k, 3))
        by_block: dict = {}
        for v in mine:
            by_block.setdefault(shards.block_key(v), set()).add((v.target, v.repetition))
        for (mode, first), members in by_block.items():
            reps = {first, first + 1} if mode == "throughput" else {first}
            assert members == {(t, r) for t in ("a", "b") for r in reps}, "A B B A, or a seed pair"


# What GitLab sets for the second copy of a `parallel: 3` job named "gate", and for one job
# of a `parallel: matrix` (one job per VERSION; GitLab numbers those too).
GITLAB_SPLIT = {"GITLAB_CI": "true", "CI_JOB_NAME": "gate 2/3", "CI_NODE_INDEX": "2",
                "CI_NODE_TOTAL": "3"}  # fmt: skip
GITLAB_MATRIX = {"GITLAB_CI": "true", "CI_JOB_NAME": "gate: [7.2]", "CI_NODE_INDEX": "2",
                 "CI_NODE_TOTAL": "3", "VERSION": "7.2"}  # fmt: skip


def test_a_gitlab_matrix_job_is_not_a_shard_but_parallel_n_is():
    """Both set CI_NODE_INDEX and CI_NODE_TOTAL; a matrix job measures its whole plan (it
    used to measure a third of it and exit 0 without deciding)."""
    assert shards.from_environment(GITLAB_MATRIX) is None
    assert shards.from_environment({**GITLAB_SPLIT, "CI_JOB_NAME": "gate 1/3"}) is None, (
        "a name that disagrees with the index is no split"
    )
    assert shards.from_environment(GITLAB_SPLIT) == shards.Shard(2, 3, "CI_NODE_INDEX")


def test_engines_variables_name_the_shard():
    assert shards.from_environment({}) is None
    k8s = shards.from_environment({"JOB_COMPLETION_INDEX": "0", "REGTRACK_SHARD_COUNT": "3"})
    assert (k8s.index, k8s.count, k8s.source) == (1, 3, "JOB_COMPLETION_INDEX")
    gitlab = shards.from_environment(GITLAB_SPLIT)
    assert (gitlab.index, gitlab.count) == (2, 3), "GitLab counts from 1"
    bk = shards.from_environment(
        {"BUILDKITE_PARALLEL_JOB": "2", "BUILDKITE_PARALLEL_JOB_COUNT": "3"}
    )
    assert (bk.index, bk.count) == (3, 3), "Buildkite counts from 0"
    with pytest.raises(BadInput, match="--shard-count"):
        shards.from_environment({"JOB_COMPLETION_INDEX": "1"})
    with pytest.raises(BadInput, match="but --shard-count"):
        shards.from_environment({**GITLAB_SPLIT, "CI_NODE_INDEX": "1",
                                 "CI_JOB_NAME": "gate 1/3"}, count=4)  # fmt: skip
    for bad in ("0/3", "4/3", "x", "1/0", "2", "1/1001", "1/99999999999999999999"):
        with pytest.raises(BadInput):
            shards.parse(bad)


# --- real shards, merged ------------------------------------------------------------------

PLAN = [
    "--metric", "both", "--pipelines", "10", "--repetitions", "4", "--duration", "0.5",
    "--warmup", "0.1", "--instruction-requests", "10000", "--keys", "1000", "--no-report",
]  # fmt: skip
ENGINES = [
    {"JOB_COMPLETION_INDEX": "0", "REGTRACK_SHARD_COUNT": "3"},
    {"CI_NODE_INDEX": "2", "CI_NODE_TOTAL": "3", "CI_JOB_NAME": "bench 2/3"},
    {"BUILDKITE_PARALLEL_JOB": "2", "BUILDKITE_PARALLEL_JOB_COUNT": "3"},
]


def _compare(db) -> list[dict]:
    proc = cli_in_process("compare", "--db", str(db), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["records"]


def _shape(records: list[dict]) -> list[tuple]:
    return sorted(
        (r["workload"], r["point"], r["metric"], r["candidate"],
         r["n_valid_baseline"] + r["n_invalid_baseline"],
         r["n_valid_candidate"] + r["n_invalid_candidate"])
        for r in records
    )  # fmt: skip


def test_three_shards_merge_into_the_run_one_process_would_make(
    tmp_path, redis_server, monkeypatch
):
    """In process, on modelled trials (tests/fakebench.py): what is measured where is
    the plan's business, not the servers'."""
    model = fakebench.Model()
    versions = f"a=bin:{redis_server},b=bin:{redis_server}"
    dbs = []
    for k, engine in enumerate(ENGINES, start=1):
        db = tmp_path / f"shard-{k}.db"
        pipeline = {**engine, "GITHUB_RUN_ID": "4242"}  # one pipeline: one seed offset
        proc = cli_in_process(
            "run", "--versions", versions, *PLAN, "--db", str(db), env=pipeline, measuring=model
        )
        assert proc.returncode == 0, proc.stderr
        assert f"shard {k}/3 (from {next(iter(engine))})" in proc.stderr
        dbs.append(db)
    single = tmp_path / "single.db"
    proc = cli_in_process(
        "run", "--versions", versions, *PLAN, "--db", str(single), measuring=model
    )
    assert proc.returncode == 0, proc.stderr

    out = tmp_path / "merged.db"
    two = cli_in_process("merge", str(tmp_path / "two.db"), str(dbs[0]), str(dbs[1]))
    assert two.returncode == 3, two.stderr
    assert "shard 3/3 missing" in two.stderr and "--shard K/N" in two.stderr
    assert "Traceback" not in two.stderr

    merged = cli_in_process("merge", str(out), *map(str, dbs))
    assert merged.returncode == 0, merged.stderr
    with sqlite3.connect(out) as conn:
        planned = json.loads(conn.execute("SELECT config FROM runs").fetchone()[0])
        seqs = [r[0] for r in conn.execute("SELECT seq FROM trials ORDER BY seq")]
        hosts = conn.execute("SELECT COUNT(*) FROM trials WHERE host IS NULL").fetchone()[0]
        sources = conn.execute("SELECT COUNT(*) FROM merged_shards").fetchone()[0]
    with sqlite3.connect(single) as conn:
        expected = [r[0] for r in conn.execute("SELECT seq FROM trials ORDER BY seq")]
    assert planned["merged"] and planned["shard"] is None
    assert planned["settings"]["seed_offset"] == shards.seed_offset({"GITHUB_RUN_ID": "4242"})
    assert seqs == expected == list(range(len(expected))), "every planned trial exactly once"
    assert hosts == 0 and sources == 3, "each trial keeps the host that measured it"

    a, b = _compare(out), _compare(single)
    assert _shape(a) == _shape(b)

    def kinds(records: list[dict]) -> dict:
        return {r["point"]: r["verdict"] for r in records if r["metric"] == "instructions_per_op"}

    assert kinds(a) and kinds(a) == kinds(b)

    again = cli_in_process("merge", str(out), *map(str, dbs))
    assert again.returncode == 0, again.stderr
    assert "0 trials added" in again.stdout
    with sqlite3.connect(out) as conn:
        assert conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0] == len(expected)
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1

    # The gate on every shard's blocks at once (ci --merge), and reading the merged run as
    # any other: report pages, history.
    gate_db = tmp_path / "gate.db"
    gate = cli_in_process("ci", "--merge", "--db", str(gate_db), *map(str, dbs), "--json",
                   str(tmp_path / "gate.json"), measuring=model)  # fmt: skip
    assert gate.returncode == 0, gate.stderr
    verdict = json.loads((tmp_path / "gate.json").read_text())
    assert verdict["outcome"] != "regression", "the same build on both sides"
    assert "trials added" in gate.stderr and "Traceback" not in gate.stderr
    assert verdict["stopped"] == "merged" and verdict["records"]
    partial = cli_in_process("ci", "--merge", "--db", str(tmp_path / "partial.db"), str(dbs[0]),
                             str(dbs[1]), measuring=model)  # fmt: skip
    assert partial.returncode == 3, partial.stderr
    assert "## regtrack:" in partial.stdout, "what two shards decide is shown, then refused"
    last = partial.stderr.strip().splitlines()[-1]
    assert last.startswith("regtrack: error: run 1 is incomplete: shard 3/3 missing"), last
    report = cli_in_process("report", "--db", str(out), "--out", str(tmp_path / "pages"))
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "pages" / "index.html").is_file()
    history = cli_in_process("history", "--db", str(out), "--by", "run")
    assert history.returncode == 0, history.stderr

    other = tmp_path / "other.db"
    proc = cli_in_process("run", "--versions", versions, "--metric", "instructions", "--pipelines",
                   "5", *PLAN[4:], "--shard", "1/3", "--db", str(other),
                   measuring=model)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    refused = cli_in_process("merge", str(tmp_path / "mixed.db"), str(dbs[0]), str(other))
    assert refused.returncode == 2
    assert "different plans" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1


def test_merge_copies_every_table_of_a_trials_facts_with_it(tmp_path, redis_server):
    """Each table hanging off a trial (its trial_id) is one merge copies (CHILD_TABLES):
    a lifecycle's engine counts (trial_lifecycle) and open-loop facts reach the merged run
    with their trial, under its new id."""
    from regtrack.results.shard_union import CHILD_TABLES
    from regtrack.results.store import Store

    shard = tmp_path / "shard-1.db"
    Store.open(shard).close()
    with sqlite3.connect(shard) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        children = {
            t for t in tables
            if "trial_id" in [c[1] for c in conn.execute(f"PRAGMA table_info({t})")]
        }  # fmt: skip
    conn.close()
    assert children == set(CHILD_TABLES), "merge must copy every table of a trial's facts"
    shard.unlink()
    proc = cli_in_process(
        "run", "--versions", f"a=bin:{redis_server},b=bin:{redis_server}", "--metric",
        "throughput", "--pipelines", "1", "--repetitions", "2", "--rate", "1000",
        "--shard", "1/1", "--no-report", "--db", str(shard), measuring=fakebench.Model(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    facts = (3000, 2990, 10, 1000.5, 9.0, 4.25, 7, 1)
    with sqlite3.connect(shard) as conn:
        (seq, trial_id) = conn.execute("SELECT seq, MIN(id) FROM trials").fetchone()
        conn.execute("INSERT INTO trial_lifecycle VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     (trial_id, *facts))  # fmt: skip
    conn.close()
    out = tmp_path / "merged.db"
    merged = cli_in_process("merge", str(out), str(shard))
    assert merged.returncode == 0, merged.stderr
    with sqlite3.connect(out) as conn:
        copied = conn.execute(
            "SELECT l.enqueued, l.completed, l.not_done, l.enqueue_per_sec, l.commands_per_task,"
            " l.round_trips_per_task, l.empty_dequeues, l.foreign_tasks FROM trial_lifecycle l"
            " JOIN trials t ON t.id = l.trial_id WHERE t.seq = ?",
            (seq,),
        ).fetchall()
        open_loop = conn.execute("SELECT COUNT(*) FROM trial_open_loop").fetchone()[0]
    conn.close()
    assert copied == [facts] and open_loop > 0


def test_the_shards_of_one_pipeline_share_seeds_and_another_pipeline_reads_others():
    """Shards agree on a seed offset without talking (their pipeline's id), a rerun of the
    pipeline measures other seeds, and offsets never make two runs' seeds collide."""
    mine = shards.seed_offset({"GITHUB_RUN_ID": "7", "CI_NODE_INDEX": "2"})
    assert mine == shards.seed_offset({"GITHUB_RUN_ID": "7"}) != 0
    assert mine != shards.seed_offset({"GITHUB_RUN_ID": "8"})
    assert mine != shards.seed_offset({"CI_PIPELINE_ID": "7"})
    assert shards.seed_offset({"JOB_COMPLETION_INDEX": "0"}) == 0, "no pipeline: offset 0"
    assert mine % seeds.OFFSET_STEP == 0 and seeds.draw_offset() % seeds.OFFSET_STEP == 0
    assert seeds.for_repetition(5, mine) == seeds.for_repetition(mine + 5)
    assert seeds.for_repetition(0) == seeds.for_repetition(0, 0), "offset 0: the old seeds"
    runs = {seeds.for_repetition(r, o) for o in (0, mine) for r in range(64)}
    assert len(runs) == 128


def _identity(config: dict) -> str:
    return RunPlan.from_json(config).identity()


def test_the_plan_id_names_what_is_measured_not_where():
    config = {
        "metric": "both", "runtime": "native", "memory": None, "points": ["pipeline=10"],
        "settings": {"repetitions": 4, "database": "/a/r.db"},
        "workload": {"name": "w", "kind": "get-pipeline"},
        "targets": [{"label": "a", "spec": "7.0.15", "kind": "git", "commit": "c1",
                     "binary_sha256": "host-specific", "details": {}}],
        "cpus": {"server_cpus": "0"}, "shard": {"index": 1, "count": 3},
    }  # fmt: skip
    same = {**config, "cpus": {"server_cpus": "4"}, "shard": {"index": 2, "count": 3},
            "settings": {"repetitions": 4, "database": "/b/r.db"}}  # fmt: skip
    same["targets"] = [{**config["targets"][0], "binary_sha256": "built-elsewhere"}]
    assert RunPlan.from_json(config).identity() == RunPlan.from_json(same).identity()
    other = {**config, "points": ["pipeline=30"]}
    assert RunPlan.from_json(other).identity() != RunPlan.from_json(config).identity()
    built = {"build": {"flags": ["MALLOC=libc"], "directory": "/host/a/cache"}}
    libc = {**config, "targets": [{**config["targets"][0], "details": built}]}
    elsewhere = {"build": {"flags": ["MALLOC=libc"], "directory": "/host/b/cache"}}
    libc_too = {**config, "targets": [{**config["targets"][0], "details": elsewhere}]}
    assert RunPlan.from_json(libc).identity() != RunPlan.from_json(config).identity(), (
        "other make flags: another plan"
    )
    assert RunPlan.from_json(libc).identity() == RunPlan.from_json(libc_too).identity(), (
        "where it was built is not"
    )


def test_instruction_counts_pool_across_hosts_only_when_what_moves_them_agrees(tmp_path):
    from regtrack.results import shard_runs, shard_union
    from regtrack.results.run_row import HostFacts, LoadgenFacts

    def shard_run(host: str, hwcaps: str, sha: str) -> shard_runs.ShardRun:
        env = HostFacts(hostname=host, fingerprint="f" * 16, valgrind="Valgrind-3.19.0",
                        valgrind_hwcaps=hwcaps, glibc="2.36", cpu_model=host)  # fmt: skip
        config = stored_plan(targets=[{"label": "a", "spec": "a", "binary_sha256": sha}])
        return shard_runs.ShardRun(tmp_path, 1, "p", None, shard_runs.host_label(env), "complete",
                                config, env, LoadgenFacts(), ())  # fmt: skip

    avx2 = "amd64-sse3-ssse3-avx-avx2"
    one, two = shard_run("epyc", avx2, "s1"), shard_run("xeon", avx2, "s1")
    assert one.host != two.host, "two machines with one fingerprint are two hosts"
    assert shard_union.instruction_differences([one, two]) == [], "the CPU model alone does not"
    apart = shard_union.instruction_differences([one, shard_run("old", "amd64-sse3-ssse3", "s2")])
    assert len(apart) == 2
    assert apart[0].startswith("valgrind_hwcaps") and apart[1].startswith("a's binary")


def test_a_shard_without_blocks_or_a_bad_shard_is_one_clear_line(tmp_path, redis_server):
    versions = f"a=bin:{redis_server},b=bin:{redis_server}"
    db = tmp_path / "r.db"
    plan = ["--metric", "throughput", "--repetitions", "2", "--no-report", "--db", str(db)]
    empty = cli_in_process("run", "--versions", versions, *plan, "--shard", "2/2")
    assert empty.returncode == 2, empty.stderr
    assert "only 1 blocks for 2 shards" in empty.stderr and "Traceback" not in empty.stderr
    bad = cli_in_process("run", "--versions", versions, *plan, env={"CI_NODE_INDEX": "4",
                  "CI_NODE_TOTAL": "3", "CI_JOB_NAME": "bench 4/3"})  # fmt: skip
    assert bad.returncode == 2 and "CI_NODE_INDEX" in bad.stderr, bad.stderr
    assert (
        not db.exists()
        or sqlite3.connect(db).execute("SELECT COUNT(*) FROM trials").fetchone()[0] == 0
    )


def test_a_shard_killed_mid_run_keeps_every_stored_trial_in_its_db_file_alone(
    tmp_path, redis_server
):
    """kill -9 of a sharded run mid-trial leaves no time to close the database; the .db
    file alone (what a CI job uploads) still holds every trial stored before the kill,
    because a shard's store checkpoints each commit into it. (In WAL mode without that,
    the file was 4 KiB and everything, schema included, was in -wal.)"""
    db = tmp_path / "shard.db"
    argv = [
        sys.executable, "-m", "regtrack", "run", "--versions",
        f"a=bin:{redis_server},b=bin:{redis_server}", "--pipelines", "10,30,50",
        "--duration", "1", "--warmup", "0.3", "--repetitions", "4", "--keys", "20000",
        "--loadgen", "redis-benchmark", "--shard", "1/2", "--no-report", "--db", str(db),
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stored = 0
    try:
        deadline = time.monotonic() + 120
        while stored < 4 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            with (
                contextlib.suppress(sqlite3.OperationalError),
                contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn,
            ):
                stored = conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
        assert proc.poll() is None, "the run ended before it could be killed mid-run"
        # Killed between trials' writes, not inside one: stopped where the WAL is empty
        # (each commit's checkpoint done), which is nearly always at the first try.
        wal = Path(f"{db}-wal")
        for _ in range(100):
            os.kill(proc.pid, signal.SIGSTOP)
            if not wal.exists() or wal.stat().st_size == 0:
                break
            os.kill(proc.pid, signal.SIGCONT)
            time.sleep(0.02)
        copy = tmp_path / "copy.db"
        proc.kill()  # SIGKILL: no handler, no close, no checkpoint at exit
        proc.wait()
        shutil.copy(db, copy)  # the .db alone, as the CI example uploads it
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with contextlib.closing(sqlite3.connect(db)) as conn:  # reads -wal too: what was stored
        seqs = {r[0] for r in conn.execute("SELECT seq FROM trials")}
    assert len(seqs) >= 4 and not (tmp_path / "copy.db-wal").exists()
    out = tmp_path / "merged.db"
    merged = cli_in_process("merge", str(out), str(copy))
    assert "Traceback" not in merged.stderr, merged.stderr
    with contextlib.closing(sqlite3.connect(out)) as conn:
        assert {r[0] for r in conn.execute("SELECT seq FROM trials")} == seqs


def test_a_ci_on_one_shard_says_so_first_and_exits_5_and_a_matrix_job_decides(
    tmp_path, redis_server, monkeypatch
):
    model = fakebench.Model()
    pair = ["--baseline-version", f"a=bin:{redis_server}", "--candidate-version",
            f"b=bin:{redis_server}", "--metric", "instructions", "--pipelines", "10",
            "--repetitions", "8", "--no-report"]  # fmt: skip
    shard = cli_in_process(
        "ci", *pair, "--db", str(tmp_path / "s.db"), env=GITLAB_SPLIT, measuring=model
    )
    assert shard.returncode == 5, shard.stdout + shard.stderr
    assert shard.stdout.startswith("## regtrack: ⏸️ Shard 2/3 measured, nothing decided")
    assert "from CI_NODE_INDEX" in shard.stdout and "ci --merge" in shard.stdout
    matrix = cli_in_process(
        "ci", *pair, "--db", str(tmp_path / "m.db"), env=GITLAB_MATRIX, measuring=model
    )
    assert matrix.returncode == 0, matrix.stdout + matrix.stderr
    assert matrix.stdout.startswith("## regtrack: ✅ No regression"), matrix.stdout
    assert "shard 2/3" not in matrix.stderr, matrix.stderr
