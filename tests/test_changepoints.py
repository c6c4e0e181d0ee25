"""Change points of history series: steps are found where they are, noise is not a step."""

from __future__ import annotations

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
    assert alarms / 200 < 0.08, "about 3% of pure-noise series (docs/reports.md)"


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
