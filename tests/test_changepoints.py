"""Change points of history series: steps are found where they are, noise is not a step."""

from __future__ import annotations

import math

import numpy as np

from regtrack.analysis import changepoints


def test_a_five_percent_step_in_noisy_throughput_is_found_where_it_is():
    rng = np.random.default_rng(7)
    values = np.r_[rng.normal(100_000, 1_500, 12), rng.normal(95_000, 1_500, 10)]
    (step,) = changepoints.detect(values.tolist())
    assert step.index == 12
    assert -7 < step.change_pct < -3
    assert step.before > step.after


def test_noise_alone_rarely_has_a_change_point():
    rng = np.random.default_rng(11)
    alarms = sum(
        bool(changepoints.detect(rng.normal(100_000, 3_000, 25).tolist())) for _ in range(200)
    )
    assert alarms / 200 < 0.02, "0.2% of pure-noise series of 25 runs (docs/reports.md)"


def test_deterministic_counts_report_real_steps_not_hundredths():
    flat = [3200.0, 3200.4, 3199.8, 3200.1, 3200.2, 3199.9, 3200.0, 3200.3]
    assert changepoints.detect(flat) == []
    stepped = [*flat, 3290.0, 3290.2, 3289.9, 3290.1]
    (step,) = changepoints.detect(stepped)
    assert step.index == len(flat) and 2.7 < step.change_pct < 2.9


def test_two_steps_and_short_series():
    assert changepoints.detect([1.0, 2.0, 3.0]) == []
    values = [100.0] * 6 + [120.0] * 6 + [100.0] * 6
    assert [c.index for c in changepoints.detect(values)] == [6, 12]
    assert changepoints.detect([100.0] * 8 + [150.0] + [100.0] * 8) == [], "one outlier"


def ar1(seed: int, n: int, phi: float = 0.5, sd: float = 3.0) -> np.ndarray:
    """Stationary AR(1) noise around 100 of marginal sd ``sd``: a machine slow for a while."""
    rng = np.random.default_rng(seed)
    shocks = rng.normal(0.0, sd * math.sqrt(1.0 - phi * phi), n)
    noise = np.empty(n)
    noise[0] = rng.normal(0.0, sd)
    for i in range(1, n):
        noise[i] = phi * noise[i - 1] + shocks[i]
    return 100.0 + noise


def test_autocorrelated_noise_is_no_step_though_it_fooled_the_independent_calibration():
    series = [ar1(seed, 200).tolist() for seed in range(20)]
    assert not any(changepoints.detect(values) for values in series)
    fooled = sum(bool(changepoints.detect(values, margin_se=None)) for values in series)
    assert fooled >= 2, "these series are hard: σ from successive differences alone fires"


def test_a_step_in_autocorrelated_noise_is_found_where_it_is():
    for seed in range(10):
        values = ar1(100 + seed, 200)
        values[120:] -= 12.0  # 4 marginal sd
        (step,) = changepoints.detect(values.tolist())
        assert abs(step.index - 120) <= 1
        assert step.after < step.before


def test_autocorrelation_is_read_from_the_noise_not_from_the_steps():
    values = ar1(3, 400)
    pct = 100.0 * values / np.median(values)
    assert 0.35 < changepoints.autocorrelation(pct, [], 0.0) < 0.65
    stepped = pct.copy()
    stepped[200:] += 20.0
    assert changepoints.autocorrelation(stepped, [], 0.0) == changepoints.PHI_MAX, "step as drift"
    assert 0.35 < changepoints.autocorrelation(stepped, [200], 0.0) < 0.65
    flat = 100.0 + np.random.default_rng(3).normal(0.0, 3.0, 400)
    assert changepoints.autocorrelation(flat, [], 0.0) < 0.1
    with_margin = changepoints.autocorrelation(flat, [], 1.0)
    assert with_margin > changepoints.autocorrelation(flat, [], 0.0), "cautious"


def test_long_run_sd_of_ar1_noise():
    assert changepoints.long_run_sd(2.0, 0.0) == 2.0
    # successive differences see σ√(1−φ); the mean of many runs sees σ√((1+φ)/(1−φ))
    assert math.isclose(changepoints.long_run_sd(math.sqrt(0.5), 0.5), math.sqrt(3.0))


def test_the_floor_is_not_inflated_for_a_deterministic_metric_with_drifting_jitter():
    values = 3200.0 * (1.0 + 0.0001 * (ar1(5, 40, phi=0.7) - 100.0))
    values[20:] *= 1.005
    (step,) = changepoints.detect(values.tolist())
    assert step.index == 20 and 0.4 < step.change_pct < 0.6
