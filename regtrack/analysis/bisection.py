"""Where in a line of commits a metric changes: bisection by position, pure logic.

Commits are indexed 0 (good) to n-1 (bad) along the first parent. A measured commit has a
*share*: its change against good as a fraction of bad's (0 at good, 1 at bad). Asking
"is this commit like good or like bad?" turns binary search into a linear scan as soon as
the range holds steps smaller than the threshold (a commit between two steps is like
neither, so it used to be skipped). Asking instead "is its share above or below a cut?"
(half of the interval's change) always has an answer: decided when the commit's interval
excludes the cut, else by its point estimate when the budget is spent, never skipped.
So every measured commit halves the range, whatever the number or size of the steps.

A search in an interval ends on a crossing pair (neighbours, or only unbuildable commits
between). The pair is a **step** when it carries at least ``STEP_FRACTION`` of the
interval's change, else the change is **spread** over the interval (a drift, or many small
steps): the pair is where half of it is in, and the search stops there, rather than measure
every commit of a drift, unless a measured interval beside the pair carries a step's share
and changes faster per commit (a plateau between two equal steps sits on the cut: the pair
is then two commits of it, the step is beside it). ``every=True`` (--all-steps) then
searches every interval between measured commits whose shares differ by at least
``MIN_SHARE`` of the ends' change, largest first: each further step costs O(log n)
commits. A rise and an equal fall both between two
measured commits stay invisible, as in any bisection; a range run (``--every``) draws the
whole series. Kept apart from measuring so the search is checked on simulated histories in
milliseconds (tests/test_bisection.py, benchmarks/bisect_scale.py).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from scipy.stats import t as student_t

from regtrack.analysis.interval import Change

SKIPPED = "skipped"  # a commit that does not build, in the bisection's log
STEP_FRACTION = 0.25  # a crossing pair carrying less of its interval's change: spread
MIN_SHARE = 0.25  # an interval changing by less of the ends' change is not searched
MAX_SEARCHES = 8  # --all-steps: at most this many steps or spread intervals are searched


@dataclass(frozen=True)
class Placement:
    """A measured commit against a cut: its share, which side of the cut, and whether the
    measurement decided it (interval excludes the cut) or its point estimate did."""

    share: float
    above: bool  # share above the cut (on bad's side when the interval rises)
    decided: bool = True
    # The interval of the position test ((1 - cut) g + cut b, logs): how far from deciding.
    low: float = -math.inf
    high: float = math.inf

    def may_decide(self, blocks: int, more: int, floor_sd: float = 0.0) -> bool:
        """Whether ``more`` seed-matched blocks instead of ``blocks`` could decide it: the
        interval's middle kept, its half-width shrunk as a t interval's, t(n-1)/sqrt(n),
        except for the part no number of blocks removes (``floor_sd``, log scale: the
        runs' shifts of a comparison across runs). A futility rule: a commit sitting on
        the cut is placed by its estimate at once rather than measured to the end of its
        budget."""
        if self.decided:
            return True
        if blocks < 2 or not (math.isfinite(self.low) and math.isfinite(self.high)):
            return True  # nothing to project from yet
        middle, half = (self.low + self.high) / 2, (self.high - self.low) / 2

        def width(n: int) -> float:
            return float(student_t.ppf(0.975, n - 1)) / math.sqrt(n)

        fixed = 1.96 * floor_sd
        shrinking = math.sqrt(max(0.0, half * half - fixed * fixed)) * width(more) / width(blocks)
        return abs(middle) > math.hypot(shrinking, fixed)


def _log(pct: float) -> float:
    return math.log1p(pct / 100.0) if pct > -100.0 else -math.inf


def placement(vs_good: Change, vs_bad: Change, cut: float, ends_pct: float) -> Placement:
    """Where a commit lies against ``cut`` (a share of the ends' change ``ends_pct``), from
    its change against good and against bad (logs g = x - good, b = x - bad): the
    intervals of two pooled comparisons (records.PooledComparison.interval).

    x - good - cut (bad - good) = (1 - cut) g + cut b, so the commit is above the cut when
    that combination has the sign of the ends' change. Its interval is the same combination
    of the two intervals' bounds: if each covers its change, the sum covers (Bonferroni,
    valid however the two are correlated, at the price of some width). Share: g / (g - b).
    """
    g, b = _log(vs_good.estimate_pct), _log(vs_bad.estimate_pct)
    low = (1 - cut) * _log(vs_good.low_pct) + cut * _log(vs_bad.low_pct)
    high = (1 - cut) * _log(vs_good.high_pct) + cut * _log(vs_bad.high_pct)
    rising = ends_pct > 0
    estimate = (1 - cut) * g + cut * b
    share = g / (g - b) if g != b else cut
    decided = low > 0 or high < 0 if math.isfinite(low) and math.isfinite(high) else False
    return Placement(share, (estimate > 0) == rising, decided, low, high)


# place(i, cut): measure commit i (or reuse its measurement) and place it against the cut;
# None when it cannot be built or measured (skipped, like `git bisect skip`).
Place = Callable[[int, float], Placement | None]


@dataclass(frozen=True)
class Found:
    """The end of one search: the crossing pair in ``interval`` and what it carries."""

    last_good: int  # the pair's commit on the interval's start side
    first_bad: int  # the pair's commit on its end side (only unbuildable ones between)
    interval: tuple[int, int]
    jump: float  # share(first_bad) - share(last_good), in shares of the ends' change
    change: float  # share(interval end) - share(interval start)

    @property
    def kind(self) -> Literal["step", "spread"]:
        big = abs(self.jump) >= STEP_FRACTION * abs(self.change)
        return "step" if big and self.jump * self.change > 0 else "spread"


@dataclass
class Search:
    """Everything one bisection found and measured."""

    found: list[Found] = field(default_factory=list)
    shares: dict[int, float] = field(default_factory=dict)  # measured commits (ends: 0, 1)
    skipped: set[int] = field(default_factory=set)
    by_estimate: set[int] = field(default_factory=set)  # placed by point estimate
    unresolved: list[tuple[int, int]] = field(default_factory=list)  # nothing to cross

    @property
    def judged(self) -> int:
        """Commits measured or tried besides the two ends."""
        return len(self.shares) - 2 + len(self.skipped)


def middle(lo: int, hi: int, skipped: set[int]) -> int | None:
    """The untried commit strictly between lo and hi nearest their middle (git bisect's
    choice after a skip: a neighbour of the middle), or None when none is left."""
    candidates = [i for i in range(lo + 1, hi) if i not in skipped]
    if not candidates:
        return None
    centre = (lo + hi) / 2
    return min(candidates, key=lambda i: (abs(i - centre), i))


def _cross(lo: int, hi: int, place: Place, search: Search, n: int) -> Found | None:
    """Binary search in (lo, hi) for the pair where the share crosses the interval's middle
    (commits measured already narrow it first, so a further search reuses them). None when
    one of the interval's own ends is decided on the other's side of that cut."""
    start, end = search.shares[lo], search.shares[hi]
    cut, rising = (start + end) / 2, end > start
    interval = (lo, hi)

    def end_side(i: int) -> bool | None:
        placed = place(i, cut)
        if placed is None:
            search.skipped.add(i)
            return None
        search.shares[i] = placed.share
        if not placed.decided:
            search.by_estimate.add(i)
        return placed.above == rising

    def wrong_side(i: int, end_side_expected: bool) -> bool:
        placed = place(i, cut)
        return (
            placed is not None and placed.decided and (placed.above == rising) != end_side_expected
        )

    # The range's ends were decided apart when bisect began; a commit measured for another
    # cut that is decided on the wrong side of this one leaves nothing to cross here.
    if (lo != 0 and wrong_side(lo, False)) or (hi != n - 1 and wrong_side(hi, True)):
        search.unresolved.append(interval)
        return None
    for i in sorted(k for k in search.shares if lo < k < hi):
        if end_side(i):
            hi = i
            break
        lo = i
    while (mid := middle(lo, hi, search.skipped)) is not None:
        side = end_side(mid)
        if side is None:
            continue
        lo, hi = (lo, mid) if side else (mid, hi)
    return Found(lo, hi, interval, search.shares[hi] - search.shares[lo], end - start)


def _beside(found: Found, place: Place, search: Search, n: int) -> Found:
    """A spread pair whose commits sit on the cut (two equal steps leave a plateau at half
    the change, and noise puts neighbours of it either side) may have a step just beside
    it: the measured interval next to the pair that carries at least ``STEP_FRACTION`` of
    the change is searched (or is a step already, if nothing lies between), and what it
    finds is the answer when it is a step. A drift has no such neighbour: a measured
    interval beside its pair changes no faster per commit than the pair does."""
    measured = sorted(k for k in search.shares if found.interval[0] <= k <= found.interval[1])
    at = measured.index(found.last_good)
    sides = [
        (measured[at - 1], found.last_good) if at > 0 else None,
        (found.first_bad, measured[at + 2]) if at + 2 < len(measured) else None,
    ]
    for a, b in sorted(
        (side for side in sides if side is not None),
        key=lambda side: -abs(search.shares[side[1]] - search.shares[side[0]]),
    ):
        jump = search.shares[b] - search.shares[a]
        if abs(jump) < STEP_FRACTION * abs(found.change) or jump * found.change <= 0:
            continue
        if abs(jump) / (b - a) < 2 * abs(found.jump) / (found.first_bad - found.last_good):
            continue  # changing no faster per commit than the pair: the drift goes on
        pair = (a, b)
        if middle(a, b, search.skipped) is not None:
            inner = _cross(a, b, place, search, n)
            if inner is None:
                continue
            pair = (inner.last_good, inner.first_bad)
        beside = Found(*pair, found.interval, search.shares[pair[1]] - search.shares[pair[0]],
                       found.change)  # fmt: skip
        if beside.kind == "step":
            return beside
    return found


def _next_interval(n: int, search: Search) -> tuple[int, int] | None:
    """The widest-changing interval between neighbouring measured commits still to search:
    shares at least MIN_SHARE apart, an untried commit inside, outside spread intervals
    and not found to have nothing to cross already."""
    spread = [f.interval for f in search.found if f.kind == "spread"]
    measured = sorted(search.shares)
    best, best_change = None, MIN_SHARE
    for a, b in itertools.pairwise(measured):
        change = abs(search.shares[b] - search.shares[a])
        inside = any(s <= a and b <= e for s, e in spread)
        tried = (a, b) in search.unresolved
        if (
            change >= best_change
            and not inside
            and not tried
            and middle(a, b, search.skipped) is not None
        ):
            best, best_change = (a, b), change
    return best


def covered(found: list[Found]) -> float:
    """How much of the ends' change the steps and spread intervals found account for."""
    return sum(abs(f.jump) if f.kind == "step" else abs(f.change) for f in found)


def _between(n: int, place: Place, search: Search) -> bool:
    """Whether a measured commit is decided between the ends (above a quarter of their
    change and below three quarters): evidence of more than one change, not noise."""
    for i in sorted(search.shares):
        if 0 < i < n - 1:
            low, high = place(i, MIN_SHARE), place(i, 1 - MIN_SHARE)
            if low and high and low.decided and high.decided and low.above and not high.above:
                return True
    return False


def locate(n: int, place: Place, every: bool = False) -> Search:
    """Search commits 0 (good) .. n-1 (bad): first the crossing of half the ends' change.
    Plain: then, while a measured commit is decided between the ends' levels, the
    interval that still changes most, until what was found accounts for all but MIN_SHARE
    of the ends' change (two steps of half each are both named). ``every`` (--all-steps):
    until no interval between measured commits changes by MIN_SHARE, by estimate."""
    search = Search(shares={0: 0.0, n - 1: 1.0})
    interval: tuple[int, int] | None = (0, n - 1)
    while interval is not None and len(search.found) < MAX_SEARCHES:
        found = _cross(*interval, place, search, n)
        if found is not None:
            search.found.append(found if found.kind == "step" else _beside(found, place, search, n))
        if not every and (covered(search.found) >= 1 - MIN_SHARE or not _between(n, place, search)):
            break
        interval = _next_interval(n, search)
    search.found.sort(key=lambda f: f.last_good)
    return search
