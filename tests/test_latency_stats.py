"""Latency percentiles compared block by block (regtrack/analysis/latency.py), on
constructed trials: fast, nothing runs. Why these statistics: docs/methodology.md,
"Latency percentiles"."""

from __future__ import annotations

import math

import pytest

from regtrack.analysis import latency, sequential
from regtrack.analysis.latency import LatencyJudging, LatencyTrial
from regtrack.core.errors import BadInput
from regtrack.core.settings import Thresholds

# The host's speed per block (shared by both sides of a block, as trials paired in time
# see it) and each side's own wobble: symmetric, so an A/A stream centres on 0.
HOST = (1.00, 1.18, 0.92, 1.07, 0.85, 1.25, 0.97, 1.11, 0.90, 1.04, 1.15, 0.95)
WOBBLE = (0.01, -0.02, 0.015, -0.01, 0.02, -0.015, 0.005, -0.005, 0.01, -0.02, 0.0, 0.01)


def trial(
    target: str,
    block: int,
    scale: float,
    count: int = 40_000,
    valid: bool = True,
    tail: float = 1.0,
) -> LatencyTrial:
    """A trial whose percentiles are a fixed shape (40, 130, 190, 290 us) times ``scale``,
    its p99 and p99.9 ``tail`` times more (a stall: the median does not move)."""
    return LatencyTrial(
        target, block, count, 40 * scale, 130 * scale * tail, 190 * scale * tail,
        290 * scale * tail, valid,
    )  # fmt: skip


def stream(
    shift: float = 1.0, blocks: int = 12, count: int = 40_000, tail: float = 1.0
) -> list[LatencyTrial]:
    """Baseline "a" and candidate "b" in ``blocks`` blocks; the candidate ``shift`` times
    slower at every percentile, and ``tail`` times more beyond the median."""
    out = []
    for b in range(blocks):
        out.append(trial("a", b, HOST[b] * math.exp(WOBBLE[b]), count))
        out.append(trial("b", b, HOST[b] * math.exp(-WOBBLE[b]) * shift, count, tail=tail))
    return out


def answers(trials, **judging) -> dict[str, latency.LatencyAnswer]:
    found = latency.compare(trials, "a", "b", LatencyJudging(**judging))
    return {a.percentile: a for a in found}


def test_an_aa_stream_is_decided_no_change():
    got = answers(stream())
    for name in ("p50", "p99", "p99.9"):
        a = got[name]
        assert a.verdict == "no change", a
        assert a.change.low_pct < 0 < a.change.high_pct
        assert a.n_blocks == 12 and a.dropped_blocks == ()
    assert got["p99"].threshold_pct == Thresholds().open_loop_p99


def test_a_tail_that_doubles_is_found_with_its_size_and_the_median_is_not():
    """A stall's shape: p99 and p99.9 twice the baseline's, p50 unmoved."""
    got = answers(stream(tail=2.0))
    for name in ("p99", "p99.9"):
        change = got[name].change
        assert got[name].verdict == "regression", got[name]
        assert 0 < change.low_pct < 100 < change.high_pct
    assert got["p50"].verdict == "no change"
    faster = answers(stream(shift=0.8))
    assert faster["p99"].verdict == "improvement"


def test_a_gate_look_pays_for_the_looks_before_it():
    """t-spending at the look of 12 blocks is wider than one planned t interval, so a
    gate that looks after every block keeps its error rate (analysis/sequential.py)."""
    fixed = answers(stream())["p99"].change
    spent = answers(stream(), method="t-spending")["p99"].change
    assert spent.method == "t-spending" and fixed.method == "t"
    assert spent.high_pct - spent.low_pct > fixed.high_pct - fixed.low_pct
    assert spent.n == fixed.n == 12


def test_an_invalid_trial_is_left_out():
    """Block 4's candidate trial fell behind its schedule: its p99, 100 times the rest,
    must not move the answer, and its block is left out."""
    trials = stream()
    trials[9] = trial("b", 4, 100.0, valid=False)
    got = answers(trials)["p99"]
    without = answers([t for t in stream() if t.block != 4])["p99"]
    assert got.dropped_blocks == (4,) and got.n_blocks == 11
    assert got.change == without.change
    assert got.candidate_us < 1_000  # the display median ignores it too


def test_a_block_missing_a_side_is_dropped():
    trials = [t for t in stream() if not (t.block == 3 and t.target == "a")]
    got = answers(trials)
    for name in ("p50", "p99", "p99.9"):
        assert got[name].dropped_blocks == (3,)
        assert got[name].n_blocks == 11


def test_percentiles_beyond_the_count_are_unresolvable_not_computed():
    """5,000 requests resolve p99 (50 beyond it), not p99.9 (5 beyond it); 500 resolve
    neither."""
    got = answers(stream(count=5_000))
    assert got["p99"].verdict == "no change"
    p999 = got["p99.9"]
    assert p999.change is None and p999.verdict is None and p999.n_blocks == 0
    assert "10,000 requests" in p999.unresolvable and "5,000" in p999.unresolvable
    small = answers(stream(count=500))
    assert small["p50"].change is not None
    assert small["p99"].unresolvable and small["p99.9"].unresolvable


def test_the_max_is_shown_never_judged():
    got = answers(stream(shift=3.0))["max"]
    assert got.change is None and got.verdict is None and got.threshold_pct is None
    assert got.candidate_us == pytest.approx(290 * max(HOST) * 3.0, rel=0.03)


def test_too_few_blocks_are_inconclusive():
    got = answers(stream(blocks=1))["p99"]
    assert got.change is None and got.verdict == "inconclusive" and got.n_blocks == 1


@pytest.mark.parametrize(
    "values",
    [(50.0, 40.0, 60.0, 70.0), (40.0, 130.0, math.nan, 290.0), (-1.0, 1.0, 2.0, 3.0)],
)
def test_impossible_percentiles_are_one_line_of_bad_input(values):
    with pytest.raises(BadInput, match="rising from p50 to max"):
        LatencyTrial("a", 0, 1000, *values)


def test_an_unknown_or_repeated_version_is_bad_input():
    with pytest.raises(BadInput, match="no latency trials of 'c'"):
        latency.compare(stream(), "a", "c")
    with pytest.raises(BadInput, match="compared with itself"):
        latency.compare(stream(), "a", "a")


def test_thresholds_per_percentile_and_uniform():
    t = Thresholds()
    assert (t.for_metric("open_loop_p50"), t.for_metric("open_loop_p999")) == (5.0, 20.0)
    assert t.uniform(3.0).for_metric("open_loop_p99") == 3.0
    strict = answers(stream(shift=1.04), thresholds=Thresholds(open_loop_p99=2.0))["p99"]
    assert strict.threshold_pct == 2.0 and strict.verdict == "regression"
    assert sequential.FIXED == "t"
