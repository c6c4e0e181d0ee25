"""`ci --latency-load` against a stored baseline (flows/latency_baseline.py): the candidate
is offered the very rates the stored run was, its blocks pair with the stored run's by
seed, and the open-loop percentiles are compared across the runs; a stored run that
cannot give those rates is refused in one line. In process, on modelled trials
(tests/fakebench.py); a real latency run is test_latency_real.py."""

from __future__ import annotations

import json
import sqlite3

import pytest

from regtrack.core.errors import BadInput
from regtrack.flows.latency_baseline import StoredLatency, followed
from regtrack.plan.latency_plan import LatencyPlan
from regtrack.results.records import StoredOpenLoop
from tests import fakebench
from tests.conftest import cli_in_process

FAST = ["--pipelines", "10", "--repetitions", "4", "--no-report", "--pairing", "separate"]
INSTEAD = "measure both here (--baseline-version SPEC)"


def _saved(tmp_path, redis_server, model, *latency: str) -> str:
    """A run of `shipped` alone (with ``latency``'s open-loop options), saved as 'prod'."""
    db = str(tmp_path / "r.db")
    first = cli_in_process("run", "--versions", f"shipped=bin:{redis_server}", *FAST,
                           *latency, "--db", db, measuring=model)  # fmt: skip
    assert first.returncode == 0, first.stderr
    saved = cli_in_process("baseline", "save", "prod", "--run", "1", "--db", db)
    assert saved.returncode == 0, saved.stderr
    return db


def _gate(db: str, redis_server: str, model, *extra: str):
    return cli_in_process(
        "ci", "--baseline-name", "prod", "--candidate-version", f"new=bin:{redis_server}",
        "--pipelines", "10", "--metric", "throughput", "--no-report", "--db", db, *extra,
        measuring=model,
    )  # fmt: skip


def _rates(db: str, run_id: int) -> dict[str, set[float]]:
    rows = sqlite3.connect(db).execute(
        "SELECT t.point, o.offered_rate FROM trial_open_loop o JOIN trials t ON t.id = "
        "o.trial_id WHERE t.run_id = ?",
        (run_id,),
    )
    found: dict[str, set[float]] = {}
    for point, rate in rows:
        found.setdefault(point, set()).add(rate)
    return found


def test_the_candidate_is_offered_the_stored_baselines_rates(tmp_path, redis_server):
    """The candidate's own capacity is a third lower, so its own --latency-load 0.5 would
    offer it a third less; it is offered the baseline's rate at load=0.5 (not load=0.8,
    which the baseline also measured), no capacity is measured, and its doubled p99 is a
    regression across the runs, the other percentiles compared beside it."""
    model = fakebench.Model(
        throughput={"shipped": 400_000.0, "new": 270_000.0},
        latency_p99={"shipped": 0.2, "new": 0.4},
    )
    db = _saved(tmp_path, redis_server, model, "--load", "0.5,0.8")
    out = tmp_path / "gate.json"
    gate = _gate(db, redis_server, model, "--latency-load", "0.5", "--json", str(out))
    assert gate.returncode == 1, gate.stdout + gate.stderr
    assert "measuring the capacity" not in gate.stderr
    assert "open-loop rates of the stored baseline 'prod' (run 1)" in gate.stderr
    stored, measured = _rates(db, 1), _rates(db, 2)
    assert set(measured) == {"load=0.5"} and measured["load=0.5"] == stored["load=0.5"]
    (rate,) = measured["load=0.5"]
    assert rate == pytest.approx(0.5 * 400_000, rel=0.2)  # the baseline's capacity, modelled
    config = json.loads(
        sqlite3.connect(db).execute("SELECT config FROM runs WHERE id = 2").fetchone()[0]
    )
    assert config["latency"]["loads"] == [0.5]
    assert config["latency"]["capacity_from"].startswith("stored baseline 'prod', run 1: ")
    data = json.loads(out.read_text())
    verdicts = {g["metric"]: g["verdict"] for g in data["gate"]}
    assert verdicts["open_loop_p99"] == "regression", verdicts
    pooled = {r["metric"]: r for r in data["pooled"]}
    for name in ("open_loop_p50", "open_loop_p999"):
        assert pooled[name]["change_pct"] > 50, pooled[name]
    assert "**p99 latency (open loop)** over load=0.5 (4 blocks)" in gate.stdout
    shift = data["run_shifts"]["open_loop_p99"]
    assert shift["sd_pct"] == 10.0, shift  # latency's default shift across runs


def test_an_a_a_gate_against_a_stored_baseline_finds_no_latency_regression(tmp_path, redis_server):
    """The same build offered the same arrivals as its stored run: no p99 regression."""
    model = fakebench.Model()
    db = _saved(tmp_path, redis_server, model, "--load", "0.5")
    out = tmp_path / "gate.json"
    gate = _gate(db, redis_server, model, "--latency-load", "0.5", "--json", str(out))
    assert gate.returncode == 0, gate.stdout + gate.stderr
    verdicts = {g["metric"]: g["verdict"] for g in json.loads(out.read_text())["gate"]}
    assert verdicts["open_loop_p99"] != "regression", verdicts


def test_a_gate_without_latency_leaves_the_stored_open_loop_trials_out(tmp_path, redis_server):
    """Points the gate does not measure (the stored run's loads) have nothing to pair with:
    they are not compared, so they cannot keep the gate undecided."""
    model = fakebench.Model()
    db = _saved(tmp_path, redis_server, model, "--load", "0.5")
    out = tmp_path / "gate.json"
    gate = _gate(db, redis_server, model, "--json", str(out))
    assert gate.returncode == 0, gate.stdout + gate.stderr
    data = json.loads(out.read_text())
    # (syscalls per op, counted in the throughput trials, gate beside it)
    assert [g["metric"] for g in data["gate"]] == ["throughput", "syscalls_per_op"]
    assert "load=0.5" not in gate.stdout and _rates(db, 2) == {}


@pytest.mark.parametrize(
    ("stored", "asked", "words"),
    [
        ((), ("--latency-load", "0.5"), "it has no open-loop trials of 'shipped'"),
        (("--load", "0.5"), ("--latency-load", "0.8"), "give --latency-load 0.5 (or part"),
        (("--rate", "5000"), ("--latency-load", "0.5"), "absolute rates (rate=5000)"),
        (("--load", "0.5", "--arrival", "constant"), ("--latency-load", "0.5"),
         "pass --arrival constant"),
    ],
)  # fmt: skip
def test_a_stored_baseline_that_cannot_give_the_rates_is_refused_before_measuring(
    tmp_path, redis_server, stored, asked, words
):
    """One line, exit 2, before anything of the candidate is measured."""
    model = fakebench.Model()
    db = _saved(tmp_path, redis_server, model, *stored)
    model.visits.clear()
    gate = _gate(db, redis_server, model, *asked)
    assert gate.returncode == 2, gate.stdout + gate.stderr
    assert words in gate.stderr and INSTEAD in gate.stderr, gate.stderr
    assert "Traceback" not in gate.stderr and model.visits == []


def test_another_engine_binary_is_refused_unless_forced(tmp_path, redis_server):
    """The engine times the open-loop trials: a stored run's other engine is a difference
    of measuring, refused as a load generator's is, and named when forced."""
    model = fakebench.Model()
    db = _saved(tmp_path, redis_server, model, "--load", "0.5")
    conn = sqlite3.connect(db)
    conn.execute(
        "UPDATE runs SET config = json_set(config, '$.latency.engine_sha256', 'e' || "
        "substr(json_extract(config, '$.latency.engine_sha256'), 2)) WHERE id = 1"
    )
    conn.commit()
    refused = _gate(db, redis_server, model, "--latency-load", "0.5")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "open-loop engine binary" in refused.stderr and "--force" in refused.stderr
    forced = _gate(db, redis_server, model, "--latency-load", "0.5", "--force")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert "FORCED" in forced.stdout and "open-loop engine binary" in forced.stdout


def _stored(plan: LatencyPlan | None, *trials: tuple[str, float, bool]) -> StoredLatency:
    made = tuple(
        StoredOpenLoop(n, "shipped", point, n, valid, rate, "poisson", 5.0, 9.0, 10.0, "ns", "")
        for n, (point, rate, valid) in enumerate(trials)
    )
    return StoredLatency("prod", 3, "shipped", plan, made)


def test_the_followed_plan_is_the_stored_capacity_or_one_line_why_not():
    """The asked loads at the stored capacity, the asked engine kept; other connections,
    a trial offered another rate than the plan's, or no valid trial at the load: refused."""
    stored_plan = LatencyPlan(loads=(0.5, 0.8), capacity=100_000.0, capacity_from="shipped")
    asked = LatencyPlan(loads=(0.8,), engine="regtrack-openloop 1", engine_sha256="ab")
    good = _stored(stored_plan, ("load=0.5", 50_000.0, True), ("load=0.8", 80_000.0, True))
    plan = followed(asked, good)
    assert plan.rate("load=0.8") == pytest.approx(80_000.0) and plan.loads == (0.8,)
    assert plan.engine_sha256 == "ab" and plan.capacity_from.endswith(": shipped")
    for stored, words in (
        (_stored(LatencyPlan(loads=(0.8,), capacity=1e5, connections=8), ("load=0.8", 8e4, True)),
         "over 8 connections"),
        (_stored(stored_plan, ("load=0.8", 70_000.0, True)), "was offered 70,000/s"),
        (_stored(stored_plan, ("load=0.8", 80_000.0, False)), "no valid open-loop trial"),
        (_stored(LatencyPlan(loads=(0.8,)), ("load=0.8", 8e4, True)), "keeps no capacity"),
        (_stored(None), "no open-loop trials"),
    ):  # fmt: skip
        with pytest.raises(BadInput, match=words):
            followed(asked, stored)
