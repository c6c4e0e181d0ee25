"""Intervals and verdicts: the rules of docs/methodology.md on constructed samples."""

import math
import random

import pytest

from regtrack.analysis import stats


def test_paired_interval_contains_the_estimate_and_shrinks_with_less_noise():
    rng = random.Random(3)
    base = [100_000 * (1 + rng.gauss(0, 0.05)) for _ in range(6)]
    noisy = [b * 0.97 * (1 + rng.gauss(0, 0.03)) for b in base]
    quiet = [b * 0.97 * (1 + rng.gauss(0, 0.001)) for b in base]
    wide, narrow = stats.paired(base, noisy), stats.paired(base, quiet)
    for change in (wide, narrow):
        assert change.low_pct <= change.estimate_pct <= change.high_pct
        assert change.n == 6 and change.method == "paired-t"
    assert narrow.high_pct - narrow.low_pct < wide.high_pct - wide.low_pct
    assert narrow.estimate_pct == pytest.approx(-3.0, abs=0.2)


def test_pairing_removes_drift_that_hits_both_sides():
    """Drift of +-20% between repetitions, a steady -3% change: paired sees it, Welch not."""
    drift = [1.0, 1.2, 0.85, 1.1, 0.9]
    base = [100.0 * d for d in drift]
    cand = [97.0 * d for d in drift]
    paired, welch = stats.paired(base, cand), stats.unpaired(base, cand)
    assert stats.verdict(paired, 2.0, True) == "regression"
    assert stats.verdict(welch, 2.0, True) == "inconclusive"


@pytest.mark.parametrize(
    ("low", "est", "high", "higher_is_better", "expected"),
    [
        (-8.0, -6.0, -4.0, True, "regression"),
        (4.0, 6.0, 8.0, True, "improvement"),
        (-1.0, 0.0, 1.0, True, "no change"),
        (-6.0, -3.0, -0.5, True, "inconclusive"),  # below zero, but not beyond the threshold
        (-9.0, -6.0, 1.0, True, "inconclusive"),  # beyond the threshold, but not below zero
        (4.0, 6.0, 8.0, False, "regression"),  # instructions or latency: up is worse
        (-8.0, -6.0, -4.0, False, "improvement"),
    ],
)
def test_verdict_rules(low, est, high, higher_is_better, expected):
    change = stats.Change(est, low, high, 5, "paired-t")
    assert stats.verdict(change, 5.0, higher_is_better) == expected


def test_no_interval_is_inconclusive():
    assert stats.paired([1.0], [1.0]) is None
    assert stats.verdict(None, 5.0, True) == "inconclusive"
    # A sequential interval's first look may be unbounded: it decides nothing.
    unbounded = stats.Change(0.0, -100.0, math.inf, 2, "t-spending", math.inf)
    assert stats.verdict(unbounded, 5.0, True) == "inconclusive"


def test_extra_repetitions_estimate():
    # Half-width 4 at n=4; the estimate (-3) is inside the threshold (5): room 2 -> n ~ 16.
    change = stats.Change(-3.0, -7.0, 1.0, 4, "paired-t")
    assert stats.extra_repetitions(change, 5.0) == 12
    on_the_edge = stats.Change(-5.0, -9.0, -1.0, 4, "paired-t")
    assert stats.extra_repetitions(on_the_edge, 5.0) is None
    # Finite, but its square is not (a crafted trial 1e7 times the others): none would do.
    huge = stats.Change(1.0, -1e200, 1e200, 2, "paired-t")
    assert stats.extra_repetitions(huge, 5.0) is None


def test_welch_handles_identical_samples():
    change = stats.unpaired([10.0, 10.0, 10.0], [10.0, 10.0, 10.0])
    assert change.estimate_pct == 0 and change.low_pct == 0 and change.high_pct == 0
    assert stats.verdict(change, 1.0, True) == "no change"


def test_confidence_level_widens_the_interval():
    base = [1.0, 1.1, 0.9, 1.05]
    cand = [x * 1.02 * (1 + 0.01 * i) for i, x in enumerate(base)]
    at95 = stats.paired(base, cand, 0.95)
    at99 = stats.paired(base, cand, 0.99)
    assert at99.low_pct < at95.low_pct and at99.high_pct > at95.high_pct
    assert math.isclose(at95.estimate_pct, at99.estimate_pct)
