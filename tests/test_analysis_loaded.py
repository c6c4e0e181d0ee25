"""Analysis on records built in memory: no database, no server, milliseconds per test.

Analysis computes on what results.loaded reads (results.records), so a comparison, a
pooled answer, the gate, a run's shift, a history and an attribution are checked here
against numbers worked out by hand: a known change in seed-matched blocks must come
out with the paired-t interval of its block values and the verdict that interval gives.
"""

from __future__ import annotations

import dataclasses
import math
import statistics

import pandas as pd
import pytest
from scipy.special import stdtrit

from regtrack.analysis import attribution, commands, comparison, gate, history, pooling, run_shift
from regtrack.analysis.metrics import METRIC_BY_NAME
from regtrack.analysis.records import ComparisonResult, PooledComparison
from regtrack.core.errors import BadInput
from regtrack.core.records import InvalidReason, TrialReason
from regtrack.core.settings import Thresholds
from regtrack.plan.records import Printed
from regtrack.results.records import AlikeRuns, LoadedRun, RunCosts, RunTarget, StoredRun

THROUGHPUT = METRIC_BY_NAME["throughput"]
POINTS = {"pipeline=1": 1, "pipeline=10": 10}
# Each seed's draw moves both versions alike (common random numbers); what differs
# between them per block is NOISE, so the block values are log(change) + NOISE[r].
SEED_FACTOR = [1.00, 1.03, 0.97, 1.01, 0.99, 1.02, 0.98, 1.00]
NOISE = [0.004, -0.003, 0.002, -0.004, 0.001, 0.003, -0.002, -0.001]


def trial(
    seq: int,
    target: str,
    point: str,
    rep: int,
    ops: float | None,
    *,
    seed: int | None = None,
    reasons: tuple[TrialReason, ...] = (),
) -> dict:
    """One trial row as results.loaded.trials_frame gives it (the columns analysis reads)."""
    return {
        "seq": seq,
        "repetition": rep,
        "seed": 1000 + rep if seed is None else seed,
        "target": target,
        "workload": "get",
        "point": point,
        "point_order": POINTS[point],
        "mode": "throughput",
        "valid": not reasons,
        "reasons": reasons,
        "ops_per_sec": ops,
        "lat_p50_ms": None,
        "lat_p99_ms": None,
        "instructions_per_op": None,
        "syscalls_per_op": None,
        "server_cpu_pct": 99.0,
    }


def stored(run_id: int = 1, labels: tuple[str, ...] = ("a", "b"), **kw) -> StoredRun:
    targets = tuple(
        RunTarget(label, f"{label}=c0ffee{label}", commit=f"c0ffee{label}") for label in labels
    )
    return StoredRun(id=run_id, targets=targets, **kw)


def paired_run(change: float, reps: int = 8, design: str = "fixed") -> LoadedRun:
    """Versions a and b at two points, interleaved; b = a * change * exp(NOISE[rep])."""
    rows, seq = [], 0
    for rep in range(reps):
        for point in POINTS:
            base = 100_000.0 * SEED_FACTOR[rep] * (1 + POINTS[point] / 100)
            for label, value in (("a", base), ("b", base * change * math.exp(NOISE[rep]))):
                rows.append(trial(seq, label, point, rep, value))
                seq += 1
    return LoadedRun(stored(design=design), pd.DataFrame(rows))


def expected_interval(change: float, reps: int, alpha: float = 0.05) -> tuple[float, float, float]:
    """The paired-t interval (percent) of the block values log(change) + NOISE[r]."""
    values = [math.log(change) + NOISE[r] for r in range(reps)]
    mean, sd = statistics.fmean(values), statistics.stdev(values)
    half = float(stdtrit(reps - 1, 1 - alpha / 2)) * sd / math.sqrt(reps)
    return tuple(100 * math.expm1(x) for x in (mean, mean - half, mean + half))


def pooled_of(result: ComparisonResult, metric: str = "throughput") -> PooledComparison:
    (record,) = [r for r in result.pooled if r.metric == metric]
    return record


def test_a_known_regression_in_seed_matched_blocks_has_the_paired_t_interval():
    result = comparison.compare(paired_run(0.90))
    top = pooled_of(result)
    estimate, low, high = expected_interval(0.90, 8)
    assert (top.paired_by, top.method, top.n_blocks) == ("seed", "t", 8)
    assert top.change_pct == pytest.approx(estimate)
    assert (top.ci_low_pct, top.ci_high_pct) == (pytest.approx(low), pytest.approx(high))
    assert top.verdict == "regression" and top.gating
    assert result.metrics == ("throughput",)  # no column of the others holds a value
    # Each point: its own paired interval, called only because the pooled answer is.
    assert {(r.point, r.verdict) for r in result.comparisons} == {
        ("pipeline=1", "regression"),
        ("pipeline=10", "regression"),
    }
    assert gate.gate(result).outcome == "regression"
    assert gate.undecided_modes(result) == ()


def test_an_equal_candidate_is_no_change_and_passes_the_gate():
    result = comparison.compare(paired_run(1.0))
    top = pooled_of(result)
    assert top.verdict == "no change"
    assert -5.0 < top.ci_low_pct < 0 < top.ci_high_pct < 5.0
    assert gate.gate(result).outcome == "no regression"


def test_two_noisy_blocks_are_inconclusive_and_ask_for_more_throughput_trials():
    run = paired_run(0.97, reps=2)
    noisy = run.trials.copy()
    noisy.loc[(noisy["target"] == "b") & (noisy["repetition"] == 1), "ops_per_sec"] *= 1.2
    result = comparison.compare(LoadedRun(run.run, noisy))
    assert pooled_of(result).verdict == "inconclusive"
    assert gate.gate(result).outcome == "inconclusive"
    assert gate.undecided_modes(result) == ("throughput",)


def test_a_gate_without_valid_blocks_is_not_measured():
    unmeasured = pooled_of(comparison.compare(paired_run(0.90)))
    unmeasured = dataclasses.replace(unmeasured, verdict="inconclusive", n_blocks=0)
    result = dataclasses.replace(comparison.compare(paired_run(0.90)), pooled=(unmeasured,))
    assert gate.gate(result).outcome == "not measured"


def test_a_sequential_run_is_judged_with_t_spending():
    fixed = pooled_of(comparison.compare(paired_run(0.90)))
    spent = pooled_of(comparison.compare(paired_run(0.90, design="sequential")))
    assert spent.method == "t-spending"
    assert spent.change_pct == pytest.approx(fixed.change_pct)
    assert spent.ci_high_pct - spent.ci_low_pct > fixed.ci_high_pct - fixed.ci_low_pct


def test_a_baseline_that_is_not_a_version_of_the_run_is_refused():
    with pytest.raises(BadInput, match="is not a version of run 1"):
        comparison.compare(paired_run(0.9), baseline="nope")
    with pytest.raises(BadInput, match="has no trials"):
        comparison.compare(LoadedRun(stored(), pd.DataFrame()))


def test_pooling_pairs_blocks_valid_on_both_sides_and_averages_the_points():
    frame = paired_run(0.90, reps=4).trials
    frame.loc[(frame["target"] == "b") & (frame["repetition"] == 3), "valid"] = False
    ratios = pooling.ratios(frame, THROUGHPUT, "a", "b", "seed")
    assert sorted(ratios) == list(POINTS)
    assert all(sorted(by_block) == [1000, 1001, 1002] for by_block in ratios.values())
    assert ratios["pipeline=10"][1001] == pytest.approx(math.log(0.90) + NOISE[1])
    top = pooling.pooled(
        pooling.Pair(THROUGHPUT, "get", "a", "b"), pooling.Blocks(frame, ratios, "seed"),
        list(POINTS), pooling.Judging(alpha=0.05, threshold_pct=5.0, method="t"),
    )  # fmt: skip
    estimate, low, high = expected_interval(0.90, 3)
    assert top.n_blocks == 3 and top.change_pct == pytest.approx(estimate)
    assert (top.ci_low_pct, top.ci_high_pct) == (pytest.approx(low), pytest.approx(high))


def test_a_client_bound_point_does_not_gate():
    run = paired_run(0.90)
    frame = run.trials.copy()
    bound = (TrialReason(InvalidReason.CLIENT_BOUND, "the load generator used 99% CPU"),)
    first = frame.index[(frame["point"] == "pipeline=1") & (frame["target"] == "b")][0]
    frame.at[first, "reasons"] = bound
    frame.at[first, "valid"] = False
    top = pooled_of(comparison.compare(LoadedRun(run.run, frame)))
    assert top.points == ("pipeline=10",) and list(top.excluded) == ["pipeline=1"]


def test_across_runs_the_interval_carries_the_runs_shift():
    """The same trials as two runs: paired by seed, widened by the default shift (no
    history of one code in several runs), the stored side named as such."""
    within = paired_run(0.90)
    base = LoadedRun(stored(1, ("a",)), within.trials[within.trials["target"] == "a"])
    cand_frame = within.trials[within.trials["target"] == "b"].assign(target="a")
    cand = LoadedRun(stored(2, ("a",)), cand_frame)
    result = comparison.compare_runs(base, "a", cand, "a", AlikeRuns("k"))
    top = pooled_of(result)
    assert result.targets == ("a (stored)", "a") and result.baseline_run_id == 1
    assert top.paired_by == "seed"
    assert result.run_shifts and result.run_shifts["throughput"].source.startswith("default")
    inside = pooled_of(comparison.compare(within))
    assert top.change_pct == pytest.approx(inside.change_pct)
    assert top.ci_high_pct - top.ci_low_pct > inside.ci_high_pct - inside.ci_low_pct


def one_code_run(run_id: int, value: float, comparability: str = "k") -> LoadedRun:
    """A run of commit c1 alone whose cells are ``value`` (times the point's factor)."""
    rows = [
        trial(i, "a", point, rep, value * POINTS[point])
        for i, (point, rep) in enumerate((p, r) for p in POINTS for r in range(2))
    ]
    target = RunTarget("a", "c1", commit="c1", source_repo="r")
    run = StoredRun(run_id, (target,), created_at=f"2025-01-0{run_id}", comparability=comparability)
    return LoadedRun(run, pd.DataFrame(rows))


def test_a_runs_shift_is_the_spread_of_runs_of_one_code_measured_alike():
    logs = [0.0, 0.02, -0.02, 0.0]
    runs = [one_code_run(i + 1, 1e5 * math.exp(x)) for i, x in enumerate(logs)]
    runs.append(one_code_run(9, 2e5, comparability="other"))  # measured otherwise: left out
    shifts = run_shift.for_runs(AlikeRuns("k", tuple(runs)), ("throughput", "latency_p99"))
    got = shifts["throughput"]
    assert got.df == 3 and got.source == "history: 4 runs of the same code"
    assert got.sd_pct == pytest.approx(100 * math.expm1(math.sqrt(0.0008 / 3)))
    assert shifts["latency_p99"] == run_shift.default("latency_p99")  # not gating: default
    thin = run_shift.for_runs(AlikeRuns("k", tuple(runs[:3])), ("throughput",))
    assert thin["throughput"] == run_shift.default("throughput")  # 2 df: too thin


def test_every_latency_shifts_by_latencys_default_across_runs():
    """Closed-loop and open-loop percentiles alike: 10% until history says otherwise
    (docs/methodology.md, "Across runs"), not throughput's 5%."""
    for name in ("latency_p99", "open_loop_p50", "open_loop_p99", "open_loop_p999"):
        assert run_shift.default(name).sd_pct == run_shift.LATENCY_DEFAULT_PCT == 10.0


def test_history_points_are_the_runs_trusted_cells_in_time_order():
    runs = [one_code_run(2, 1.1e5), one_code_run(1, 1e5), LoadedRun(stored(3), pd.DataFrame())]
    frame = history.points(runs, ("throughput",))
    assert list(frame["run_id"]) == [1, 1, 2, 2]
    assert set(frame["series"]) == {"c1"} and set(frame["comparability"]) == {"k"}
    assert list(frame["value"]) == [1e5, 1e6, 1.1e5, 1.1e6]


def test_attribution_reconciles_functions_to_the_total_change():
    rows = []
    for label, f_cost in (("a", 100.0), ("b", 110.0)):
        for trial_id in (1, 2) if label == "a" else (3, 4):
            for function, per_op in (("f", f_cost), ("g", 50.0)):
                rows.append({
                    "trial_id": trial_id, "function": function, "exclusive": per_op * 1000,
                    "inclusive": per_op * 1000, "point": "pipeline=1", "workload": "get",
                    "server_calls": 1000, "point_order": 1, "target": label,
                })  # fmt: skip
    costs = RunCosts(7, ("a", "b"), pd.DataFrame(rows))
    (table,) = attribution.attribute(costs, "a", "b")
    assert (table["baseline_total"], table["candidate_total"]) == (150.0, 160.0)
    assert table["change_pct"] == pytest.approx(100 * 10 / 150)
    assert table["functions"][0] == {
        "function": "f",
        "baseline_per_op": 100.0,
        "candidate_per_op": 110.0,
        "diff_per_op": 10.0,
        "share_pct": 100.0,
    }
    with pytest.raises(BadInput, match="no instruction profiles"):
        attribution.attribute(RunCosts(8, ("a", "b"), pd.DataFrame()), "a", "b")


def test_the_threshold_decides_the_verdict_not_the_interval():
    """The same -10% is a regression at a 5% threshold and no change at 12% (its whole
    interval lies inside the band): the interval is the same."""
    strict = pooled_of(comparison.compare(paired_run(0.90), thresholds=Thresholds(throughput=5)))
    wide = pooled_of(comparison.compare(paired_run(0.90), thresholds=Thresholds(throughput=12)))
    assert (strict.verdict, wide.verdict) == ("regression", "no change")
    assert (wide.ci_low_pct, wide.ci_high_pct) == (
        strict.ci_low_pct,
        strict.ci_high_pct,
    )


def _command_row(target: str, command: str, calls: float, valid: bool = True, **kw) -> dict:
    row = {
        "workload": "queue", "point": "pipeline=1", "point_order": 1, "target": target,
        "mode": "throughput", "valid": valid, "source": "server", "command": command,
        "calls": calls, "usec": 2.0 * calls, "failed_calls": None, "p99_ms": None,
    }  # fmt: skip
    return {**row, **kw}


def test_the_command_breakdown_shares_calls_and_keeps_untrusted_cells_apart():
    frame = pd.DataFrame(
        [
            _command_row("a", "lpush", 300.0),
            _command_row("a", "brpop", 100.0),
            _command_row("a", "info", 5.0),  # regtrack's own: not the workload's
            _command_row("a", "lpush", 1.0, mode="instructions"),  # not a throughput trial
            _command_row("a", "lpush", 0.0, source="loadgen", p99_ms=0.4),
            _command_row("a", "lpush", 0.0, source="loadgen", p99_ms=0.6),
            _command_row("b", "lpush", 50.0, valid=False),  # b's cell has no valid trial
            _command_row("b", "brpop", 50.0, valid=False),
        ]
    )
    rows = commands.breakdown(frame)
    got = [(r.target, r.command, r.calls, r.share_pct, r.trusted) for r in rows]
    assert got == [
        ("a", "lpush", 300.0, 75.0, True),
        ("a", "brpop", 100.0, 25.0, True),
        ("b", "brpop", 50.0, 50.0, False),
        ("b", "lpush", 50.0, 50.0, False),
    ]
    assert rows[0].usec_per_call == 2.0 and rows[0].client_p99_ms == pytest.approx(0.5)
    assert rows[1].client_p99_ms is None
    single = frame[frame["command"] != "brpop"]
    assert commands.breakdown(single) == [], "one command per cell: nothing to break down"


def test_a_runs_report_line_is_summarised_from_its_record_and_trials():
    """The index line of a run (analysis.report_data.summarize): its versions, workloads,
    trial counts and gating verdicts, and what its command printed was forced."""
    from regtrack.analysis.records import ServerFacts
    from regtrack.analysis.report_data import summarize

    measured = paired_run(0.90, reps=4)
    invalid = trial(
        99, "a", "pipeline=1", 3, None, reasons=(TrialReason(InvalidReason.SERVER_DIED, "x"),)
    )
    trials = pd.concat([measured.trials, pd.DataFrame([invalid])], ignore_index=True)
    run = stored(status="incomplete", status_detail="Ctrl-C", metric="both",
                 printed=Printed(forced=("clients 10 != 50",)))  # fmt: skip
    line = summarize(LoadedRun(run, trials), comparison.compare(measured), ServerFacts())
    assert (line.id, line.status, line.status_detail) == (1, "incomplete", "Ctrl-C")
    assert [v["label"] for v in line.versions] == ["a", "b"]
    assert (line.workloads, line.metric, line.runtime) == (["get"], "both", "native")
    assert (line.n_trials, line.n_invalid) == (17, 1)
    assert line.verdicts == {"regression": 2} and line.forced == ["clients 10 != 50"]
    empty = summarize(LoadedRun(stored(), pd.DataFrame()), None, ServerFacts())
    assert (empty.n_trials, empty.n_invalid, empty.workloads, empty.verdicts) == (0, 0, [], {})
