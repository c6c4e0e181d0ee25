"""The typed records analysis answers with: construction, JSON both ways, schema_version
in every results document (no Redis, no database)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from regtrack.analysis import gate
from regtrack.analysis.bisect_records import BisectAnswer
from regtrack.analysis.records import (
    SCHEMA_VERSION,
    ChangeSummary,
    GateContext,
    PooledComparison,
    ServerFacts,
    plain,
)
from regtrack.analysis.run_shift import RunShift
from regtrack.output import bisect_text, ci_summary, tables
from regtrack.results.bisection_plan import BisectionPlan
from regtrack.results.records import StoredBisection
from tests import answers


def test_records_are_frozen_and_keyword_only():
    record = answers.pooled()
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.verdict = "no change"  # type: ignore[misc]
    with pytest.raises(TypeError):
        PooledComparison("get", "pooled")  # type: ignore[misc]
    assert record.point == "pooled" and record.n == record.n_blocks == 4
    assert answers.point().n == 4 and answers.point().blocks_for_no_change is None


@pytest.mark.parametrize("make", [answers.point, answers.pooled])
def test_a_record_goes_through_json_and_back(make):
    record = make(problems=("a problem",)) if make is answers.point else make()
    text = json.dumps(record.to_json())
    back = type(record).from_json(json.loads(text))
    assert back.to_json() == record.to_json()
    assert list(record.to_json()) == [f.name for f in dataclasses.fields(record)]


def test_json_has_no_infinity_and_older_stored_records_still_load():
    unbounded = answers.pooled(ci_low_pct=-100.0, ci_high_pct=math.inf, mde_pct=math.inf)
    data = unbounded.to_json()
    assert (data["ci_high_pct"], data["mde_pct"]) == (None, None)
    assert json.loads(json.dumps(data, allow_nan=False))["ci_low_pct"] == -100.0
    assert plain({"x": (1.0, float("nan"))}) == {"x": [1.0, None]}
    # A bisection stored before some field existed, and with one no longer known.
    old = ChangeSummary.from_json({"change_pct": 3.0, "verdict": "regression", "gone": 1})
    assert (old.change_pct, old.verdict, old.n_blocks) == (3.0, "regression", None)


def test_a_pooled_record_summarises_as_a_bisection_stores_it():
    record = answers.pooled()
    assert record.summary().to_json() == {
        "change_pct": -8.0, "ci_low_pct": -11.0, "ci_high_pct": -5.0, "mde_pct": 4.0,
        "verdict": "regression", "n_blocks": 4,
    }  # fmt: skip


def test_one_interval_record_is_computed_placed_and_stored():
    """stats, sequential and bisection share one Change; a pooled record and a stored
    summary read back as it, an end stored as null (unbounded) as -100 / inf."""
    from regtrack.analysis import bisection, sequential, stats
    from regtrack.analysis.interval import Change

    computed = sequential.interval([0.01, 0.03, 0.02, 0.04], 0.05)
    welch = stats.unpaired([1.0, 1.1, 0.9], [1.2, 1.3, 1.1])
    assert type(computed) is type(welch) is Change is stats.Change is bisection.Change
    record = answers.pooled(method="t-spending")
    assert record.interval == Change(-8.0, -11.0, -5.0, 4, "t-spending", 4.0)
    assert record.summary().interval == Change(-8.0, -11.0, -5.0, 4, None, 4.0)
    unbounded = answers.pooled(ci_low_pct=-100.0, ci_high_pct=math.inf, mde_pct=math.inf)
    stored = ChangeSummary.from_json(json.loads(json.dumps(unbounded.summary().to_json())))
    assert stored.interval == dataclasses.replace(unbounded.interval, method=None, mde_pct=None)
    assert answers.pooled(change_pct=None).interval is None
    assert ChangeSummary.from_json({"change_pct": 3.0}).interval == Change(3.0, -100.0, math.inf)
    # A commit 8% below good and 0.5% above bad, when bad is 8% below good: bad's side.
    vs_bad = answers.pooled(change_pct=0.5, ci_low_pct=-2.0, ci_high_pct=3.0).interval
    placed = bisection.placement(record.interval, vs_bad, 0.5, -8.0)
    assert placed.above and placed.decided and placed.share == pytest.approx(0.94, abs=0.01)


def test_the_gate_decides_from_the_gating_pooled_records():
    regression = answers.pooled()
    fine = answers.pooled(metric="instructions_per_op", verdict="no change")
    undecided = dataclasses.replace(fine, verdict="inconclusive")
    not_gating = answers.pooled(metric="latency_p99", gating=False)
    decision = gate.gate(answers.result((regression, fine, not_gating)))
    assert decision.outcome == "regression" and decision.decided
    assert decision.gating == (regression, fine)
    open_ = gate.gate(answers.result((fine, undecided)))
    assert (open_.outcome, open_.decided) == ("inconclusive", False)
    assert open_.with_verdict("inconclusive") == [undecided]
    assert gate.undecided_modes(answers.result((fine, undecided))) == ("instructions",)


def test_disagreements_are_records_too():
    tput = answers.point(change_pct=5.0)
    instr = answers.point(metric="instructions_per_op", change_pct=4.0)
    (d,) = gate.disagreements((tput, instr))
    assert (d.point, d.throughput_change_pct, d.syscalls_change_pct) == ("pipeline=10", 5.0, None)


def test_compare_json_carries_schema_version_records_and_pooled():
    facts = ServerFacts(server_config={"hz": "25"}, server_data={"persistent": False})
    result = dataclasses.replace(
        answers.result((answers.pooled(),), (answers.point(),)), server=facts, forced=("x",)
    )
    doc = json.loads(tables.render(result, "json"))
    assert doc["schema_version"] == SCHEMA_VERSION == 2
    (record,) = doc["records"]
    assert record["change_pct"] == -8.0 and record["server_config"] == {"hz": "25"}
    assert record["server_data"] is None and record["forced"] == ["x"]
    assert doc["pooled"][0]["point"] == "pooled" and doc["baseline_run_id"] is None
    assert json.loads(tables.render(result, "json", ["latency_p99"]))["records"] == []


def test_ci_json_carries_schema_version_and_the_records():
    shift = RunShift("throughput", 5.0, math.inf, "default")
    result = dataclasses.replace(
        answers.result((answers.pooled(),), (answers.point(),)),
        baseline_run_id=3,
        run_shifts={"throughput": shift},
    )
    decision = gate.gate(result)
    context = GateContext(repetitions=4, stopped="decided", seeds="fixed")
    doc = json.loads(json.dumps(ci_summary.ci_json(result, decision, context)))
    assert doc["schema_version"] == SCHEMA_VERSION
    assert (doc["outcome"], doc["decided"]) == ("regression", True)
    assert doc["gate"] == doc["pooled"] == [answers.pooled().to_json()]
    assert doc["records"] == [answers.point().to_json()]
    assert doc["run_shifts"] == {"throughput": {"sd_pct": 5.0, "df": math.inf, "source": "default"}}


def test_bisect_json_carries_schema_version():
    plan = BisectionPlan.from_json(answers.BISECTION["config"])
    stored = StoredBisection(id=1, created_at="today", status="done", config=plan, runs=(4, 5))
    doc = json.loads(bisect_text.render(stored, "json"))
    assert doc["schema_version"] == SCHEMA_VERSION and doc["id"] == 1
    assert doc == {
        **{"schema_version": SCHEMA_VERSION, "id": 1, "created_at": "today", "status": "done"},
        **{"config": answers.BISECTION["config"], "log": [], "result": None, "runs": [4, 5]},
    }


GOOD, MID, BAD, CHANGE, STORED = (
    answers.GOOD, answers.MID, answers.BAD, answers.CHANGE, answers.BISECTION
)  # fmt: skip


def test_a_bisections_change_reads_the_same_in_its_search_lines_and_its_log():
    """flows/bisect.py says a change through the hook the command line gives it, this
    text: an interval too wide to read is said to be, as everywhere else."""
    assert bisect_text.change_text(None) == "no valid measurement"
    assert bisect_text.change_text(ChangeSummary.from_json(CHANGE)) == (
        "+3.00% [+2.00, +4.00] (regression)"
    )
    wide = {**CHANGE, "ci_low_pct": -250.0, "ci_high_pct": math.inf, "verdict": "inconclusive"}
    assert bisect_text.change_text(ChangeSummary.from_json(wide)) == (
        "+3.00% [too wide to read] (inconclusive)"
    )


def test_a_stored_bisection_reads_back_as_records_and_renders():
    from regtrack.analysis.bisect_records import BisectLogEntry, BisectStep
    from regtrack.output.report import bisect_page

    entries = [BisectLogEntry.from_json(e) for e in STORED["log"]]
    assert entries[2].vs_good == ChangeSummary.from_json(CHANGE) and entries[2].cut == 0.5
    assert [e.to_json() for e in entries[:4]] == STORED["log"][:4], "stored as before"
    step = BisectStep.from_json(STORED["result"]["steps"][0])
    assert (step.first_bad, step.run_id, step.change) == (MID, 3, None)
    stored = answers.stored_bisection(STORED)
    text = bisect_text.render(stored)
    assert "ends: bad vs good +3.00% [+2.00, +4.00] (regression)" in text
    assert f"First bad commit: {MID} (100% of the ends' change)" in text
    assert "change against its parent aaaaaaa: no valid measurement (run 3, side by side)" in text
    assert "step   bbbbbbbbbbbb slower get: run 2, 100% of the way to bad, above the cut" in text
    assert "confirm aaaaaaa -> bbbbbbbbbbbb slower get: run 3, no valid measurement" in text
    page = bisect_page.page(stored)
    assert page["steps"][0]["heading"].startswith("First bad commit")
    assert [e["run_file"] for e in page["log"]][-1] == "run-3.html"


def test_a_bisections_answer_is_stored_as_the_flat_object_it_always_was():
    """BisectAnswer writes the JSON a bisection stored before it was a record (servers'
    facts beside the rest, no empty more_than_one_step), and reads older answers too."""
    server = {"server_config": {"appendonly": "no"}, "server_without": {}, "server_data": None}
    stored = {
        "ends": CHANGE,
        "steps": [
            {"kind": "step", "last_good": GOOD, "first_bad": MID, "between": [], "share": 1.0}
        ],
        "shares": {MID: 1.0},
        "carried": 1.0,
        "more_may_be_left": False,
        "by_estimate": [],
        "skipped": [BAD],
        "measured_commits": [GOOD, MID, BAD],
        **server,
    }
    answer = BisectAnswer.from_json(stored)
    assert answer.ends == ChangeSummary.from_json(CHANGE)
    assert (answer.steps[0].first_bad, answer.skipped) == (MID, (BAD,))
    assert answer.server == ServerFacts.from_json(server)
    assert answer.to_json() == stored
    older = BisectAnswer.from_json({"ends": CHANGE, "more_than_one_step": [MID]})
    assert older.server is None and older.more_than_one_step == (MID,)
    assert older.to_json()["more_than_one_step"] == [MID]
    assert "server_config" not in older.to_json()
