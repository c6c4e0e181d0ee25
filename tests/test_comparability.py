"""The comparability key: every setting that changes what is measured is in it, and
settings that only change precision are not."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from regtrack.core.records import TrialRecord
from regtrack.core.settings import Thresholds
from regtrack.plan.records import Printed
from regtrack.plan.run_plan import RunPlan
from regtrack.results import comparability, loaded
from regtrack.results.run_row import HostFacts, LoadgenFacts, RunRow
from regtrack.results.store import Store, now
from regtrack.targets.target import BuildFacts, Target
from tests.conftest import cli_in_process

GCC = "cc (Debian 12.2.0-14) 12.2.0"

CONFIG = {
    "metric": "both",
    "runtime": "native",
    "memory": None,
    "settings": {"duration": 3.0, "warmup": 1.0, "repetitions": 4, "instruction_requests": 100000},
    "workload": {"name": "get-pipeline", "kind": "get-pipeline", "clients": 50, "keys": 100000,
                 "data_size": 1000, "threads": 1, "pipelines": [10, 30], "description": "GETs"},
    "cpus": {"server_cpus": "0", "client_cpus": "1"},
    "callgrind_hz": 1,
    "targets": [{"label": "a", "spec": "a", "kind": "git",
                 "details": {"build": {"flags": [], "compiler": GCC}}}],
}  # fmt: skip
ENV = {"cpu_model": "Xeon", "cpu_count": 2, "physical_cores": 2, "kernel": "6.1", "load": 1,
       "valgrind": "valgrind-3.19.0"}  # fmt: skip
LOADGEN = {"name": "redis-benchmark", "sha256": "ab" * 32, "version": "7.0.15"}


def _diff(change) -> list[str]:
    config, env, loadgen = copy.deepcopy(CONFIG), dict(ENV), dict(LOADGEN)
    change(config, env, loadgen)
    return comparability.differences(
        comparability.key(RunPlan.from_json(CONFIG), ENV, LOADGEN),
        comparability.key(RunPlan.from_json(config), env, loadgen),
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda c, e, lg: c.update(runtime="docker", docker_images="build"),
         ["docker images null != build", "runtime native != docker"]),
        (lambda c, e, lg: c["workload"].update(clients=10), ["clients 50 != 10"]),
        (lambda c, e, lg: c["workload"].update(keys=1000000), ["keys 100000 != 1000000"]),
        (lambda c, e, lg: c["workload"].update(data_size=32), ["data_size 1000 != 32"]),
        (lambda c, e, lg: c["cpus"].update(server_cpus="1", client_cpus="0"),
         ["client cpus 1 != 0", "server cpus 0 != 1"]),
        (lambda c, e, lg: lg.update(sha256="cd" * 32),
         ["load generator binary abababababab... != cdcdcdcdcdcd..."]),
        (lambda c, e, lg: c["workload"].update(threads=4), ["threads 1 != 4"]),
        (lambda c, e, lg: c["settings"].update(instruction_requests=200000),
         ["instruction requests 100000 != 200000"]),
        (lambda c, e, lg: e.update(kernel="6.18"), ["kernel 6.1 != 6.18"]),
        # What made and ran the counted server (counted: metric "both").
        (lambda c, e, lg: e.update(valgrind="valgrind-3.22.0"),
         ["valgrind valgrind-3.19.0 != valgrind-3.22.0"]),
        (lambda c, e, lg: c["targets"][0]["details"]["build"].update(
            compiler="cc (Debian 14.2.0-19) 14.2.0"),
         [f"compiler {GCC} != cc (Debian 14.2.0-19) 14.2.0"]),
        (lambda c, e, lg: c["targets"][0]["details"]["build"].update(flags=["MALLOC=libc"]),
         ["build flags default != MALLOC=libc"]),
        (lambda c, e, lg: c["targets"][0]["details"]["build"].update(
            environment={"CFLAGS": "-O1"}),
         ["build flags default != default (environment CFLAGS=-O1)"]),
        (lambda c, e, lg: c.update(targets=[{"label": "a", "spec": "a", "kind": "bin"}]),
         [f"build flags default != {comparability.NOT_BUILT}",
          f"compiler {GCC} != {comparability.NOT_BUILT}"]),
    ],
)  # fmt: skip
def test_each_setting_that_changes_what_is_measured_is_a_difference(change, expected):
    assert _diff(change) == expected


@pytest.mark.parametrize(
    "change",
    [
        lambda c, e, lg: c["settings"].update(duration=10.0, warmup=2.0, repetitions=30),
        lambda c, e, lg: c["workload"].update(pipelines=[1, 5], description="other words"),
        lambda c, e, lg: e.update(load=9),
        lambda c, e, lg: lg.update(version="7.0.15 (same binary)"),
    ],
)
def test_precision_and_documentation_are_not_differences(change):
    assert _diff(change) == []


def test_instruction_settings_matter_only_when_both_runs_counted_instructions():
    def throughput_only(c, e, lg):
        c.update(metric="throughput")
        c["settings"].update(instruction_requests=200000)

    assert _diff(throughput_only) == []


def test_a_run_older_than_the_key_gets_it_from_its_stored_facts():
    stored = _row(RunPlan.from_json(CONFIG), ENV, None)
    assert comparability.of_run(stored) == comparability.key(
        RunPlan.from_json(CONFIG), ENV, LOADGEN
    )
    assert comparability.digest(comparability.of_run(stored)) == comparability.digest(
        comparability.key(RunPlan.from_json(CONFIG), ENV, LOADGEN)
    )


def test_what_counted_instructions_does_not_matter_to_throughput_runs():
    def tools(c, e, lg):
        e.update(valgrind="valgrind-3.22.0")
        c["targets"][0]["details"]["build"].update(compiler="clang 18", flags=["MALLOC=libc"])

    def throughput_only(config, env, loadgen):
        config.update(metric="throughput")

    def throughput_and_tools(c, e, lg):
        throughput_only(c, e, lg)
        tools(c, e, lg)

    assert _diff(tools) == [
        "build flags default != MALLOC=libc",
        f"compiler {GCC} != clang 18",
        "valgrind valgrind-3.19.0 != valgrind-3.22.0",
    ]
    # A throughput run against one that counted too ("both"): only throughput is common.
    assert _diff(throughput_and_tools) == []
    # Two throughput runs: the tools that count are not in their keys.
    config = copy.deepcopy(CONFIG)
    throughput_only(config, None, None)
    other_config, other_env = copy.deepcopy(config), dict(ENV)
    tools(other_config, other_env, None)
    base, cand = (
        comparability.key(RunPlan.from_json(config), ENV, LOADGEN),
        comparability.key(RunPlan.from_json(other_config), other_env, LOADGEN),
    )
    assert (base["valgrind"], base["compiler"], base["build flags"]) == (None, None, None)
    assert comparability.differences(base, cand) == []


def _before_the_tools(config, env) -> dict:
    """A run as stored before valgrind, compiler and build flags entered the key: its
    stored key lacks them (its config and environment are as stored then)."""
    stored = comparability.key(RunPlan.from_json(config), env, LOADGEN)
    for name in ("valgrind", "compiler", "build flags"):
        del stored[name]
    plan = RunPlan.from_json(config)
    return _row(plan, env, stored)


def _row(plan: RunPlan, env: dict, stored_key: dict | None) -> RunRow:
    """A run's row as the store reads it back."""
    return RunRow(
        1, plan, HostFacts.read(env), LoadgenFacts.read(LOADGEN), comparability=stored_key
    )


def test_a_run_stored_before_the_tools_entered_the_key_gets_what_it_recorded():
    """Its environment kept valgrind's version and its builds their compiler and flags
    (regtrack recorded them before the key used them): derived, they compare as usual."""
    old = comparability.of_run(_before_the_tools(CONFIG, ENV))
    assert old == comparability.key(RunPlan.from_json(CONFIG), ENV, LOADGEN)
    assert (
        comparability.differences(old, comparability.key(RunPlan.from_json(CONFIG), ENV, LOADGEN))
        == []
    )
    newer = {**ENV, "valgrind": "valgrind-3.22.0"}
    assert comparability.differences(
        old, comparability.key(RunPlan.from_json(CONFIG), newer, LOADGEN)
    ) == ["valgrind valgrind-3.19.0 != valgrind-3.22.0"]


def test_a_fact_a_counting_run_did_not_record_is_unknown_and_never_equal():
    unrecorded = {k: v for k, v in ENV.items() if k != "valgrind"}
    old = comparability.of_run(_before_the_tools(CONFIG, unrecorded))
    assert old["valgrind"] == comparability.UNKNOWN
    new = comparability.key(RunPlan.from_json(CONFIG), ENV, LOADGEN)
    assert comparability.differences(old, new) == ["valgrind unknown != valgrind-3.19.0"]
    assert comparability.differences(old, old) == ["valgrind unknown != unknown"]
    no_compiler = copy.deepcopy(CONFIG)
    del no_compiler["targets"][0]["details"]["build"]["compiler"]
    assert comparability.differences(
        new, comparability.key(RunPlan.from_json(no_compiler), ENV, LOADGEN)
    ) == [f"compiler {GCC} != unknown"]
    # Throughput compares as before: the run did not count, so nothing is unknown.
    throughput = {**copy.deepcopy(CONFIG), "metric": "throughput"}
    assert (
        comparability.differences(
            comparability.of_run(_before_the_tools(throughput, unrecorded)),
            comparability.key(RunPlan.from_json(throughput), ENV, LOADGEN),
        )
        == []
    )


# --- across stored runs, as `compare --baseline-run` sees them (real SQLite) ---------------


def _store_run(
    store: Store,
    *,
    metric: str = "instructions",
    valgrind: str | None = "valgrind-3.19.0",
    compiler: str = GCC,
    flags: tuple[str, ...] = (),
    stored_key: bool = True,
) -> int:
    """One complete run of version "a" (a build of 7.0.15), 4 seeded repetitions at
    pipeline=10. ``stored_key=False``: stored as before the tools entered the key, and
    ``valgrind=None``: no version in its environment."""
    target = Target(label="a", spec="7.0.15", kind="git", commit="c0ffee" * 6 + "c0ff",
                    build=BuildFacts(flags=flags, compiler=compiler))  # fmt: skip
    config = {**copy.deepcopy(CONFIG), "metric": metric, "targets": [target.to_json()]}
    env = (
        {**ENV, "valgrind": valgrind}
        if valgrind
        else {k: v for k, v in ENV.items() if k != "valgrind"}
    )
    if metric == "throughput":
        config["callgrind_hz"] = None
    run_id = store.create_run(["regtrack", "run"], RunPlan.from_json(config), env, LOADGEN)
    if not stored_key:
        old = _before_the_tools(config, env).comparability
        with store.transaction() as conn:
            conn.execute(
                "UPDATE runs SET comparability = ? WHERE id = ?", (json.dumps(old), run_id)
            )
    target_id = store.add_target(run_id, 0, target, {"redis_version": "7.0.15"})
    for rep in range(4):
        record = TrialRecord(
            seq=rep, repetition=rep, target_label="a", workload="get-pipeline",
            point="pipeline=10", params={"pipeline": 10}, started_at=now(), mode=metric,
            seed=f"seed{rep}", wall_s=1.0, requests=20_000, server_calls=20_000,
            syscalls_read=2_000, syscalls_write=2_000, valid=True,
        )  # fmt: skip
        if metric == "instructions":
            record.instructions_per_op = 3500.0 + rep
            record.instructions = int(record.instructions_per_op * 20_000)
        else:
            record.ops_per_sec = 400_000.0 + 1000 * rep
        store.add_trial(run_id, target_id, record)
    store.finish_run(run_id, "complete")
    return run_id


COMPARE = ["compare", "--run", "2", "--baseline-run", "1", "--baseline", "a", "--candidate", "a"]


@pytest.mark.parametrize(
    ("candidate", "difference"),
    [
        ({"valgrind": "valgrind-3.22.0"}, "valgrind valgrind-3.19.0 != valgrind-3.22.0"),
        ({"compiler": "cc (Debian 14.2.0-19) 14.2.0"},
         f"compiler {GCC} != cc (Debian 14.2.0-19) 14.2.0"),
        ({"flags": ("OPTIMIZATION=-O2",)}, "build flags default != OPTIMIZATION=-O2"),
    ],
)  # fmt: skip
def test_counts_made_with_other_tools_are_refused_unless_forced(tmp_path, candidate, difference):
    db = tmp_path / "r.db"
    store = Store.open(db)
    _store_run(store)
    _store_run(store, **candidate)
    store.close()

    refused = cli_in_process(*COMPARE, "--db", str(db))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.strip().splitlines() == [
        f"regtrack: error: run 1 was not measured like this one ({difference}): its numbers "
        "are not comparable. Compare versions measured in one run, or pass --force"
    ]
    forced = cli_in_process(*COMPARE, "--db", str(db), "--force")
    assert forced.returncode == 0, forced.stderr
    assert f"FORCED comparison, not like with like: {difference}" in forced.stdout
    records = json.loads(
        cli_in_process(*COMPARE, "--db", str(db), "--force", "--format", "json").stdout
    )["records"]
    assert records and all(r["forced"] == [difference] for r in records)


def test_throughput_runs_compare_whatever_valgrind_was_installed(tmp_path):
    db = tmp_path / "r.db"
    store = Store.open(db)
    _store_run(store, metric="throughput", valgrind="valgrind-3.19.0")
    _store_run(store, metric="throughput", valgrind="valgrind-3.22.0")
    # The environment records valgrind's version whatever the metric (environment.py).
    assert store.run(2).environment.valgrind == "valgrind-3.22.0"
    store.close()
    shown = cli_in_process(*COMPARE, "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    assert "FORCED" not in shown.stdout and "throughput" in shown.stdout


def test_a_stored_run_without_valgrinds_version_is_compared_only_when_forced(tmp_path):
    db = tmp_path / "r.db"
    store = Store.open(db)
    _store_run(store, valgrind=None, stored_key=False)
    _store_run(store)
    assert "valgrind" not in store.run(1).comparability, "stored as before"
    store.close()
    refused = cli_in_process(*COMPARE, "--db", str(db))
    assert refused.returncode == 2
    assert "(valgrind unknown != valgrind-3.19.0)" in refused.stderr, refused.stderr
    forced = cli_in_process(*COMPARE, "--db", str(db), "--force")
    assert forced.returncode == 0, forced.stderr
    assert "FORCED comparison, not like with like: valgrind unknown != valgrind-3.19.0" in (
        forced.stdout
    )


def test_a_bisection_step_counted_with_other_tools_than_its_ends_is_refused(tmp_path):
    """A resumed bisection after a valgrind upgrade: its next step would be compared seed
    by seed with the ends' run counted by the old valgrind; it stops with one line."""
    from types import SimpleNamespace

    from regtrack.core.errors import BadInput
    from regtrack.flows.bisect import Bisector

    store = Store.open(tmp_path / "r.db")
    ends, alike, upgraded = (
        _store_run(store),
        _store_run(store),
        _store_run(store, valgrind="valgrind-3.22.0"),
    )
    bisector = SimpleNamespace(store=store, alike=set(), id=7)
    Bisector._check_alike(bisector, ends, alike)  # type: ignore[arg-type]
    assert bisector.alike == {(ends, alike)}
    with pytest.raises(BadInput, match=r"run 3 of bisection 7 was not measured like its run 1 "
                       r"\(valgrind valgrind-3.19.0 != valgrind-3.22.0\)"):  # fmt: skip
        Bisector._check_alike(bisector, ends, upgraded)  # type: ignore[arg-type]


def test_a_stored_run_is_read_back_as_one_typed_record(tmp_path):
    """What the flows and the run page read of a run (status, repetitions, seed offset, the
    comparison its command printed, its key, its command and builds) comes from
    results.loaded, alike one run or all of them."""
    store = Store.open(tmp_path / "r.db")
    old = _store_run(store, stored_key=False)
    run_id = _store_run(store)
    plan = store.run(run_id).plan
    settings = plan.settings.model_copy(update={"seed_offset": 7000})
    store.update_config(run_id, dataclasses.replace(plan, settings=settings))
    printed = Printed("a", Thresholds(throughput=2.0))
    with store.transaction() as conn:  # what its command printed is kept from its creation
        conn.execute(
            "UPDATE runs SET config = json_set(config, '$.comparison', json(?)) WHERE id = ?",
            (json.dumps(printed.to_json()), run_id),
        )
    store.finish_run(run_id, "incomplete", "server died")

    run = loaded.stored_run(store, run_id)
    assert (run.status, run.status_detail) == ("incomplete", "server died")
    assert (run.repetitions, run.seed_offset, run.workload) == (4, 7000, "get-pipeline")
    assert (run.metric, run.bisection) == ("instructions", None)
    assert run.printed == printed
    assert run.environment.cpu_model == "Xeon"
    assert [(t.label, t.redis_version) for t in run.targets] == [("a", "7.0.15")]
    # What the run page shows of it: the command, load generator, each version's build.
    assert (run.command, run.loadgen.shown()) == (("regtrack", "run"), LOADGEN)
    (target,) = run.targets
    assert (target.kind, target.commit, target.built_sha) == ("git", "c0ffee" * 6 + "c0ff", "")
    assert target.build == BuildFacts(flags=(), compiler=GCC)
    assert run.key == comparability.of_run(store.run(run_id))
    assert run.comparability == comparability.digest(run.key)
    # A run stored before the tools entered its key: derived, as of_run derives it.
    assert loaded.stored_run(store, old).key == comparability.of_run(store.run(old))
    assert loaded.stored_run(store, old).seed_offset == 0
    assert loaded.stored_runs(store) == {run_id: run, old: loaded.stored_run(store, old)}
