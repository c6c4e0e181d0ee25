"""`regtrack run`'s orchestration end to end, in process, on modelled trials and modelled
servers (tests/fakebench.py): the order visits run in, what preflight stores, a server
that dies mid-visit and Ctrl-C mid-visit, each then resumed. Real servers killed and real
signals: test_faults.py and test_cli_run.py."""

from __future__ import annotations

import ast
import inspect
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import regtrack
from regtrack.bench import servers
from regtrack.bench.measuring import Measuring
from regtrack.bench.real import RealBench
from regtrack.core.errors import Interrupted
from regtrack.plan.records import LoadgenProbe
from regtrack.plan.run_plan import RunPlan
from tests import fakebench
from tests.conftest import cli_in_process, settings_dir

PLAN = ["--pipelines", "1,5,10", "--repetitions", "2", "--no-report"]


@pytest.fixture(autouse=True)
def own_locks(tmp_path, monkeypatch):
    monkeypatch.setenv("REGTRACK_LOCK_DIR", str(tmp_path / "locks"))


def _versions(redis_server: str, *labels: str) -> list[str]:
    return ["--versions", ",".join(f"{label}=bin:{redis_server}" for label in labels)]


def _run(db: Path) -> tuple[str, str]:
    return sqlite3.connect(db).execute("SELECT status, status_detail FROM runs").fetchone()


def _seqs(db: Path) -> list[int]:
    return [r[0] for r in sqlite3.connect(db).execute("SELECT seq FROM trials ORDER BY seq")]


def test_visits_follow_the_interleaved_plan_and_preflight_stores_what_each_server_reports(
    tmp_path, monkeypatch, redis_server
):
    """Separate trials: A B C then C B A in each mode; every version of a repetition gets
    its seed, and preflight started each version once, before any
    visit, storing what a server of its version reports (5.0 knows no ACL users, and the
    run says so once)."""
    model = fakebench.Model(redis_version={"b": "6.0.20", "c": "5.0.14", "*": "7.2.4"})
    db = tmp_path / "r.db"
    proc = cli_in_process("run", *_versions(redis_server, "a", "b", "c"), *PLAN,
                          "--metric", "both", "--pairing", "separate", "--db", str(db),
                          measuring=model)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    modes = ("throughput", "instructions")
    forwards = [(label, 0, mode) for mode in modes for label in "abc"]
    backwards = [(label, 1, mode) for mode in modes for label in "cba"]
    assert model.visits == forwards + backwards
    assert model.started == ["a", "b", "c"]
    assert proc.stderr.count("knows no ACL users") == 1
    assert "warning: c (Redis 5.0.14) knows no ACL users" in proc.stderr

    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT t.seq, g.label, t.repetition, t.seed FROM trials t JOIN targets g "
        "ON g.id = t.target_id ORDER BY t.id"
    ).fetchall()
    assert [r[0] for r in rows] == list(range(3 * 3 * 2 * 2)), "stored as planned, in order"
    seeds = {rep: {seed for _, _, r, seed in rows if r == rep} for rep in (0, 1)}
    assert all(len(s) == 1 for s in seeds.values()) and seeds[0] != seeds[1]
    targets = conn.execute("SELECT label, redis_version, server_info FROM targets")
    stored = {label: (version, json.loads(info)) for label, version, info in targets}
    assert {label: v for label, (v, _) in stored.items()} == {
        "a": "7.2.4", "b": "6.0.20", "c": "5.0.14",
    }  # fmt: skip
    access = {label: info["access"] for label, (_, info) in stored.items()}
    assert access == {"a": "acl", "b": "acl-no-channels", "c": "open"}
    assert all(info["executable"] == redis_server for _, info in stored.values())

    model.visits.clear()
    paired = cli_in_process("run", *_versions(redis_server, "a", "b"), *PLAN,
                            "--metric", "throughput", "--db", str(db), measuring=model)  # fmt: skip
    assert paired.returncode == 0, paired.stderr
    assert model.visits == [
        ("a", 0, "throughput"), ("b", 0, "throughput"),
        ("b", 1, "throughput"), ("a", 1, "throughput"),
    ], "paired in time (the default): one visit of both servers per repetition"  # fmt: skip


@pytest.mark.parametrize(
    ("fault", "code", "status"),
    [
        (servers.ServerDied("redis-server of b exited during the trial"), 3, "incomplete"),
        (Interrupted("SIGINT"), 130, "interrupted"),
    ],
    ids=["server-died", "ctrl-c"],
)
def test_a_visit_ended_by_a_fault_keeps_its_trials_and_resume_measures_only_the_rest(
    tmp_path, monkeypatch, redis_server, fault, code, status
):
    """b's first visit ends after its first trial. A dead server ends only that visit (the
    run goes on and ends incomplete); Ctrl-C ends the run there (interrupted). Either way
    what was measured is kept, and --resume measures the rest of that visit (and, after
    Ctrl-C, every later one), without preflight, each planned trial once."""
    model = fakebench.Model(faults={("b", 0): fault})
    db = tmp_path / "r.db"
    proc = cli_in_process("run", *_versions(redis_server, "a", "b"), *PLAN,
                          "--metric", "instructions", "--db", str(db), measuring=model)  # fmt: skip
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    state, detail = _run(db)
    assert state == status
    planned = 2 * 3 * 2
    kept = _seqs(db)
    if status == "incomplete":
        assert "the run goes on" in proc.stderr
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith("regtrack: error: run 1 is incomplete"), proc.stderr
        assert "2 planned trials not measured" in detail and "--resume 1" in detail
        assert model.visits[-1] == ("a", 1, "instructions"), "later visits ran"
        assert kept == [0, 1, 2, 3, 6, 7, 8, 9, 10, 11]
    else:
        assert "interrupted" in proc.stderr and "measured trials are kept" in detail
        assert model.visits[-1] == ("b", 0, "instructions"), "nothing ran after Ctrl-C"
        assert kept == [0, 1, 2, 3]
    before = list(model.visits)
    assert model.started == ["a", "b"]

    resumed = cli_in_process(
        "run", "--resume", "1", "--db", str(db), "--no-report", measuring=model
    )
    assert resumed.returncode == 0, resumed.stderr
    assert f"{planned - len(kept)} trials to run" in resumed.stderr
    again = model.visits[len(before) :]  # the rest of the visit the fault ended, first
    later = [] if status == "incomplete" else [("b", 1, "instructions"), ("a", 1, "instructions")]
    assert again == [("b", 0, "instructions"), *later]
    assert model.started == ["a", "b"], "resume starts no server for preflight"
    assert _run(db)[0] == "complete"
    assert _seqs(db) == list(range(planned)), "every planned trial exactly once"


# Where regtrack starts a server for real: the real seam's methods (bench/real.py) and
# what they call. Anywhere else a server starts only through a Measuring.
REAL_STARTS = {
    ("bench/servers.py", "plain_server"), ("bench/servers.py", "serve"),
    ("bench/runner.py", "run_visit"), ("bench/paired.py", "run_visit"),
    ("bench/loadgen_choice.py", "probe"), ("bench/real.py", "plain_server"),
    ("bench/capacity.py", "capacity_trial"),
    # mix capture --check replays a file on a server of its own: no run, no Model
    ("bench/capture_replay.py", "settings"), ("bench/capture_replay.py", "_fresh_server"),
}  # fmt: skip
STARTERS = {"plain_server", "serve", "native_server", "docker_server"}
# The real seam's visits and probe, called by bench/real.py alone.
REAL_ENTRIES = {
    "runner.run_visit", "paired.run_visit", "run_visit", "loadgen_choice.probe",
    "capacity.capacity_trial",
}  # fmt: skip


def _calls(path: Path) -> Iterator[tuple[str, ast.Call]]:
    """Every call in a module, with the function (or method) it is made in."""

    def walk(node: ast.AST, where: str) -> Iterator[tuple[str, ast.Call]]:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef) else where
            if isinstance(child, ast.Call):
                yield where, child
            yield from walk(child, inner)

    yield from walk(ast.parse(path.read_text()), "")


def test_every_server_start_of_a_run_goes_through_the_measuring_seam(tmp_path, redis_server):
    """What makes a modelled run safe: outside the real seam's own code, regtrack starts a
    server only through the Measuring it was handed (``measuring.plain_server``), and only
    the real seam calls the real visits and probe; a Model has no real path. The one start
    the model does not stand in for (the server settings check) fails the test outright
    (no exit code to mistake for an expected one), starting nothing."""
    root = Path(regtrack.__file__).parent
    outside = []
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root).as_posix()
        for where, call in _calls(path):
            func = call.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            through_seam = isinstance(func, ast.Attribute) and ast.unparse(func.value) in (
                "measuring", "self.measuring",
            )  # fmt: skip
            if name in STARTERS and not through_seam and (module, where) not in REAL_STARTS:
                outside.append(f"{module}:{call.lineno} {ast.unparse(func)} in {where}")
            if ast.unparse(func) in REAL_ENTRIES and module != "bench/real.py":
                outside.append(f"{module}:{call.lineno} {ast.unparse(func)} in {where}")
    assert outside == []

    model = fakebench.Model()
    with pytest.raises(fakebench.NotModelled, match="server settings check of a"):
        cli_in_process("run", *_versions(redis_server, "a"), *PLAN, "--server-config", "hz=25",
                       "--db", str(tmp_path / "db"), measuring=model)  # fmt: skip
    assert model.started == [] and model.visits == []


def test_the_model_and_the_real_bench_are_both_the_measuring_seam():
    """Both sides of the seam offer every member of the protocol, methods with its
    parameters, so a change to the seam fails here rather than deep inside a flow."""
    members = [name for name in vars(Measuring) if not name.startswith("_")]
    assert {"visit", "paired_visit", "probe_trial", "plain_server", "loadgen_answers"} <= set(
        members
    )
    for side in (fakebench.Model(), RealBench()):
        for name in members:
            wanted = getattr(Measuring, name)
            if isinstance(wanted, property):
                getattr(side, name)  # an attribute or property of that name
                continue
            got = inspect.signature(getattr(side, name)).parameters
            assert list(got) == list(inspect.signature(wanted).parameters)[1:], (side, name)


@pytest.mark.parametrize("workload", ["get-pipeline", "streams-queue"])
def test_a_stored_job_is_rebuilt_as_it_was_planned(workload, redis_server, tmp_path, monkeypatch):
    """What --resume and a grown run measure: the job a run stored, read back, plans the
    same visits and stores the same config, field for field (a range's skipped builds, the
    repetitions narrowed to one metric, the shard, why its load generator was chosen and
    its servers' data directory included), through the JSON the store keeps."""
    import dataclasses

    from regtrack.bench.job import Job, Skipped
    from regtrack.bench.loadgen.base import LoadgenBinary
    from regtrack.bench.shards import Shard
    from regtrack.core.cpus import plan_cpus
    from regtrack.core.settings import load_settings, settings_source
    from regtrack.plan.records import LoadgenChoice
    from regtrack.targets.versions import parse_specs, resolve
    from regtrack.workloads.files import load_workload

    job = Job(
        targets=resolve(parse_specs(f"a=bin:{redis_server},b=bin:{redis_server}")),
        workload=load_workload(workload, server={"appendonly": "yes"}),
        settings=load_settings(duration=0.5, warmup=0.2, repetitions=2, seed_offset=3000),
        cpus=plan_cpus(),
        loadgen=LoadgenBinary("memtier_benchmark", "/opt/memtier", "2.3.0", "ab" * 32),
        metric="both",
        skipped=(Skipped("c", "c0ffee" * 6 + "c0ff", "a commit", "does not build: make"),),
        shard=Shard(2, 3, "CI_NODE_INDEX"),
        data_dir=str(tmp_path),
        loadgen_choice=LoadgenChoice(
            "memtier", "saturates", LoadgenProbe(10, 1, 97.0, 60.0, 4e5), str(tmp_path / "c")
        ),
    ).extended(4, ("throughput",))
    assert job.narrowed == {2: ("throughput",), 3: ("throughput",)}
    stored = RunPlan.from_json(json.loads(json.dumps(job.config().to_json())))
    # Grown or resumed where another settings file is in use: the stored one is kept.
    monkeypatch.setenv("REGTRACK_CONFIG_DIR", str(settings_dir(tmp_path, "[run]\n")))

    again = Job.from_config(stored, job.loadgen, None)

    assert again.config() == job.config()
    assert again.config().settings_file == stored.settings_file != settings_source()
    assert again.planned() == job.planned() and again.visits() == job.visits()
    fields = {f.name for f in dataclasses.fields(Job) if f.name != "docker"}
    assert {n for n in fields if getattr(again, n) != getattr(job, n)} == set()
