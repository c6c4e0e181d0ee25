"""Open-loop latency trials (--rate, --load) through the whole flow, in process, on
modelled trials (tests/fakebench.py): the plan, the capacity measured first, the trials'
order and the open-loop verdicts. The engine's own behaviour is test_openloop_engine.py;
a real run is test_latency_real.py."""

from __future__ import annotations

import json
import math
import sqlite3

import pytest

from regtrack.analysis import slo
from regtrack.bench import latency_trial, prepare
from regtrack.bench.loadgen import openloop
from regtrack.bench.plan import interleave, latency_points
from regtrack.core.errors import BadInput
from regtrack.core.records import InvalidReason, TrialRecord
from regtrack.core.settings import RunSettings
from regtrack.plan.latency_plan import LatencyPlan, Slo
from regtrack.targets.target import Target
from regtrack.workloads.points import Point
from tests import fakebench
from tests.conftest import cli_in_process

FAST = ["--pipelines", "10", "--repetitions", "4", "--no-report", "--pairing", "separate"]


def _versions(redis_server) -> list[str]:
    return ["--versions", f"a=bin:{redis_server},b=bin:{redis_server}"]


def test_a_latency_plan_names_its_points_and_rates():
    by_rate = LatencyPlan(rates=(5000.0, 20000.0))
    assert by_rate.labels() == ("rate=5000", "rate=20000")
    assert by_rate.rate("rate=20000") == 20000.0
    by_load = LatencyPlan(loads=(0.5, 0.8))
    assert by_load.needs_capacity
    with pytest.raises(BadInput, match="capacity"):
        by_load.rate("load=0.5")
    measured = by_load.with_capacity(100_000.0, "a pipeline=1")
    assert measured.rate("load=0.8") == pytest.approx(80_000.0)
    assert LatencyPlan.from_json(measured.to_json()) == measured
    for bad in ({"loads": (0.5,), "rates": (1.0,)}, {}, {"loads": (3.0,)}, {"rates": (0.0,)}):
        with pytest.raises(BadInput):
            LatencyPlan(**bad)


def test_latency_trials_follow_the_others_and_keep_their_numbers():
    """Every trial of a plan with latency trials has its own number, and each
    repetition's latency visits come after its others, in the repetition's order."""
    points = [Point("w", f"pipeline={d}", {"pipeline": d}) for d in (10, 30)]
    plan = LatencyPlan(rates=(1000.0, 2000.0, 3000.0))
    rates = latency_points(points[0], plan)
    assert [p.params["pipeline"] for p in rates] == [1, 1, 1]
    both = interleave(["a", "b"], points, 2, ("throughput", "latency"),
                      mode_points={"latency": rates})  # fmt: skip
    all_seqs = [t.seq for v in both for t in v.trials]
    assert sorted(all_seqs) == list(range(2 * (2 * 2 + 2 * 3)))
    second = [v for v in both if v.repetition == 1 and v.mode == "latency"]
    assert [v.target for v in second] == ["b", "a"]
    assert [t.point.label for t in second[0].trials] == ["rate=3000", "rate=2000", "rate=1000"]


def test_latency_is_paired_in_time_only_in_a_duet(tmp_path, redis_server):
    """Open-loop trials are one visit of every version per repetition only where each
    server has CPUs of its own (a duet): on one shared server CPU a version's background
    stalls delay its neighbour too. Their plan says which (a part of the comparability key
    of a gate against a stored baseline), and a paired run says so."""
    paired_plan = interleave(["a", "b"], [Point("w", "p", {})], 2, ("latency",),
                             paired=("latency",))  # fmt: skip
    assert [v.together for v in paired_plan] == [("a", "b"), ("b", "a")]
    plan, two = LatencyPlan(rates=(5000.0,)), [Target(x, x, "bin") for x in "ab"]
    duet, time = RunSettings(pairing="duet"), RunSettings(pairing="time")
    assert prepare._paired(plan, duet, two).method == "paired in time"
    assert prepare._paired(plan, time, two).method == "separate trials"
    assert prepare._paired(plan, duet, two[:1]).method == "separate trials"
    db = tmp_path / "time.db"
    proc = cli_in_process(
        "run", *_versions(redis_server), "--pipelines", "10", "--repetitions", "2",
        "--no-report", "--rate", "5000", "--db", str(db), measuring=fakebench.Model(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (config,) = sqlite3.connect(db).execute("SELECT config FROM runs").fetchone()
    assert json.loads(config)["latency"]["method"] == "separate trials"
    assert "open-loop latency: paired in time" not in proc.stderr


def test_a_run_at_a_load_measures_the_capacity_first_and_compares_p99(tmp_path, redis_server):
    """--load: the baseline's capacity is measured once, before the run is recorded; every
    version is offered the same absolute rate; a version whose p99 doubled is a
    regression at that load, and its throughput is not."""
    model = fakebench.Model(latency_p99={"a": 0.2, "b": 0.4})
    db = tmp_path / "r.db"
    proc = cli_in_process(
        "run", *_versions(redis_server), *FAST, "--load", "0.5", "--db", str(db),
        measuring=model,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "capacity of a:" in proc.stderr and "open-loop rates 0.5:" in proc.stderr
    config = json.loads(
        sqlite3.connect(db).execute("SELECT config FROM runs WHERE id = 1").fetchone()[0]
    )
    capacity = config["latency"]["capacity"]
    assert capacity and config["latency"]["loads"] == [0.5]
    assert config["latency"]["method"] == "separate trials"  # --pairing separate
    modes = [m for _, _, m in model.visits]
    assert modes.count("latency") == 2 * 4 and modes.count("throughput") == 2 * 4
    rates = {
        row[0] for row in sqlite3.connect(db).execute("SELECT offered_rate FROM trial_open_loop")
    }
    assert len(rates) == 1 and rates.pop() == pytest.approx(0.5 * capacity)
    shown = cli_in_process("compare", "--run", "1", "--db", str(db), "--format", "json")
    assert shown.returncode == 0, shown.stderr
    pooled = {(r["metric"], r["candidate"]): r for r in json.loads(shown.stdout)["pooled"]}
    p99 = pooled[("open_loop_p99", "b")]
    assert p99["verdict"] == "regression" and 80 < p99["change_pct"] < 120, p99
    assert pooled[("throughput", "b")]["verdict"] != "regression"


@pytest.mark.parametrize("contended", [2, 3])
def test_a_contended_capacity_trial_is_measured_again_up_to_three_times(
    tmp_path, redis_server, contended
):
    """Other work on the pinned CPUs comes and goes: a contended capacity trial is measured
    again, and the run ends in one line only when all three tries were contended."""
    model = fakebench.Model(capacity_contended=contended)
    proc = cli_in_process(
        "run", *_versions(redis_server), *FAST, "--load", "0.5", "--db",
        str(tmp_path / "r.db"), measuring=model,
    )  # fmt: skip
    assert model.capacity_trials == min(contended + 1, 3)
    assert "measuring it again (2 of 3)" in proc.stderr, proc.stderr
    if contended < 3:
        assert proc.returncode == 0, proc.stderr
        assert "capacity of a:" in proc.stderr
    else:
        assert proc.returncode == 3 and not model.visits, proc.stderr
        assert "could not be measured (contended: " in proc.stderr
        assert "in 3 tries): give the open-loop rates as --rate" in proc.stderr


def test_open_loop_options_are_refused_in_one_line(tmp_path, redis_server):
    db = str(tmp_path / "r.db")
    for extra, words in (
        (["--rate", "5000", "--load", "0.5"], "not both"),
        (["--rate", "fast"], "is not a number"),
        (["--load", "7"], "not a fraction"),
    ):
        proc = cli_in_process("run", *_versions(redis_server), *FAST, *extra, "--db", db,
                              measuring=fakebench.Model())  # fmt: skip
        assert proc.returncode == 2, (extra, proc.stderr)
        assert words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_ci_gates_p99_at_a_declared_load(tmp_path, redis_server):
    """ci --latency-load: a candidate whose p99 doubled at half load fails the gate while
    its throughput does not; the summary and the JSON name the open-loop p99."""
    server = f"bin:{redis_server}"
    model = fakebench.Model(latency_p99={"a": 0.2, "b": 0.4})
    out = tmp_path / "gate.json"
    proc = cli_in_process(
        "ci", "--baseline-version", f"a={server}", "--candidate-version", f"b={server}",
        "--pipelines", "10", "--latency-load", "0.5", "--db", str(tmp_path / "r.db"),
        "--json", str(out), "--no-report", measuring=model,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    verdicts = {g["metric"]: g["verdict"] for g in data["gate"]}
    assert verdicts["open_loop_p99"] == "regression", verdicts
    assert verdicts["throughput"] != "regression"
    assert "**p99 latency (open loop)** over load=0.5" in proc.stdout


def test_latency_reads_merged_histograms_and_exports_hgrm(tmp_path, redis_server):
    """`regtrack latency`: per version and point, the merged histogram of its valid trials
    (the counts add up), as a table, JSON and .hgrm files; a histogram that is not one is
    refused in one line."""
    db = tmp_path / "r.db"
    model = fakebench.Model(latency_p99={"a": 0.2, "b": 0.4})
    ran = cli_in_process("run", *_versions(redis_server), *FAST, "--rate", "1000,2000",
                         "--db", str(db), measuring=model)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    shown = cli_in_process("latency", "--db", str(db), "--format", "json", "--hgrm",
                           str(tmp_path / "h"))  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    found = {(d["version"], d["point"]): d for d in json.loads(shown.stdout)["distributions"]}
    assert set(found) == {(v, f"rate={r}") for v in "ab" for r in (1000, 2000)}
    a, b = found[("a", "rate=1000")], found[("b", "rate=1000")]
    assert a["trials"] == 4 and a["requests"] == 4 * 1000
    assert b["percentiles_ms"]["99"] > 1.8 * a["percentiles_ms"]["99"]
    files = sorted((tmp_path / "h").glob("*.hgrm"))
    assert len(files) == 4 and "Percentile" in files[0].read_text()
    table = cli_in_process("latency", "--db", str(db))
    assert "p99.9 ms" in table.stdout and "rate=2000" in table.stdout
    conn = sqlite3.connect(db)
    conn.execute("UPDATE trial_open_loop SET hdr = 'HISTFAAAA' WHERE rowid = "
                 "(SELECT MIN(rowid) FROM trial_open_loop)")  # fmt: skip
    conn.commit()
    broken = cli_in_process("latency", "--db", str(db))
    assert broken.returncode == 2 and "cannot be decoded" in broken.stderr, broken.stderr
    assert "Traceback" not in broken.stderr


def test_capacity_at_an_slo_is_read_where_the_percentile_crosses_it():
    """The crossing interpolates the log of the percentile between the last rate within
    the target and the first beyond; sweeps that never (or always) cross only bound it."""
    target = Slo.parse("p99 <= 1ms")
    assert target == Slo("p99", 1.0) and Slo.parse("p99.9<=500us").limit_ms == 0.5
    with pytest.raises(BadInput, match="give a percentile"):
        Slo.parse("p95<=1ms")
    sweep = slo.Sweep("a", 0, ((1000.0, 0.2), (2000.0, 0.5), (3000.0, 2.0)))
    x = slo.crossing(sweep, target)
    assert x.bound == "" and 2000 < x.rate < 3000
    assert x.rate == pytest.approx(2000 + 1000 * math.log(2) / math.log(4))
    assert slo.crossing(slo.Sweep("a", 0, ((1000.0, 0.2),)), target).bound == "at least"
    assert slo.crossing(slo.Sweep("a", 0, ((1000.0, 3.0),)), target).bound == "below"


def test_a_run_with_an_slo_prints_each_versions_capacity_and_the_change(tmp_path, redis_server):
    """--slo: every version swept over the same rates; b's latency doubled, so its
    capacity at the target is lower, with an interval over the repetitions; the run page
    draws latency against rate and each load's percentile distributions with the target."""
    model = fakebench.Model(latency_p99={"a": 0.2, "b": 0.4})
    proc = cli_in_process(
        "run", *_versions(redis_server), *FAST, "--slo", "p99<=1ms", "--load", "0.5,0.7,0.85",
        "--db", str(tmp_path / "r.db"), measuring=model,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout[proc.stdout.index("capacity at p99<=1ms") :]
    a_line, b_line = text.splitlines()[1:3]
    assert a_line.startswith("  a: ") and "(baseline)" in a_line
    assert b_line.startswith("  b: ") and "regression" in b_line, text
    written = cli_in_process("report", "--db", str(tmp_path / "r.db"), "--out", str(tmp_path))
    assert written.returncode == 0, written.stderr
    page = (tmp_path / "run-1.html").read_text()
    assert "Open-loop latency against offered rate" in page and 'id="slo"' in page
    assert page.count("Latency by percentile at load=") == 3  # one chart per offered load


def test_run_until_decided_starts_in_blocks_and_tells_the_story(tmp_path, redis_server):
    """run --until-decided without --repetitions starts from ci's first look (blocks of
    two, never the settings' odd 3) and ends with the story: throughput, p99 at the load,
    instructions per op, and the functions behind the instructions."""
    model = fakebench.Model(
        latency_p99={"a": 0.2, "b": 0.3}, instructions={"a": 3500.0, "b": 3800.0}
    )
    proc = cli_in_process(
        "run", *_versions(redis_server), "--pipelines", "10", "--no-report", "--metric",
        "both", "--until-decided", "--load", "0.5", "--db", str(tmp_path / "r.db"),
        measuring=model,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    told = proc.stdout[proc.stdout.index("b vs a (") :].splitlines()
    assert told[1].startswith("  throughput at pipeline=10: ")
    assert told[2].startswith("  p99 latency (open loop) at load=0.5: ") and "regression" in told[2]
    assert told[3].startswith("  instructions per op at pipeline=10: +8.")
    assert "getGenericCommand +" in told[4] and "processCommand" not in told[4]


def _report(**changed) -> openloop.OpenLoopReport:
    """An engine report as regtrack-openloop prints one (engine/README.md)."""
    data = {
        "version": "0.1.0", "arrival": "poisson", "rate_intended": 5000.0, "duration_s": 2.0,
        "sent": 10_000, "completed": 10_000, "errors": {}, "timeouts": 0,
        "achieved_rate": 5000.0,
        "latency_us": {"p50": 90.0, "p90": 150.0, "p99": 400.0, "p999": 900.0,
                       "max": 2000.0, "mean": 110.0, "count": 10_000},
        "lag_us": {"p50": 20.0, "p99": 80.0, "max": 300.0},
        "cpu": {"user_s": 0.2, "sys_s": 0.5, "busy_fraction": 0.35},
        "behind": False, "behind_reasons": [], "hdr_unit": "ns", "hdr": "",
    }  # fmt: skip
    data.update(changed)
    return openloop.OpenLoopReport.model_validate(data)


def test_an_open_loop_trial_is_judged_on_what_its_engine_reports():
    """Behind its schedule, failed or timed-out requests: invalid with one line each; a
    percentile its requests do not resolve is not kept (p99.9 needs 10,000 requests)."""
    record = TrialRecord(0, 0, "a", "w", "rate=5000", {}, "now", mode="latency", valid=True)
    latency_trial.judge(10.0, record, _report())
    assert record.valid and not record.reasons
    late = _report(behind=True, behind_reasons=["schedule lag p99 2100 us is above 1000 us"],
                   lag_us={"p50": 50.0, "p99": 2100.0, "max": 9000.0})  # fmt: skip
    latency_trial.judge(10.0, record, late)
    (reason,) = record.reasons
    assert reason.code is InvalidReason.BEHIND_SCHEDULE and "lag p99 2100 us" in reason.detail
    failed = TrialRecord(0, 0, "a", "w", "rate=5000", {}, "now", mode="latency", valid=True)
    latency_trial.judge(10.0, failed, _report(errors={"GET ERR": 3}, timeouts=2))
    assert failed.reasons[0].code is InvalidReason.ERROR_REPLIES
    assert "5 requests failed (GET ERR 3, 2 timed out)" in failed.reasons[0].detail
    # The engine's own stalls: a few requests left out is the method; a twentieth is not.
    stalled = {"count": 3, "total_ms": 9.5, "max_ms": 6.0}
    few = TrialRecord(0, 0, "a", "w", "rate=5000", {}, "now", mode="latency", valid=True)
    latency_trial.judge(10.0, few, _report(stalls=stalled, tainted=400))
    assert few.valid
    many = TrialRecord(0, 0, "a", "w", "rate=5000", {}, "now", mode="latency", valid=True)
    latency_trial.judge(10.0, many, _report(stalls=stalled, tainted=600))
    (reason,) = many.reasons
    assert reason.code is InvalidReason.BEHIND_SCHEDULE
    assert "stalled 3 times (9.5 ms, the longest 6.0 ms) and left 600 of 10,000" in reason.detail
    assert _report().stalls.count == 0 and _report().tainted == 0  # engines before 0.3.0
    kept = latency_trial.resolved(_report().latency_ms, 5_000)
    assert "p99" in kept and "p999" not in kept and "max" in kept
    assert "p999" in latency_trial.resolved(_report().latency_ms, 10_000)
