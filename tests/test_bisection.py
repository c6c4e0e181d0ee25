"""Bisection by position on simulated histories: where it converges, how many commits it
measures, skips, several steps, drifts (plain and --all-steps), and the placement of one
measured commit against a cut. benchmarks/bisect_scale.py runs the same search at scale."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from regtrack.analysis import bisection


def _change(value: float, baseline: float, radius: float = 0.1) -> bisection.Change:
    pct = 100.0 * (value / baseline - 1.0)
    return bisection.Change(pct, pct - radius, pct + radius)


def _oracle(values: list[float], unbuildable: frozenset[int] = frozenset()):
    """Places a commit from its change against both ends, known to +-0.1% (instructions
    per op with fixed seeds), through bisection.placement as flows/bisect.py does."""
    measured: list[int] = []
    ends_pct = 100.0 * (values[-1] / values[0] - 1.0)

    def place(i: int, cut: float) -> bisection.Placement | None:
        if i in unbuildable:
            return None
        measured.append(i)
        vs_good, vs_bad = _change(values[i], values[0]), _change(values[i], values[-1])
        return bisection.placement(vs_good, vs_bad, cut, ends_pct)

    return place, measured


def _pairs(search: bisection.Search) -> list[tuple[int, int, str]]:
    return [(f.last_good, f.first_bad, f.kind) for f in search.found]


@pytest.mark.parametrize("step_at", range(1, 16))
def test_one_step_is_found_at_every_position_within_log2_measurements(step_at):
    values = [3000.0] * step_at + [3150.0] * (16 - step_at)  # +5% from commit step_at on
    place, measured = _oracle(values)
    search = bisection.locate(16, place)
    assert _pairs(search) == [(step_at - 1, step_at, "step")]
    assert len(set(measured)) <= math.ceil(math.log2(15)), "at most 4 commits besides the ends"
    assert not search.skipped and not search.by_estimate


def test_an_unbuildable_commit_is_stepped_around():
    values = [3000.0] * 9 + [3150.0] * 7
    place, _ = _oracle(values, unbuildable=frozenset({8}))
    search = bisection.locate(16, place)
    assert _pairs(search) == [(7, 9, "step")], "the answer is 'one of 8 and 9'"
    assert search.skipped == {8}
    place, measured = _oracle(values, unbuildable=frozenset({7}))
    search = bisection.locate(16, place)
    assert _pairs(search) == [(8, 9, "step")] and len(set(measured)) <= 5


def test_two_steps_below_the_threshold_are_both_named_in_log_time():
    """Two +0.6% steps in 1,024 commits (each under a 1% threshold): the commits between
    them are half way, which used to be 'like neither end' and skipped (a linear scan)."""
    values = [3000.0] * 300 + [3018.0] * 400 + [3036.0] * 324
    place, measured = _oracle(values)
    search = bisection.locate(1024, place)
    assert _pairs(search) == [(299, 300, "step"), (699, 700, "step")]
    assert len(set(measured)) <= 2 * 10


def test_a_drift_is_reported_as_spread_not_scanned():
    values = list(np.linspace(3000.0, 3045.0, 1024))
    place, measured = _oracle(values)
    search = bisection.locate(1024, place, every=True)
    (found,) = search.found
    assert found.kind == "spread" and found.interval == (0, 1023)
    assert 0.45 < search.shares[found.first_bad] < 0.55, "where half of the change is in"
    assert len(set(measured)) <= 11


UP_DOWN_UP = [3000.0] * 4 + [3150.0] * 4 + [3000.0] * 4 + [3270.0] * 4  # +5%, back, +9%


def test_all_steps_finds_up_down_and_up():
    place, measured = _oracle(UP_DOWN_UP)
    search = bisection.locate(16, place, every=True)
    assert _pairs(search) == [(3, 4, "step"), (7, 8, "step"), (11, 12, "step")]
    assert len(set(measured)) < 14, "it did not measure everything"


def test_a_commit_is_placed_by_its_interval_or_else_by_its_estimate():
    ends = -10.0  # throughput: bad is 10% slower
    near_good = bisection.placement(
        bisection.Change(-1.0, -3.0, 1.0), bisection.Change(9.9, 7.0, 13.0), 0.5, ends
    )
    assert (near_good.share, near_good.above, near_good.decided) == (
        pytest.approx(0.1, abs=0.02),
        False,
        True,
    )
    wide = bisection.placement(
        bisection.Change(-6.0, -14.0, 2.0), bisection.Change(4.4, -4.0, 13.0), 0.5, ends
    )
    assert wide.above and not wide.decided and wide.share == pytest.approx(0.6, abs=0.02)
    unbounded = bisection.placement(
        bisection.Change(-9.0, -100.0, math.inf), bisection.Change(1.0, -100.0, math.inf), 0.5, ends
    )
    assert unbounded.above and not unbounded.decided
    assert unbounded.may_decide(2, 4), "no interval to project from: measure on"


def test_more_seeds_are_asked_for_only_where_they_could_decide():
    """Futility: a commit whose interval sits far from the cut can be decided by more
    blocks; one whose interval is centred on the cut cannot, whatever it is given."""
    ends = 2.0  # instructions: bad is 2% above good
    off_cut = bisection.placement(
        bisection.Change(1.9, -0.5, 4.3), bisection.Change(-0.1, -2.5, 2.3), 0.5, ends
    )
    on_cut = bisection.placement(
        bisection.Change(1.0, -1.4, 3.4), bisection.Change(-1.0, -3.4, 1.4), 0.5, ends
    )
    assert not off_cut.decided and not on_cut.decided
    assert off_cut.may_decide(2, 8) and not off_cut.may_decide(4, 5)
    assert not on_cut.may_decide(2, 30)
    # Across runs the runs' shifts stay in the interval: a floor no seed removes.
    assert off_cut.may_decide(2, 30, floor_sd=0.001)
    assert not off_cut.may_decide(2, 30, floor_sd=0.005)


@given(
    values=st.lists(st.sampled_from([3000.0, 3030.0, 3150.0]), min_size=2, max_size=40),
    skip=st.sets(st.integers(min_value=1, max_value=38), max_size=5),
    every=st.booleans(),
)
def test_every_reported_step_is_a_real_change_between_neighbours(values, skip, every):
    n = len(values)
    skip = frozenset(i for i in skip if i < n - 1)
    if values[0] == values[-1]:
        values = [*values[:-1], values[-1] + 150.0]  # bisect refuses ends that do not differ
    place, _ = _oracle(values, skip)
    search = bisection.locate(n, place, every)
    assert search.found, "ends that differ always yield an answer"
    for f in search.found:
        assert all(k in skip for k in range(f.last_good + 1, f.first_bad)), "neighbours"
        if f.kind == "step":
            assert values[f.last_good] != values[f.first_bad]


def test_plain_bisection_searches_on_only_when_a_commit_is_decided_between_the_ends():
    """Two half steps measured so loosely that nothing is decided between the ends: plain
    bisection names the first and stops (its share tells the rest); --all-steps goes on
    by estimate and names the second too."""
    values = [3000.0] * 10 + [3018.0] * 10 + [3036.0] * 12

    def loose(i: int, cut: float) -> bisection.Placement:
        vs_good, vs_bad = _change(values[i], values[0], 2.0), _change(values[i], values[-1], 2.0)
        return bisection.placement(vs_good, vs_bad, cut, 1.2)

    plain = bisection.locate(32, loose)
    assert [(f.last_good, f.first_bad) for f in plain.found] == [(9, 10)]
    assert plain.by_estimate, "placed by estimate: the intervals could not decide"
    every = bisection.locate(32, loose, every=True)
    assert [(f.last_good, f.first_bad) for f in every.found] == [(9, 10), (19, 20)]


def test_a_plateau_on_the_cut_is_not_taken_for_a_drift():
    """Two equal steps leave the commits between them at half the ends' change, on the cut:
    undecided there, their estimates fall either side, and the crossing pair can be two
    commits of the plateau (as a real bisection of two +0.8% steps did). The step beside
    that pair is named, and --all-steps then finds the second."""
    values = [0.0] * 9 + [0.5] * 8 + [1.0] * 7  # steps at 9 and 17 of 24

    def place(i: int, cut: float) -> bisection.Placement:
        share = values[i] + (-0.02 if i == 9 else 0.02 if values[i] == 0.5 else 0.0)
        return bisection.Placement(share, share >= cut, decided=abs(share - cut) > 0.1)

    plain = bisection.locate(24, place)
    assert _pairs(plain)[0] == (8, 9, "step")
    every = bisection.locate(24, place, every=True)
    assert _pairs(every) == [(8, 9, "step"), (16, 17, "step")]
