"""The bisection search on simulated histories: where it converges, how many commits it
measures, skips, and ranges with more than one step (plain and --all-steps)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from regtrack.analysis import bisection, stats

THRESHOLD = 1.0  # percent, instructions per op (higher is worse)


def _verdict(value: float, baseline: float) -> str:
    """The verdict of a measured change known to +-0.1% (instructions with fixed seeds)."""
    pct = 100.0 * (value / baseline - 1.0)
    change = stats.Change(pct, pct - 0.1, pct + 0.1, n=4, method="simulated")
    return stats.verdict(change, THRESHOLD, higher_is_better=False)


def _oracle(values: list[float], unbuildable: frozenset[int] = frozenset()):
    measured: list[int] = []

    def judge(i: int) -> str:
        if i in unbuildable:
            return bisection.SKIP
        measured.append(i)
        return bisection.classify(_verdict(values[i], values[0]), _verdict(values[i], values[-1]))

    return judge, measured


@pytest.mark.parametrize("step_at", range(1, 16))
def test_one_step_is_found_at_every_position_within_log2_measurements(step_at):
    values = [3000.0] * step_at + [3150.0] * (16 - step_at)  # +5% from commit step_at on
    judge, measured = _oracle(values)
    outcome = bisection.bisect(16, judge)
    assert (outcome.last_good, outcome.first_bad) == (step_at - 1, step_at)
    assert len(measured) <= math.ceil(math.log2(15)), "at most 4 commits besides the ends"
    assert outcome.multiple_steps == [] and outcome.skipped_between == []


def test_an_unbuildable_commit_is_stepped_around():
    values = [3000.0] * 9 + [3150.0] * 7
    judge, measured = _oracle(values, unbuildable=frozenset({8}))
    outcome = bisection.bisect(16, judge)
    assert (outcome.last_good, outcome.first_bad) == (7, 9)
    assert outcome.skipped_between == [8], "the answer is 'one of 8 and 9'"
    judge, measured = _oracle(values, unbuildable=frozenset({7}))
    outcome = bisection.bisect(16, judge)
    assert (outcome.last_good, outcome.first_bad) == (8, 9) and outcome.skipped_between == []
    assert len(measured) <= 5


UP_DOWN_UP = [3000.0] * 4 + [3150.0] * 4 + [3000.0] * 4 + [3270.0] * 4  # +5%, back, +9%


def test_plain_bisection_says_when_a_commit_is_like_neither_end():
    judge, _ = _oracle(UP_DOWN_UP)
    outcome = bisection.bisect(16, judge)
    assert outcome.multiple_steps, "a commit between the ends was measured and reported"
    assert outcome.first_bad - outcome.last_good == 1
    assert UP_DOWN_UP[outcome.first_bad] != UP_DOWN_UP[outcome.last_good], "it ends on a step"


def test_all_steps_finds_up_down_and_up():
    measured: list[int] = []

    def measure(i: int) -> bool:
        measured.append(i)
        return True

    def differs(i: int, j: int) -> bool | None:
        return _verdict(UP_DOWN_UP[j], UP_DOWN_UP[i]) != "no change"

    found = bisection.all_steps(16, measure, differs)
    assert found.steps == [(3, 4), (7, 8), (11, 12)]
    assert len(set(found.measured)) < 16, "it did not measure everything"


@given(
    values=st.lists(st.sampled_from([3000.0, 3150.0, 3300.0]), min_size=2, max_size=40),
    skip=st.sets(st.integers(min_value=1, max_value=38), max_size=5),
)
def test_every_reported_step_is_a_real_change_between_neighbours(values, skip):
    n = len(values)
    skip = {i for i in skip if i < n - 1}

    def differs(i: int, j: int) -> bool | None:
        return _verdict(values[j], values[i]) != "no change"

    found = bisection.all_steps(n, lambda i: i not in skip, differs)
    for i, j in found.steps:
        assert values[i] != values[j]
        assert all(k in skip for k in range(i + 1, j)), "only unbuildable commits between"
    if values[0] != values[-1]:
        assert found.steps, "ends that differ always yield at least one step"
