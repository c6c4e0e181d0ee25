"""Changes with confidence intervals, and the verdict they support.

Changes are ratios (candidate / baseline - 1), estimated on the log scale where ratios
are symmetric. Two estimators, chosen by how the trials were taken:

* paired: trials of baseline and candidate from the same repetition of one interleaved
  run were measured minutes apart at most, so slow drift of the machine hits both; the
  interval is a Student t interval of the mean of per-repetition log ratios.
* unpaired: a candidate measured against a stored baseline run (different time); a Welch
  t interval of the difference of mean logs.

docs/methodology.md has the A/A and injected-slowdown measurements that chose these over
a bootstrap of medians, and the default thresholds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# scipy.special's quantile functions are what scipy.stats' distributions call, without
# importing scipy.stats (0.6 s against 0.2 s here, paid by every command that compares).
from scipy.special import stdtrit

from regtrack.analysis.interval import Change

CONFIDENCE = 0.95
MAX_EXTRA_REPETITIONS = 50


def _pct(log_ratio: float) -> float:
    return 100.0 * (math.exp(log_ratio) - 1.0)


def _logs(values: Sequence[float]) -> list[float]:
    return [math.log(v) for v in values if v and v > 0]


def paired(
    baseline: Sequence[float], candidate: Sequence[float], confidence: float = CONFIDENCE
) -> Change | None:
    """Change from pairs (baseline[i], candidate[i]) measured side by side."""
    pairs = [(b, c) for b, c in zip(baseline, candidate, strict=True) if b > 0 and c > 0]
    n = len(pairs)
    if n < 2:
        return None
    diffs = [math.log(c) - math.log(b) for b, c in pairs]
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    half = stdtrit(n - 1, 0.5 + confidence / 2) * sd / math.sqrt(n)
    return Change(_pct(mean), _pct(mean - half), _pct(mean + half), n, "paired-t")


def unpaired(
    baseline: Sequence[float],
    candidate: Sequence[float],
    confidence: float = CONFIDENCE,
    shift: tuple[float, float] | None = None,
) -> Change | None:
    """Change of the geometric means of two independent samples (Welch t interval);
    ``shift``: (variance, degrees of freedom) of the two runs' shifts, added to the
    mean's variance with Satterthwaite's degrees of freedom."""
    lb, lc = _logs(baseline), _logs(candidate)
    if len(lb) < 2 or len(lc) < 2:
        return None
    mb, mc = sum(lb) / len(lb), sum(lc) / len(lc)
    vb = sum((x - mb) ** 2 for x in lb) / (len(lb) - 1) / len(lb)
    vc = sum((x - mc) ** 2 for x in lc) / (len(lc) - 1) / len(lc)
    vs, dfs = shift if shift else (0.0, math.inf)
    se = math.sqrt(vb + vc + vs)
    if se == 0:
        df = float(len(lb) + len(lc) - 2)
    else:
        denominator = (
            (vb**2 / (len(lb) - 1) if vb else 0.0)
            + (vc**2 / (len(lc) - 1) if vc else 0.0)
            + (vs**2 / dfs if vs and math.isfinite(dfs) else 0.0)
        )
        df = (vb + vc + vs) ** 2 / denominator if denominator > 0 else 1e6
    half = stdtrit(df, 0.5 + confidence / 2) * se
    diff = mc - mb
    return Change(
        _pct(diff), _pct(diff - half), _pct(diff + half), min(len(lb), len(lc)), "welch-t"
    )


def bootstrap_medians(
    baseline: Sequence[float],
    candidate: Sequence[float],
    confidence: float = CONFIDENCE,
    resamples: int = 2000,
    seed: int = 0,
) -> Change | None:
    """Percentile bootstrap of the ratio of medians (kept for the method comparison)."""
    import random
    import statistics

    b, c = [v for v in baseline if v > 0], [v for v in candidate if v > 0]
    if len(b) < 2 or len(c) < 2:
        return None
    rng = random.Random(seed)
    ratios = sorted(
        statistics.median(rng.choices(c, k=len(c))) / statistics.median(rng.choices(b, k=len(b)))
        for _ in range(resamples)
    )
    lo = ratios[int((1 - confidence) / 2 * resamples)]
    hi = ratios[min(resamples - 1, int((1 + confidence) / 2 * resamples))]
    est = statistics.median(c) / statistics.median(b)
    return Change(100 * (est - 1), 100 * (lo - 1), 100 * (hi - 1), min(len(b), len(c)), "bootstrap")


def verdict(change: Change | None, threshold_pct: float, higher_is_better: bool) -> str:
    """regression / improvement / no change / inconclusive, as docs/methodology.md defines.

    ``worse`` is the direction that hurts: down for throughput, up for latency and
    instructions per op. The rules only need an interval that covers the truth, so a
    sequential interval (analysis/sequential.py), which covers it at every look at once,
    lets the gate stop at the first decided look.
    """
    if change is None:
        return "inconclusive"
    sign = 1.0 if higher_is_better else -1.0
    # In "goodness" terms: positive is better for every metric.
    est, lo, hi = (
        sign * change.estimate_pct,
        *sorted((sign * change.low_pct, sign * change.high_pct)),
    )
    if hi < 0 and est < -threshold_pct:
        return "regression"
    if lo > 0 and est > threshold_pct:
        return "improvement"
    if -threshold_pct <= lo and hi <= threshold_pct:
        return "no change"
    return "inconclusive"


def extra_repetitions(change: Change | None, threshold_pct: float) -> int | None:
    """About how many more repetitions would shrink the interval enough to decide.

    The interval's half-width falls like 1/sqrt(n). To decide, it must either clear zero
    (when the estimate is beyond the threshold) or fit inside the threshold band (when it
    is not). None when no number of repetitions is likely to decide it (the estimate sits
    on the threshold) or when there is nothing to extrapolate from.
    """
    if change is None or change.n < 2 or not math.isfinite(change.high_pct - change.low_pct):
        return None
    half = (change.high_pct - change.low_pct) / 2
    est = abs(change.estimate_pct)
    room = est if est > threshold_pct else threshold_pct - est
    if half <= 0 or room <= 0.05 * threshold_pct:
        return None
    scale = half / room
    if scale > math.sqrt((MAX_EXTRA_REPETITIONS + change.n) / change.n):
        return None  # more than MAX_EXTRA_REPETITIONS (checked before squaring: a crafted
        # trial's interval, 1e160 wide, would overflow the square)
    return max(1, math.ceil(change.n * scale**2) - change.n)
