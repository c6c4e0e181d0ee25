"""Where a series of per-run values steps to a new level: penalised segmentation (PELT).

The method of the history pages (docs/reports.md). Values are taken in percent of the
series median, so one penalty fits every metric; the cost of a segment is its squared
deviation from its own mean, searched exactly by PELT (ruptures' KernelCPD with the
linear kernel: the same cost as its "l2" model, in C, 0.0015 s instead of 2.8 s for a
series of 1,000 runs, so a tracked branch's history pages stay fast), and each change
costs ``PENALTY σ² ln n``: the BIC form for a mean shift of known variance, with the factor
chosen by simulation (benchmarks/changepoints.py, numbers in docs/reports.md): plain BIC
(2) raised a false change point in ~22% of pure-noise series of 10-50 runs; 6, with the
rules below, in 5% of 10-run series and 0.2% of 25- and 50-run ones, while it still places
a step of 3.3 σ within one run of where it is in 88% of series (5 σ: 99.8%). Segments are
at least three runs long. σ is estimated from successive differences (median absolute
deviation / √2), which a few steps do not inflate, and floored at ``SIGMA_FLOOR_PCT`` so
that a deterministic metric (instructions per op repeat to ~0.1%) does not report steps of
a few hundredths of a percent. Levels are segment medians; a cut whose levels differ by
less than 2 σ (PELT carving out an outlier) is dropped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SIGMA_FLOOR_PCT = 0.1
MIN_SEGMENT = 3
PENALTY = 6.0
MIN_STEP_SIGMAS = 2.0  # a level change smaller than this many σ is not reported


@dataclass(frozen=True)
class ChangePoint:
    index: int  # first value of the new level
    before: float  # median of the segment before
    after: float  # median of the segment after
    change_pct: float


def noise_pct(values: np.ndarray) -> float:
    """Robust σ of the values (in % of their median) from successive differences."""
    diffs = np.diff(values)
    if diffs.size == 0:
        return SIGMA_FLOOR_PCT
    mad = float(np.median(np.abs(diffs - np.median(diffs))))
    return max(1.4826 * mad / math.sqrt(2.0), SIGMA_FLOOR_PCT)


def detect(values: Sequence[float]) -> list[ChangePoint]:
    """Change points of ``values`` in order; none for fewer than two segments' worth."""
    raw = np.asarray(values, dtype=float)
    n = raw.size
    if n < 2 * MIN_SEGMENT or not np.all(np.isfinite(raw)):
        return []
    median = float(np.median(raw))
    if median == 0:
        return []
    pct = 100.0 * raw / median
    sigma = noise_pct(pct)
    import ruptures  # here, not at the top: it imports scipy.stats (0.5 s), rarely needed

    breaks = (
        ruptures.KernelCPD(kernel="linear", min_size=MIN_SEGMENT, jump=1)
        .fit(pct.reshape(-1, 1))
        .predict(pen=PENALTY * sigma**2 * math.log(n))
    )
    cuts = [int(b) for b in breaks[:-1]]
    while True:
        found = _levels(raw, cuts, n)
        # A cut between two segments of the same median level (an outlier run carved out by
        # PELT) is no change of level: drop the smallest such step and look again.
        small = [c for c in found if abs(c.change_pct) < MIN_STEP_SIGMAS * sigma]
        if not small:
            return found
        weakest = min(small, key=lambda c: abs(c.change_pct))
        cuts = [c for c in cuts if c != weakest.index]


def _levels(raw: np.ndarray, cuts: list[int], n: int) -> list[ChangePoint]:
    edges = [0, *cuts, n]
    out = []
    for start, cut, end in zip(edges, edges[1:], edges[2:], strict=False):
        before = float(np.median(raw[start:cut]))
        after = float(np.median(raw[cut:end]))
        out.append(ChangePoint(cut, before, after, 100.0 * (after / before - 1.0)))
    return out
