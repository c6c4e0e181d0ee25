"""Where in a line of commits a metric steps: bisection on measured verdicts, pure logic.

Commits are indexed 0 (good) to n-1 (bad) along the first parent. The search asks an
oracle about one commit at a time; the oracle measures it and says how it compares with
the ends (``classify``), or that it cannot be built or decided (``SKIP``). Kept apart from
measuring so the search itself is checked on simulated histories in milliseconds.

A commit can be like neither end: between them (the range holds more than one step) or
beyond one (better than good, worse than bad: the metric is not monotonic over the
range). Plain bisection says so and still converges on one step; ``all_steps`` finds
every step by recursive splitting (amphtml's ``--all``). Like any bisection, a rise and
an equal fall both between two measured commits are invisible: a range run (``--every``)
draws the whole series.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

GOOD = "like good"
BAD = "like bad"
BETWEEN = "between good and bad"
BEYOND_GOOD = "better than good"
BEYOND_BAD = "worse than bad"
UNDECIDED = "undecided"
SKIP = "skipped"
NEITHER = (BETWEEN, BEYOND_GOOD, BEYOND_BAD)


def classify(vs_good: str, vs_bad: str) -> str:
    """How a commit compares with the ends, from two verdicts (analysis.stats.verdict) of
    the commit as candidate: against good as baseline, and against bad as baseline."""
    if "inconclusive" in (vs_good, vs_bad):
        return UNDECIDED
    if vs_good == "no change" and vs_bad == "improvement":
        return GOOD
    if vs_good == "regression" and vs_bad == "no change":
        return BAD
    if vs_good == "improvement":
        return BEYOND_GOOD
    if vs_bad == "regression":
        return BEYOND_BAD
    if vs_good == "regression" and vs_bad == "improvement":
        return BETWEEN
    return UNDECIDED  # like both ends at once: the ends do not differ by the threshold


@dataclass
class Outcome:
    """Where plain bisection converged, and what it saw on the way."""

    last_good: int
    first_bad: int
    judged: dict[int, str] = field(default_factory=dict)  # index -> classification / SKIP
    skipped_between: list[int] = field(default_factory=list)  # unbuilt/undecided in (good, bad)

    @property
    def multiple_steps(self) -> list[int]:
        """Commits like neither end: the range holds more than one step."""
        return [i for i, c in self.judged.items() if c in NEITHER]


def middle(lo: int, hi: int, skipped: set[int]) -> int | None:
    """The untried commit strictly between lo and hi nearest their middle (git bisect's
    choice after a skip: a neighbour of the middle), or None when none is left."""
    candidates = [i for i in range(lo + 1, hi) if i not in skipped]
    if not candidates:
        return None
    centre = (lo + hi) / 2
    return min(candidates, key=lambda i: (abs(i - centre), i))


def bisect(n: int, judge: Callable[[int], str]) -> Outcome:
    """First-bad search over indices 0 (good) .. n-1 (bad); ``judge(i)`` classifies i.

    A commit between the ends, or worse than bad, counts as bad (the first step is before
    it); better than good counts as good. Skipped commits are stepped around; if some are
    left between the last good and the first bad, the answer is that range.
    """
    outcome = Outcome(last_good=0, first_bad=n - 1)
    skipped: set[int] = set()
    while (mid := middle(outcome.last_good, outcome.first_bad, skipped)) is not None:
        verdict = judge(mid)
        outcome.judged[mid] = verdict
        if verdict in (SKIP, UNDECIDED):
            skipped.add(mid)
        elif verdict in (GOOD, BEYOND_GOOD):
            outcome.last_good = mid
        else:
            outcome.first_bad = mid
    outcome.skipped_between = sorted(
        i for i in skipped if outcome.last_good < i < outcome.first_bad
    )
    return outcome


@dataclass
class Steps:
    """Every step found by recursive splitting: pairs (i, j) with no measured commit
    between them whose values differ by at least the threshold."""

    steps: list[tuple[int, int]] = field(default_factory=list)
    measured: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)


def all_steps(
    n: int, measure: Callable[[int], bool], differs: Callable[[int, int], bool | None]
) -> Steps:
    """Split every interval whose ends differ until the steps are between neighbours.

    ``measure(i)`` measures commit i (False: it cannot be built or measured, skipped);
    ``differs(i, j)`` compares two measured commits: True (a change of at least the
    threshold), False (no change) or None (undecided, explored as if it differed, so a
    step is never dropped for want of evidence). Indices 0 and n-1 are measured first.
    """
    found = Steps(measured=[0, n - 1])
    skipped: set[int] = set()
    queue = [(0, n - 1)]
    while queue:
        i, j = queue.pop(0)
        if differs(i, j) is False:
            continue
        mid = middle(i, j, skipped)
        if mid is None:
            found.steps.append((i, j))
            continue
        if not measure(mid):
            skipped.add(mid)
            queue.insert(0, (i, j))
            continue
        found.measured.append(mid)
        queue[:0] = [(i, mid), (mid, j)]
    found.steps.sort()
    found.skipped = sorted(skipped)
    return found
