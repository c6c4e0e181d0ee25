"""The statistics of paired-in-time throughput and of comparisons across runs, on simulated
data shaped like this VM's (docs/methodology.md, "Noise in time"): a slow wander of the
host (autocorrelated over seconds) plus a fast white part, windows in A B B A groups.

* Windows are autocorrelated, so they are never treated as independent: a block is one
  repetition's segment (its own server processes, its own stretch of time), and the
  interval is built from block means. Simulated, that interval covers at its nominal
  rate under repeated looks, while a t interval over the windows themselves does not.
* A comparison across runs carries each run's shift (analysis/run_shift.py): without it,
  intervals built from seed-paired blocks of two runs miss the truth far more often than
  5% when runs shift by a few percent; with it, they cover.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from regtrack.analysis import stats
from regtrack.analysis.run_shift import RunShift
from regtrack.analysis.sequential import interval

ALPHA = 0.05
SIMS = 1000
BOUND = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / SIMS)
TRUE_CHANGE = math.log(0.97)  # the candidate is 3% slower
GROUPS = 6  # a segment: 3 s per server in 0.25-s windows, 2 a group
BLOCKS = 12
LOOKS = range(2, BLOCKS + 1, 2)


def segment(rng: np.random.Generator, sims: int) -> tuple[np.ndarray, np.ndarray]:
    """Log rates of A's and B's windows in one segment (sims, 2 * GROUPS each): an AR(1)
    host wander with sd 8% and a 3-s time constant, white noise 4% per window, each
    segment's server processes 1% apart at random, windows A B B A."""
    n = 4 * GROUPS
    phi = math.exp(-0.25 / 3.0)
    slow = np.empty((sims, n))
    slow[:, 0] = rng.normal(0, 0.08, sims)
    for i in range(1, n):
        slow[:, i] = phi * slow[:, i - 1] + rng.normal(0, 0.08 * math.sqrt(1 - phi * phi), sims)
    y = slow + rng.normal(0, 0.04, (sims, n))
    is_b = np.tile([False, True, True, False], GROUPS)
    y[:, is_b] += TRUE_CHANGE + rng.normal(0, 0.01, (sims, 1))
    y[:, ~is_b] += rng.normal(0, 0.01, (sims, 1))
    return y[:, ~is_b], y[:, is_b]


def block_value(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log(B's rate / A's rate) over a segment's windows (equal lengths: mean of rates)."""
    return np.log(np.exp(b).mean(axis=1)) - np.log(np.exp(a).mean(axis=1))


def test_block_means_of_autocorrelated_windows_cover_under_repeated_looks():
    rng = np.random.default_rng(11)
    segments = [segment(rng, SIMS) for _ in range(BLOCKS)]
    values = np.stack([block_value(a, b) for a, b in segments], axis=1)  # (SIMS, BLOCKS)
    truth = 100 * math.expm1(TRUE_CHANGE)
    missed = 0
    widths = []
    for row in values:
        for n in LOOKS:
            seq = interval(row[:n].tolist(), ALPHA, 2, "t-spending")
            if not seq.low_pct <= truth <= seq.high_pct:
                missed += 1
                break
        widths.append(seq.high_pct - seq.low_pct)
    assert missed / SIMS <= BOUND, f"missed at some look in {missed / SIMS:.1%}"
    # 12 blocks of 6 groups can resolve a 5% threshold: the interval fits inside ±5%.
    assert np.median(widths) < 10.0, np.median(widths)

    # Groups are not independent units: the groups of one segment share its server
    # processes (and what is left of the slow wander), so a t interval over every group,
    # as if each were a block, misses far more often than 5%.
    groups = np.concatenate(
        [
            np.log(np.exp(b).reshape(SIMS, GROUPS, 2).mean(axis=2))
            - np.log(np.exp(a).reshape(SIMS, GROUPS, 2).mean(axis=2))
            for a, b in segments
        ],
        axis=1,
    )
    half = scipy_stats.t.ppf(0.975, groups.shape[1] - 1) * groups.std(axis=1, ddof=1)
    naive_miss = np.mean(np.abs(groups.mean(axis=1) - TRUE_CHANGE) > half / math.sqrt(72))
    assert naive_miss > BOUND, f"groups as blocks missed only {naive_miss:.1%}"


def runs(rng: np.random.Generator, shift_sd: float, sims: int) -> tuple[np.ndarray, ...]:
    """Seed-paired block log values of a stored baseline run and a candidate run of the
    same code (A/A), each run shifted as a whole by N(0, shift_sd), blocks 3% noisy."""
    base = rng.normal(0, 0.03, (sims, 8)) + rng.normal(0, shift_sd, (sims, 1))
    cand = rng.normal(0, 0.03, (sims, 8)) + rng.normal(0, shift_sd, (sims, 1))
    return base, cand


def test_across_runs_the_interval_carries_each_runs_shift():
    rng = np.random.default_rng(12)
    base, cand = runs(rng, math.log(1.03), SIMS)
    shift = RunShift("throughput", 3.0, math.inf, "assumed").of_difference()
    missed_plain = missed_shifted = 0
    for b, c in zip(base, cand, strict=True):
        plain = interval((c - b).tolist(), ALPHA, method="t")
        shifted = interval((c - b).tolist(), ALPHA, method="t", shift=shift)
        missed_plain += not plain.low_pct <= 0 <= plain.high_pct
        missed_shifted += not shifted.low_pct <= 0 <= shifted.high_pct
        assert shifted.high_pct - shifted.low_pct > plain.high_pct - plain.low_pct
    assert missed_plain / SIMS > 0.3, "the problem is visible: runs' shifts are not noise"
    assert missed_shifted / SIMS <= BOUND, f"{missed_shifted / SIMS:.1%}"
    # The unpaired (Welch) interval of runs without seeds carries it too.
    welch_missed = sum(
        not (w := stats.unpaired(np.exp(b), np.exp(c), 0.95, shift)).low_pct <= 0 <= w.high_pct
        for b, c in zip(base[:300], cand[:300], strict=True)
    )
    assert welch_missed / 300 <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 300)


def test_a_shift_estimated_from_few_runs_widens_with_its_degrees_of_freedom():
    values = [0.01, -0.005, 0.002, 0.0, 0.004, -0.003]
    known = RunShift("throughput", 2.0, math.inf, "assumed").of_difference()
    thin = RunShift("throughput", 2.0, 3.0, "history").of_difference()
    a = interval(values, ALPHA, method="t", shift=known)
    b = interval(values, ALPHA, method="t", shift=thin)
    assert b.high_pct - b.low_pct > a.high_pct - a.low_pct
    assert b.estimate_pct == a.estimate_pct


def test_a_runs_shift_comes_from_runs_of_one_code_measured_alike():
    """Four runs of one commit (and two of another) whose means spread by ~2%: the shift
    is their pooled spread; fewer than 3 degrees of freedom, or another setup, is the
    default's."""
    import pandas as pd

    from regtrack.analysis import run_shift

    rows = []
    for run, (commit, shift) in enumerate(
        [("c1", 0.0), ("c1", 0.02), ("c1", -0.02), ("c1", 0.0), ("c2", 0.01), ("c2", -0.01)]
    ):
        for point in ("pipeline=10", "pipeline=30"):
            rows.append({
                "run_id": run, "metric": "throughput", "comparability": "k", "commit": commit,
                "series": commit, "source_repo": "r", "workload": "w", "point": point,
                "value": 1e5 * math.exp(shift),
            })  # fmt: skip
    history = pd.DataFrame(rows)
    got = run_shift.estimate(history, "throughput", "k")
    # ss = 3 * (0.02^2 ... ): c1 means 0, .02, -.02, 0 (ss 0.0008, df 3); c2 (ss 0.0002, df 1)
    assert got.df == 4 and got.sd_pct == pytest.approx(100 * math.expm1(math.sqrt(0.001 / 4)))
    assert got.source.startswith("history: 6 runs")
    assert run_shift.estimate(history, "throughput", "other").source.startswith("default")
    thin = history[history["run_id"].isin([0, 1, 4, 5])]
    assert run_shift.estimate(thin, "throughput", "k") == run_shift.default("throughput")
