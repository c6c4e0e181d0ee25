"""Where a series of per-run values steps to a new level: penalised segmentation (PELT)
calibrated for autocorrelated run-to-run noise.

The method of the history pages (docs/reports.md). Values are taken in percent of the
series median, so one penalty fits every metric; the cost of a segment is its squared
deviation from its own mean, searched exactly by PELT (ruptures' KernelCPD with the
linear kernel: the same cost as its "l2" model, in C, so a tracked branch's history pages
stay fast), and each change costs ``PENALTY σ² ln n``: the BIC form for a mean shift of
known variance, with the factor chosen by simulation (benchmarks/changepoints.py, numbers
in docs/reports.md). Segments are at least three runs long.

σ in that penalty is the noise's long-run standard deviation, the one that governs how far
the mean of a stretch of runs wanders. Run-to-run noise is often autocorrelated (a machine
slow for an hour), and then the short-run σ, from successive differences (median absolute
deviation / √2, which a few steps do not inflate), understates it: with an AR(1) lag-1
autocorrelation φ, long-run σ = short-run σ · √(1+φ) / (1−φ), 2.4 times it at φ = 0.5,
where the short-run σ alone raised a false change point in 21% of pure-noise series of 50
runs and 14% of 200. φ is estimated from the series itself: the lag-1 autocorrelation of
the residuals around the segments' medians (winsorised, pairs across a cut left out), plus
``PHI_MARGIN_SE`` standard errors (√((1−φ²)/n)), because a series of 50 runs pins φ down
only to ±0.14 and a low estimate is what lets wandering noise through; the series is then
segmented again with the new σ until the cuts stop moving. This keeps false change points
at ≤ 0.3% for φ = 0.5 (50 and 200 runs) and no higher than before for independent and
heavy-tailed noise; the price is power on short series (a 3.3 σ step after 12 of 22 runs of
independent noise: 73% found instead of 88%; 3 σ in the middle of 50 runs: 92% either way).
σ is floored at ``SIGMA_FLOOR_PCT`` so that a deterministic metric (instructions per op
repeat to ~0.1%) does not report steps of a few hundredths of a percent. Levels are segment
medians; a cut whose levels differ by less than 2 short-run σ (PELT carving out an outlier)
is dropped.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SIGMA_FLOOR_PCT = 0.1
MIN_SEGMENT = 3
PENALTY = 6.0
MIN_STEP_SIGMAS = 2.0  # a level change smaller than this many short-run σ is not reported
PHI_MARGIN_SE = 1.0  # standard errors added to the estimated autocorrelation
PHI_MAX = 0.8  # beyond this the series is a random walk, not noise around levels
WINSOR_SIGMAS = 2.5  # residuals clipped here before their autocorrelation is taken
MAX_ROUNDS = 5  # re-segmentations with a new σ; the cuts settle in one or two


@dataclass(frozen=True)
class ChangePoint:
    index: int  # first value of the new level
    before: float  # median of the segment before
    after: float  # median of the segment after
    change_pct: float


def short_run_sd(pct: np.ndarray) -> float:
    """Robust σ from successive differences: steps barely move it, autocorrelation shrinks it."""
    diffs = np.diff(pct)
    if diffs.size == 0:
        return 0.0
    return _mad_sd(diffs) / math.sqrt(2.0)


def long_run_sd(short_sd: float, phi: float) -> float:
    """The σ that a mean of many AR(1) runs sees, from the successive-difference σ."""
    return short_sd * math.sqrt(1.0 + phi) / (1.0 - phi)


def autocorrelation(pct: np.ndarray, cuts: Sequence[int], margin_se: float) -> float:
    """Lag-1 autocorrelation of the noise around the segments' medians, plus ``margin_se``
    standard errors, in [0, PHI_MAX]: a cautious φ, since a low one lets drift through."""
    residuals, within = _residuals(pct, cuts)
    spread = _mad_sd(residuals)
    if spread == 0:
        return 0.0
    clipped = np.clip(residuals, -WINSOR_SIGMAS * spread, WINSOR_SIGMAS * spread)
    lagged = (clipped[1:] * clipped[:-1])[within]
    phi = float(lagged.sum() / (clipped @ clipped))
    phi += margin_se * math.sqrt(max(1.0 - phi * phi, 0.0) / pct.size)
    return min(max(phi, 0.0), PHI_MAX)


def detect(
    values: Sequence[float], *, margin_se: float | None = PHI_MARGIN_SE
) -> list[ChangePoint]:
    """Change points of ``values`` in order; none for fewer than two segments' worth.

    ``margin_se=None`` assumes independent noise (the method before issue 29), which
    benchmarks/changepoints.py keeps as the baseline of its comparison.
    """
    raw = np.asarray(values, dtype=float)
    n = raw.size
    if n < 2 * MIN_SEGMENT or not np.all(np.isfinite(raw)):
        return []
    median = float(np.median(raw))
    if median == 0:
        return []
    pct = 100.0 * raw / median
    short = short_run_sd(pct)
    cuts = _segment(pct, max(short, SIGMA_FLOOR_PCT))
    if margin_se is not None:
        cuts = _settle(pct, cuts, short, margin_se)
    return _steps(raw, cuts, max(short, SIGMA_FLOOR_PCT))


def _settle(pct: np.ndarray, cuts: list[int], short: float, margin_se: float) -> list[int]:
    """Segment again with the long-run σ of the last cuts' residuals until the cuts hold."""
    sigma = max(short, SIGMA_FLOOR_PCT)
    for _ in range(MAX_ROUNDS):
        wider = max(long_run_sd(short, autocorrelation(pct, cuts, margin_se)), SIGMA_FLOOR_PCT)
        if not cuts and wider >= sigma:
            break  # PELT is exact: a higher penalty cannot find a cut where a lower one found none
        again = _segment(pct, wider)
        sigma = wider
        if again == cuts:
            break
        cuts = again
    return cuts


def _segment(pct: np.ndarray, sigma: float) -> list[int]:
    import ruptures  # here, not at the top: it imports scipy.stats (0.5 s), rarely needed

    breaks = (
        ruptures.KernelCPD(kernel="linear", min_size=MIN_SEGMENT, jump=1)
        .fit(pct.reshape(-1, 1))
        .predict(pen=PENALTY * sigma**2 * math.log(pct.size))
    )
    return [int(b) for b in breaks[:-1]]


def _steps(raw: np.ndarray, cuts: list[int], sigma: float) -> list[ChangePoint]:
    """The cuts as level changes, without those between two segments of one level."""
    while True:
        found = _levels(raw, cuts)
        # A cut between two segments of the same median level (an outlier run carved out by
        # PELT) is no change of level: drop the smallest such step and look again.
        small = [c for c in found if abs(c.change_pct) < MIN_STEP_SIGMAS * sigma]
        if not small:
            return found
        weakest = min(small, key=lambda c: abs(c.change_pct))
        cuts = [c for c in cuts if c != weakest.index]


def _levels(raw: np.ndarray, cuts: list[int]) -> list[ChangePoint]:
    edges = [0, *cuts, raw.size]
    out = []
    for start, cut, end in zip(edges, edges[1:], edges[2:], strict=False):
        before = float(np.median(raw[start:cut]))
        after = float(np.median(raw[cut:end]))
        out.append(ChangePoint(cut, before, after, 100.0 * (after / before - 1.0)))
    return out


def _residuals(pct: np.ndarray, cuts: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Each value less its segment's median, and which successive pairs share a segment."""
    edges = [0, *cuts, pct.size]
    residuals = np.empty_like(pct)
    for start, end in itertools.pairwise(edges):
        residuals[start:end] = pct[start:end] - np.median(pct[start:end])
    within = np.ones(pct.size - 1, dtype=bool)
    within[[c - 1 for c in cuts]] = False
    return residuals, within


def _mad_sd(x: np.ndarray) -> float:
    return 1.4826 * float(np.median(np.abs(x - np.median(x))))
