"""Simulated cycles (--metric cycles) on constructed data: a callgrind dump with cache and
branch events read whole, the weights, the comparability key, the store and its migration,
and explain by misses. (A real server under the simulation: test_cycles_real.py.)"""

from __future__ import annotations

import dataclasses
import sqlite3

import pandas as pd
import pytest

from regtrack.analysis import attribution
from regtrack.bench.callgrind import profile as profile_mod
from regtrack.bench.callgrind.protocol import function_costs, simulated
from regtrack.core import cycles
from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.core.records import TrialRecord
from regtrack.core.settings import load_settings, load_thresholds
from regtrack.results import comparability, loaded, stored_trials
from regtrack.results.migrations import SCHEMA_VERSION
from regtrack.results.records import RunCosts
from regtrack.results.store import Store
from regtrack.targets.target import Target
from tests.conftest import stored_plan

EVENTS_LINE = "events: " + " ".join(cycles.EVENTS)
GEOMETRY = "\n".join(f"desc: {part}" for part in cycles.geometry_text().split("; "))
# Two functions: main (own cost on two lines, then a call) and hot (its own cost), in
# callgrind's form: name compression, a call's inclusive line, trailing zeros left out.
DUMP = f"""\
# callgrind format
version: 1
creator: callgrind-3.19.0
{GEOMETRY}

positions: line
events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw Bc Bcm Bi Bim
summary: 1130 300 100 6 30 4 2 20 1 40 5 2 1

ob=(1) /bin/redis-server
fl=(1) server.c
fn=(1) main
10 100 50 20 2 5 1 1 2 0 10 1
+1 30 10
cfn=(2) hot
calls=1 20
+1 1000 240 80 4 25 3 1 18 1 30 4 2 1

fn=(2)
20 1000 240 80 4 25 3 1 18 1 30 4 2 1

totals: 1130 300 100 6 30 4 2 20 1 40 5 2 1
"""


def _dump(tmp_path, text=DUMP):
    path = tmp_path / "callgrind.out.1"
    path.write_text(text)
    return profile_mod.parse(path)


def test_every_event_is_read_per_function_exclusive_and_inclusive(tmp_path):
    profile = _dump(tmp_path)
    assert profile.events == list(cycles.EVENTS)
    assert profile.totals["DLmr"] == 20 and profile.totals["Bcm"] == 5
    assert profile.geometry == cycles.geometry_text()
    by_name = profile.by_key()
    main, hot = by_name["main"], by_name["hot"]
    assert (main.exclusive, main.inclusive) == (130, 1130)
    assert (hot.exclusive, hot.inclusive) == (1000, 1000)
    assert main.exclusive_events["D1mr"] == 5 and main.exclusive_events["Bim"] == 0
    assert main.inclusive_events["DLmr"] == 20  # its own 2 and hot's 18
    assert hot.exclusive_events["DLmr"] == 18
    for event in cycles.EVENTS:  # exclusive costs add up to the totals, event by event
        assert main.exclusive_events[event] + hot.exclusive_events[event] == profile.totals[event]


def test_an_instructions_only_dump_reads_as_before(tmp_path):
    """Without the simulation only Ir is read: no per-event dictionaries, no geometry."""
    text = "\n".join(
        line.split()[0] + (" " + line.split()[1] if len(line.split()) > 1 else "")
        if line[:1].isdigit() or line[:1] == "+"
        else line
        for line in DUMP.splitlines()
        if not line.startswith("desc:")
    ).replace(EVENTS_LINE, "events: Ir")
    text = text.replace("summary: 1130 300 100 6 30 4 2 20 1 40 5 2 1", "summary: 1130")
    text = text.replace("totals: 1130 300 100 6 30 4 2 20 1 40 5 2 1", "totals: 1130")
    profile = _dump(tmp_path, text)
    assert profile.totals == {"Ir": 1130} and profile.geometry == ""
    main = profile.by_key()["main"]
    assert (main.exclusive, main.inclusive, main.exclusive_events) == (130, 1130, {})


def test_cycles_weigh_each_miss_and_the_function_costs_add_up(tmp_path):
    profile = _dump(tmp_path)
    weights = cycles.Weights(l1=10, ll=100, branch=20)
    facts = simulated(profile, weights)
    # Ir 1130 + 10 x (6+30+4) L1 + 100 x (2+20+1) LL + 20 x (5+1) mispredicted
    assert facts.cycles == 1130 + 400 + 2300 + 120
    assert (facts.dlmr, facts.bim, facts.geometry) == (20, 1, cycles.geometry_text())
    costs = {c.function: c for c in function_costs(profile, weights)}
    assert costs["hot"].cycles == 1000 + 10 * 32 + 100 * 20 + 20 * 5
    assert sum(c.cycles for c in costs.values()) == facts.cycles


def test_a_dump_without_the_simulation_or_with_other_caches_cannot_measure_cycles(tmp_path):
    weights = cycles.Weights(10, 100, 10)
    other = DUMP.replace("33554432 B", "8388608 B")
    with pytest.raises(CannotMeasure, match="other caches"):
        simulated(_dump(tmp_path, other), weights)
    plain = DUMP.replace(
        "events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw Bc Bcm Bi Bim", "events: Ir"
    )
    with pytest.raises(CannotMeasure, match="no Dr event"):
        simulated(_dump(tmp_path, plain), weights)


def test_weights_and_thresholds_come_from_the_settings_file_checked(tmp_path):
    good = tmp_path / "good.toml"
    good.write_text("[run]\ncycle_weight_ll = 250\n[verdict]\ncycles_pct = 0.8\n")
    settings = load_settings(good)
    assert settings.cycle_weights == cycles.Weights(10.0, 250.0, 10.0)
    thresholds = load_thresholds(path=good)
    assert thresholds.for_metric("cycles_per_op") == 0.8
    assert thresholds.for_metric("ll_misses_per_op") == thresholds.misses
    bad = tmp_path / "bad.toml"
    bad.write_text("[run]\ncycle_weight_l1 = -1\n")
    with pytest.raises(BadInput, match=r"cycle_weight_l1.*0 <= value <= 100000"):
        load_settings(bad)


def test_the_simulated_caches_and_weights_are_part_of_the_comparability_key():
    env = {"valgrind": "valgrind-3.19.0"}
    plain = stored_plan(metric="instructions")
    simulated_plan = stored_plan(metric="cycles", cache_geometry=cycles.geometry_text())
    key = comparability.key(simulated_plan, env, {})
    assert key["cache simulation"] == cycles.geometry_text()
    assert key["cycle weights"] == "L1 miss 10, LL miss 200, mispredicted branch 10"
    # instructions alone against cycles: comparable (Ir does not depend on the simulation)
    assert comparability.differences(comparability.key(plain, env, {}), key) == []
    other_caches = dataclasses.replace(simulated_plan, cache_geometry="LL cache: 8 MiB")
    heavier = dataclasses.replace(
        simulated_plan,
        settings=simulated_plan.settings.model_copy(update={"cycle_weight_ll": 300.0}),
    )
    assert any(
        d.startswith("cache simulation")
        for d in comparability.differences(key, comparability.key(other_caches, env, {}))
    )
    assert any(
        d.startswith("cycle weights")
        for d in comparability.differences(key, comparability.key(heavier, env, {}))
    )
    # a cycles run stored without its caches recorded is never comparable, not even to itself
    unknown = comparability.key(dataclasses.replace(simulated_plan, cache_geometry=None), env, {})
    assert comparability.differences(unknown, unknown)


def _trial(seq, label="a", cycles_=None):
    t = TrialRecord(seq, 0, label, "get-pipeline", "pipeline=10", {"pipeline": 10}, "now")
    t.mode, t.valid, t.server_calls = "instructions", True, 100
    t.instructions, t.instructions_per_op = 300_000, 3000.0
    if cycles_ is not None:
        t.cache_sim = simulated(_profile_like(cycles_), cycles.Weights(10, 100, 10))
    return t


def _profile_like(ll):
    totals = dict.fromkeys(cycles.EVENTS, 0) | {"Ir": 300_000, "D1mr": 2 * ll, "DLmr": ll}
    return profile_mod.Profile(
        events=list(cycles.EVENTS), totals=totals, caches=cycles.geometry_text().split("; ")
    )


def _stored(path):
    store = Store.open(path)
    run_id = store.create_run(["test"], stored_plan(metric="cycles"), {}, {})
    ids = {
        label: store.add_target(run_id, i, Target(label, "bin:/x", "bin"), {})
        for i, label in enumerate("ab")
    }
    store.add_trial(run_id, ids["a"], _trial(0, "a", cycles_=10))
    store.add_trial(run_id, ids["b"], _trial(1, "b", cycles_=110))
    store.add_trial(run_id, ids["a"], _trial(2, "a"))  # not simulated
    return store, run_id


def test_simulated_events_are_stored_per_trial_and_read_per_op(tmp_path):
    store, run_id = _stored(tmp_path / "r.db")
    a, b, plain = store.trials(run_id)
    # a: Ir 300,000 + 10 x 20 L1 + 100 x 10 LL
    assert (a.cycles, a.l1_misses, a.ll_misses, a.branch_misses) == (301_200, 20, 10, 0)
    assert plain.cycles is None and plain.ll_misses is None
    facts = stored_trials.cache_sim(store.conn, store.path, run_id)
    assert facts[a.id].geometry == cycles.geometry_text() and facts[b.id].dlmr == 110
    frame = loaded.trials_frame(store, run_id)
    assert list(frame["cycles_per_op"].iloc[:2]) == [3012.0, 3000.0 + (2200 + 11000) / 100]
    assert list(frame["ll_misses_per_op"].iloc[:2]) == [0.1, 1.1]
    assert frame["cycles_per_op"].isna().iloc[2]
    store.close()


def test_a_database_from_before_the_simulation_upgrades_and_reads_none(tmp_path):
    """A schema 11 database (no trial_cache_sim, function costs without cycles) opens,
    gains them, and its trials and function costs read as not simulated."""
    path = tmp_path / "v11.db"
    store = Store.open(path)
    run_id = store.create_run(["test"], stored_plan(metric="instructions"), {}, {})
    target = store.add_target(run_id, 0, Target("a", "bin:/x", "bin"), {})
    store.add_trial(run_id, target, _trial(0))
    store.close()
    with sqlite3.connect(path) as conn:
        before_cache_sim(conn)
        conn.execute("INSERT INTO function_costs VALUES (1, 'main', 'f', 'o', 300000, 300000)")
        conn.execute("PRAGMA user_version = 11")
    conn.close()
    store = Store.open(path, create=False)
    assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 13
    (trial,) = store.trials(run_id)
    assert trial.cycles is None and trial.instructions_per_op == 3000.0
    (cost,) = stored_trials.function_costs(store.conn, store.path, run_id)
    assert cost.exclusive == 300000 and cost.cycles is None
    store.close()


def before_cache_sim(conn: sqlite3.Connection) -> None:
    """A schema 13 database made one of schema 11 (regtrack before --metric cycles and
    before syscalls were counted by name)."""
    conn.execute("DROP TABLE trial_syscalls")
    conn.execute("DROP TABLE trial_cache_sim")
    for column in ("cycles", "l1_misses", "ll_misses", "branch_misses"):
        conn.execute(f"ALTER TABLE function_costs DROP COLUMN {column}")


def _costs(rows):
    frame = pd.DataFrame(
        rows,
        columns=["trial_id", "target", "function", "exclusive", "cycles", "l1_misses",
                 "ll_misses", "branch_misses"],
    )  # fmt: skip
    frame = frame.assign(
        inclusive=frame["exclusive"], point="pipeline=10", workload="get-pipeline",
        server_calls=100, point_order=10,
    )  # fmt: skip
    for name in ("cycles", "l1_misses", "ll_misses", "branch_misses"):
        frame[name] = frame[name].astype("Int64")
    return RunCosts(run_id=1, labels=("base", "cand"), costs=frame)


def test_explain_by_cycles_names_the_function_that_misses_and_how_often():
    """The candidate's getGenericCommand misses the last level once per GET more (100 per
    100 calls): explain --metric cycles ranks it first with +1.00 LL misses per op, while
    by instructions it moved by 12 of 3,000."""
    run = _costs(
        [
            (1, "base", "getGenericCommand", 1000, 1100, 10, 0, 0),
            (1, "base", "dictFind", 2000, 2500, 50, 0, 0),
            (2, "cand", "getGenericCommand", 2200, 2200 + 10 * 110 + 100 * 100, 110, 100, 0),
            (2, "cand", "dictFind", 2000, 2500, 50, 0, 0),
        ]
    )
    (table,) = attribution.attribute(run, "base", "cand", metric="cycles")
    first = table["functions"][0]
    assert table["metric"] == "cycles" and first["function"] == "getGenericCommand"
    assert first["diff_per_op"] == pytest.approx((13300 - 1100) / 100)
    assert first["misses_diff_per_op"] == {"l1_misses": 1.0, "ll_misses": 1.0, "branch_misses": 0}
    (by_instructions,) = attribution.attribute(run, "base", "cand")
    assert by_instructions["functions"][0]["diff_per_op"] == pytest.approx(12.0)
    assert "misses_diff_per_op" not in by_instructions["functions"][0]
    plain = _costs([(1, "base", "f", 1, None, None, None, None), (2, "cand", "f", 1, None, None,
                                                                   None, None)])  # fmt: skip
    with pytest.raises(BadInput, match="measure with --metric cycles"):
        attribution.attribute(plain, "base", "cand", metric="cycles")


def test_a_cycles_answer_in_the_comment_says_how_the_misses_per_op_moved():
    """The pull-request comment's gate row for simulated cycles names the misses behind
    it, per op (candidate minus baseline, averaged over the answer's points)."""
    from regtrack.output.github_comment import CiVerdict, CommentContext, comment_body
    from tests import answers

    cycles_answer = answers.pooled(
        metric="cycles_per_op", unit="cycles/op", higher_is_better=False, change_pct=4.8,
        ci_low_pct=4.5, ci_high_pct=5.1, threshold_pct=1.0,
    )  # fmt: skip
    moved = [
        answers.point(metric=m, unit="", higher_is_better=False, baseline_value=b,
                      candidate_value=c, gating=False, verdict="regression")
        for m, b, c in (("l1_misses_per_op", 49.9, 51.3), ("ll_misses_per_op", 13.9, 15.6),
                        ("branch_misses_per_op", 22.4, 22.4))
    ]  # fmt: skip
    verdict = CiVerdict(
        outcome="regression", headline="x", repetitions=4, baseline="a", candidate="b",
        workload="get-pipeline", gate=(cycles_answer,), records=tuple(moved), forced=(),
    )  # fmt: skip
    body = comment_body(verdict, CommentContext())
    row = next(line for line in body.splitlines() if "simulated cycles per op" in line)
    assert "per op: L1 misses +1.40, LL misses +1.70, mispredicted branches +0.00" in row
