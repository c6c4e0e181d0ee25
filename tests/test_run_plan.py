"""The run's plan and its versions as typed records: what is stored is read back equal,
and what an older regtrack stored is read with the defaults it had then."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from regtrack.core.errors import BadInput
from regtrack.plan.records import (
    BisectionRole,
    LoadgenChoice,
    LoadgenProbe,
    Merged,
    Printed,
    RunPurpose,
    ServerData,
    Shard,
    Skipped,
)
from regtrack.plan.run_plan import RunPlan, UnreadablePlan
from regtrack.results.store import Store
from regtrack.targets.target import BuildFacts, DockerImage, RangePlace, Target
from tests.conftest import stored_plan

FIXTURES = Path(__file__).parent / "fixtures"
EVERY_FACT = Target(
    label="a1b2c3d", spec="7.0.0..7.0.15", kind="git", binary="/cache/b/src/redis-server",
    binary_sha256="ab" * 32, commit="a1b2c3d" + "0" * 33, ref="range 7.0.0..7.0.15",
    source_repo="/mirror", image="regtrack/redis:build-a1b2", resolved_path=None, tree=None,
    source_version="7.0.15", commit_date="2024-01-09T10:00:00+00:00", subject="Fix a leak",
    author="A <a@b>", range=RangePlace("7.0.0..7.0.15", 3, 40, 8),
    build=BuildFacts(flags=("MALLOC=libc",), compiler="gcc 12", environment={"CFLAGS": "-O1"},
                     commit="a1b2c3d" + "0" * 33, build_key="k", directory="/cache/b",
                     server="/cache/b/src/redis-server", benchmark=None, seconds=41.5,
                     server_version="Redis server v=7.0.15", log="/cache/b/build.log",
                     cached=False),
    docker=DockerImage("regtrack/redis:build-a1b2", "imported", "sha256:ff", ("r@sha256:ee",)),
    server_config={"appendonly": "yes"},
)  # fmt: skip


def test_a_target_is_read_back_as_stored_whatever_it_holds():
    stored = json.loads(json.dumps(EVERY_FACT.to_json()))
    assert Target.from_json(stored) == EVERY_FACT
    assert set(stored["details"]) == {
        "source_version", "commit_date", "subject", "author", "range", "build", "docker",
        "server_config",
    }, "facts it has, and no empty ones, are stored"  # fmt: skip
    bare = Target("x", "bin:/usr/bin/redis-server", "bin")
    assert Target.from_json(json.loads(json.dumps(bare.to_json()))) == bare


def test_a_target_of_an_older_regtrack_reads_with_what_it_recorded():
    """A build recorded before its make variables were has flags None (never equal to
    another: results/comparability.py), not the default build's ()."""
    old = {"label": "a", "spec": "7.0.15", "kind": "git", "commit": "c" * 40,
           "details": {"build": {"compiler": "gcc 12"}, "unknown_fact": 1}}  # fmt: skip
    target = Target.from_json(old)
    assert target.build == BuildFacts(flags=None, compiler="gcc 12")
    assert target.server_config is None and target.docker is None


def test_a_plan_is_read_back_equal_to_what_was_stored():
    plan = RunPlan.from_json(
        {
            "workload": {"name": "get-pipeline", "kind": "get-pipeline", "pipelines": [1, 10]},
            "settings": {"repetitions": 4, "seed_offset": 7000, "pairing": "time"},
            "cpus": {"server_cpus": "0", "client_cpus": "1"},
            "targets": [EVERY_FACT.to_json()],
        }
    )
    full = RunPlan(
        **{
            **plan.__dict__,
            "metric": "both",
            "server_data": ServerData("/tmp", "/", "ext4", "/dev/vda", True),
            "narrowed": {2: ("throughput",)},
            "planned_trials": 16,
            "callgrind_hz": 1,
            "seeds": "fixed",
            "loadgen_choice": LoadgenChoice("memtier", "why", LoadgenProbe(10, 1, 97.0, 60.0, 4e5)),
            "throughput_method": "paired in time",
            "skipped": (Skipped("c", "c" * 40, None, "does not build"),),
            "shard": Shard(2, 3, "CI_NODE_INDEX"),
            "purpose": RunPurpose(
                "sequential", Printed("a", None, ("x",)), BisectionRole(3, "step")
            ),
            "merged": Merged((4, 6), ("valgrind: 3.19 / 3.22",)),
        }
    ).identified()
    again = RunPlan.from_json(json.loads(json.dumps(full.to_json())))
    assert again == full
    assert again.seed_offset == 7000 and again.plan_id == full.identity() != ""


def test_a_plan_stored_before_most_facts_reads_with_the_defaults_of_then():
    """tests/fixtures/schema-v4.db was written by regtrack 278c5fe: no pairing (separate
    trials), no seeds record, no server data, load generator choice or throughput method."""
    with sqlite3.connect(FIXTURES / "schema-v4.db") as conn:
        (config,) = conn.execute("SELECT config FROM runs ORDER BY id LIMIT 1").fetchone()
    plan = RunPlan.from_json(json.loads(config))
    assert plan.settings.pairing == "separate" and plan.throughput_method == "separate trials"
    assert (plan.seeds, plan.server_data, plan.loadgen_choice, plan.shard) == (None,) * 4
    assert plan.seed_offset == 0 and plan.purpose == RunPurpose() and plan.merged is None
    assert [t.resolved_path for t in plan.targets] == ["/usr/bin/redis-check-rdb"]


@pytest.mark.parametrize(
    "config",
    [{}, {"workload": {"kind": "nope"}}, {"workload": {"name": "w", "kind": "get-pipeline"},
                                           "targets": [{"label": "a"}]}],
)  # fmt: skip
def test_what_is_not_a_plan_is_one_line(config, tmp_path):
    with pytest.raises(UnreadablePlan) as raised:
        RunPlan.from_json(config)
    assert "\n" not in str(raised.value)
    store = Store.open(tmp_path / "r.db")
    run_id = store.create_run([], stored_plan(), {}, {})
    with store.transaction() as conn:
        conn.execute("UPDATE runs SET config = ? WHERE id = ?", (json.dumps(config), run_id))
    with pytest.raises(BadInput, match=f"runs row {run_id}.*its plan cannot be read"):
        store.run(run_id)
