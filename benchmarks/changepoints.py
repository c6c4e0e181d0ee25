"""How often the history pages' change-point method cries wolf, and how well it finds steps.

Simulated series (no Redis involved): pure noise of 10-50 runs, and a step of 2, 3.3 and 5
σ after 12 runs. Prints false-alarm and detection rates; docs/reports.md quotes them.

    .venv/bin/python benchmarks/changepoints.py
"""

from __future__ import annotations

import numpy as np

from regtrack.analysis import changepoints

SERIES = 400


def main() -> None:
    rng = np.random.default_rng(2026)
    for n in (10, 25, 50):
        alarms = sum(
            bool(changepoints.detect(rng.normal(100.0, 3.0, n).tolist())) for _ in range(SERIES)
        )
        print(f"noise only, {n} runs: false change point in {100 * alarms / SERIES:.1f}% of series")
    for sigmas in (2.0, 3.3, 5.0):
        near = 0
        for _ in range(SERIES):
            values = np.r_[rng.normal(100.0, 1.5, 12), rng.normal(100.0 - 1.5 * sigmas, 1.5, 10)]
            near += any(abs(c.index - 12) <= 1 for c in changepoints.detect(values.tolist()))
        print(
            f"step of {sigmas:.1f} sigma after 12 of 22 runs: found within one run in "
            f"{100 * near / SERIES:.1f}% of series"
        )


if __name__ == "__main__":
    main()
