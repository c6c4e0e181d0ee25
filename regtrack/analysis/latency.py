"""Latency percentiles of open-loop trials, compared across versions with intervals.

Each trial offers a fixed rate and keeps an HDR histogram; its p50, p99 and p99.9 are
the trial's own. A version's percentile is compared by the blocks the trials were measured
in: per block the log ratio candidate / baseline of the trial percentiles, then the very
block machinery of throughput (analysis/sequential.py: a t interval, or t-spending over
the looks of a gate) and the same verdicts (stats.verdict), at a threshold per percentile.

Why the block and not the request: the host's speed wanders 10-30% between trials, and a
tail percentile amplifies it (a queue at load 0.5 on a 20% slower host runs at 0.6), so
the trial-to-trial spread dwarfs the sampling error of 40,000 requests. Pooling every
request of a version and bootstrapping requests ignores that spread: its 95% intervals held
an A/A change of 0 in under half of simulated streams (docs/methodology.md, "Latency
percentiles", from benchmarks/latency_stats_sim.py), the block t intervals in 91-99%, and
a gate's t-spending never missed in at least 95%. A rank interval (Hodges-Lehmann) cannot
reach 95% below 6 blocks, nor the spent levels of a gate's first looks.

Two limits, from the same simulation:
* A percentile needs requests beyond it: q is resolvable from a trial of N requests only
  when N (1 - q) >= MIN_TAIL_SAMPLES; otherwise it is the largest few samples, reported as
  unresolvable rather than computed (p99.9 of 500 requests).
* The max is shown, never judged: it grows with the number of requests and is set by the
  one worst event of a trial (a host hiccup), so its change is a fact about that trial,
  not about the version; no interval over blocks is worth a verdict.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from regtrack.analysis import sequential, stats
from regtrack.analysis.interval import Change
from regtrack.analysis.metrics import ALPHA
from regtrack.core.errors import BadInput
from regtrack.core.settings import Thresholds

# Requests beyond a percentile a trial needs for it to be more than its largest samples:
# p99 needs 1,000 requests, p99.9 10,000.
MIN_TAIL_SAMPLES = 10


@dataclass(frozen=True)
class Percentile:
    """One latency percentile: its name, quantile, the metric its threshold is read for
    (Thresholds.for_metric), and whether it is judged at all (the max is not)."""

    name: str
    quantile: float
    metric: str | None

    @property
    def judged(self) -> bool:
        return self.metric is not None

    def resolvable(self, count: int) -> bool:
        """Enough requests beyond this percentile (MIN_TAIL_SAMPLES) for it to be one."""
        return self.judged and count * (1 - self.quantile) >= MIN_TAIL_SAMPLES - 1e-9


P50 = Percentile("p50", 0.5, "open_loop_p50")
P99 = Percentile("p99", 0.99, "open_loop_p99")
P999 = Percentile("p99.9", 0.999, "open_loop_p999")
MAX = Percentile("max", 1.0, None)
PERCENTILES = (P50, P99, P999, MAX)


@dataclass(frozen=True)
class LatencyTrial:
    """One open-loop trial of a version (``target``) in a ``block``: the percentiles of its
    latency histogram in microseconds (None where the engine gave none), over ``count``
    requests, and whether the trial is valid (an engine that fell behind its schedule,
    errors, contention: stored, never compared)."""

    target: str
    block: int
    count: int
    p50_us: float | None
    p99_us: float | None
    p999_us: float | None
    max_us: float | None
    valid: bool = True

    def __post_init__(self) -> None:
        if self.count < 0:
            raise BadInput(f"{self.target} block {self.block}: a negative request count")
        values = [v for v in (self.p50_us, self.p99_us, self.p999_us, self.max_us) if v is not None]
        if any(not math.isfinite(v) or v < 0 for v in values) or values != sorted(values):
            raise BadInput(
                f"{self.target} block {self.block}: latency percentiles must be finite, "
                f"non-negative and rising from p50 to max, got {values}"
            )

    def value(self, p: Percentile) -> float | None:
        """The trial's value of ``p`` in microseconds, None if not positive."""
        v = {P50: self.p50_us, P99: self.p99_us, P999: self.p999_us, MAX: self.max_us}[p]
        return v if v is not None and v > 0 else None


@dataclass(frozen=True)
class LatencyAnswer:
    """One percentile of a candidate against a baseline.

    ``change`` and ``verdict`` (stats.verdict's words) are None where there is nothing to
    judge: the max (never judged), or a percentile no block could resolve
    (``unresolvable`` says why). ``baseline_us`` / ``candidate_us``: the median over each
    side's valid trials, for display (the max: the largest). ``dropped_blocks``: blocks
    left out because a side had no valid, resolving trial."""

    percentile: str
    baseline: str
    candidate: str
    baseline_us: float | None
    candidate_us: float | None
    change: Change | None
    verdict: str | None
    threshold_pct: float | None
    n_blocks: int
    dropped_blocks: tuple[int, ...] = ()
    unresolvable: str | None = None


@dataclass(frozen=True)
class LatencyJudging:
    """How the intervals are computed: at ``alpha`` (the caller splits it over what it
    gates), by ``method`` (sequential.py: "t" for one planned look, "t-spending" for a
    gate), at ``look`` (None: one look per two blocks measured, valid or not)."""

    thresholds: Thresholds = field(default_factory=Thresholds)
    alpha: float = ALPHA
    method: str = sequential.FIXED
    look: sequential.Look | None = None


def compare(
    trials: Sequence[LatencyTrial],
    baseline: str,
    candidate: str,
    judging: LatencyJudging | None = None,
) -> tuple[LatencyAnswer, ...]:
    """Every percentile of ``candidate`` against ``baseline`` from their trials, block by
    block (one answer per PERCENTILES entry, in its order)."""
    judging = judging or LatencyJudging()
    if baseline == candidate:
        raise BadInput(f"latency: {baseline!r} compared with itself; name two versions")
    targets = {t.target for t in trials}
    for label in (baseline, candidate):
        if label not in targets:
            raise BadInput(f"no latency trials of {label!r}: the trials are of {sorted(targets)}")
    measured = {t.block for t in trials if t.target in (baseline, candidate)}
    look = judging.look or sequential.Look(math.ceil(len(measured) / 2))
    return tuple(_answer(p, trials, (baseline, candidate), judging, look) for p in PERCENTILES)


def _by_block(
    trials: Sequence[LatencyTrial], label: str, p: Percentile
) -> tuple[dict[int, float], list[float], int]:
    """One side of ``p``: block -> log value of its valid trials that resolve ``p`` (the
    mean of logs if a block holds several), every valid value (for display), and the
    fewest requests of a valid trial with a value."""
    logs: dict[int, list[float]] = {}
    shown: list[float] = []
    fewest = math.inf
    for t in trials:
        v = t.value(p)
        if t.target != label or not t.valid or v is None:
            continue
        shown.append(v)
        fewest = min(fewest, t.count)
        if p.resolvable(t.count):
            logs.setdefault(t.block, []).append(math.log(v))
    means = {b: math.fsum(v) / len(v) for b, v in logs.items()}
    return means, shown, int(fewest) if shown else 0


def _answer(
    p: Percentile,
    trials: Sequence[LatencyTrial],
    pair: tuple[str, str],
    judging: LatencyJudging,
    look: sequential.Look,
) -> LatencyAnswer:
    """``p``'s answer: the interval of the blocks' mean log ratio, and its verdict."""
    (base, base_shown, base_fewest), (cand, cand_shown, cand_fewest) = (
        _by_block(trials, label, p) for label in pair
    )
    summary = max if p is MAX else statistics.median
    shown = tuple(summary(v) if v else None for v in (base_shown, cand_shown))
    if not p.judged:
        return LatencyAnswer(p.name, *pair, *shown, None, None, None, 0)
    measured = {t.block for t in trials if t.target in pair}
    both = sorted(set(base) & set(cand))
    dropped = tuple(sorted(measured - set(both)))
    threshold = judging.thresholds.for_metric(p.metric or "")
    fewest = min(base_fewest, cand_fewest)
    if not both and base_shown and cand_shown and not p.resolvable(fewest):
        why = _unresolvable(p, fewest)
        return LatencyAnswer(p.name, *pair, *shown, None, None, threshold, 0, dropped, why)
    ratios = [cand[b] - base[b] for b in both]
    change = sequential.interval(ratios, judging.alpha, method=judging.method, look=look)
    verdict = stats.verdict(change, threshold, higher_is_better=False)
    return LatencyAnswer(p.name, *pair, *shown, change, verdict, threshold, len(both), dropped)


def _unresolvable(p: Percentile, fewest: int) -> str:
    needed = math.ceil(MIN_TAIL_SAMPLES / (1 - p.quantile) - 1e-9)
    return (
        f"{p.name} needs at least {needed:,} requests per trial ({MIN_TAIL_SAMPLES} beyond "
        f"it); trials had as few as {fewest:,}: not computed"
    )
