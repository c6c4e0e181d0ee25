"""How often the history pages' change-point method cries wolf, and how well it finds steps.

Simulated series (no Redis involved), values around 100 with noise of scale 3:
independent normal, AR(1) with φ = 0.5 (a machine slow for a while: run-to-run noise that
persists) and Student t with 3 degrees of freedom (heavy tails). First a comparison of the
candidate methods of issue 29 on the same series: the share of pure-noise series with a
false change point, and the share of series with a 3 σ step where a change point is found
within one run of it. In AR(1) noise σ is either the marginal sd (what one sees in a
history chart) or the innovation sd (each run's fresh noise, √(1−φ²) of the marginal).
Then the chosen method's rows on the original design: pure noise of 10-50 runs and steps
of 2, 3.3 and 5 σ after 12 of 22 runs. docs/reports.md quotes the output.

    .venv/bin/python benchmarks/changepoints.py [--others]

``--others`` adds E-Divisive means (signal-processing-algorithms) and Apache Otava when
they are importable; they are not regtrack's dependencies, so install them in a separate
virtualenv to compare (their rows use fewer series: they are 50-100 times slower).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np

from regtrack.analysis import changepoints

SERIES = 1000  # per cell of the comparison (±0.6 points at 1%)
SERIES_OTHERS = 200
SERIES_ROWS = 400  # per row of the original design
SCALE = 3.0
PHI = 0.5

Detector = Callable[[Sequence[float]], list[int]]


def iid(rng: np.random.Generator, n: int) -> np.ndarray:
    return 100.0 + rng.normal(0.0, SCALE, n)


def ar1(rng: np.random.Generator, n: int) -> np.ndarray:
    """Stationary AR(1) noise of marginal sd SCALE."""
    shocks = rng.normal(0.0, SCALE * math.sqrt(1.0 - PHI**2), n)
    noise = np.empty(n)
    noise[0] = rng.normal(0.0, SCALE)
    for i in range(1, n):
        noise[i] = PHI * noise[i - 1] + shocks[i]
    return 100.0 + noise


def heavy(rng: np.random.Generator, n: int) -> np.ndarray:
    return 100.0 + SCALE * rng.standard_t(3, n)


INNOVATION = SCALE * math.sqrt(1.0 - PHI**2)
# (heading, noise, runs, step at, step size): step size 0 is a false-alarm column
COLUMNS = [
    ("iid 50", iid, 50, 0, 0.0),
    ("iid 200", iid, 200, 0, 0.0),
    ("AR 50", ar1, 50, 0, 0.0),
    ("AR 200", ar1, 200, 0, 0.0),
    ("t3 50", heavy, 50, 0, 0.0),
    ("3σ iid 50", iid, 50, 25, 3 * SCALE),
    ("3σm AR 50", ar1, 50, 25, 3 * SCALE),
    ("3σm AR 200", ar1, 200, 100, 3 * SCALE),
    ("3σi AR 200", ar1, 200, 100, 3 * INNOVATION),
]


def simulated(seed: int, series: int) -> list[tuple[np.ndarray, int]]:
    """Each column's series (and where its step is), the same for every method."""
    out = []
    for column, (_, noise, n, at, size) in enumerate(COLUMNS):
        rng = np.random.default_rng([seed, column])
        batch = []
        for _ in range(series):
            values = noise(rng, n)
            values[at:] -= size
            batch.append((values, at))
        out.append(batch)
    return out


def score(detector: Detector, columns: list[list[tuple[np.ndarray, int]]]) -> list[float]:
    """Per column: % of series with a false change point, or with the step found (±1 run)."""
    out = []
    for (_, _, _, _, size), batch in zip(COLUMNS, columns, strict=True):
        hits = 0
        for values, at in batch:
            cuts = detector(values.tolist())
            hits += any(abs(c - at) <= 1 for c in cuts) if size else bool(cuts)
        out.append(100.0 * hits / len(batch))
    return out


def regtrack(margin_se: float | None) -> Detector:
    return lambda values: [c.index for c in changepoints.detect(values, margin_se=margin_se)]


def candidates() -> dict[str, Detector]:
    return {
        "PELT, iid σ (before)": regtrack(None),
        "PELT, AR(1) σ, φ": regtrack(0.0),
        "PELT, AR(1) σ, φ+0.5se": regtrack(0.5),
        "PELT, AR(1) σ, φ+1se (chosen)": regtrack(1.0),
    }


def others() -> dict[str, Detector]:
    """The field-proven alternatives, where installed (not regtrack dependencies)."""
    out: dict[str, Detector] = {}
    try:
        from signal_processing_algorithms.energy_statistics import energy_statistics
    except ImportError:
        print("(signal_processing_algorithms.energy_statistics not importable: no E-Divisive row)")
    else:
        out["E-Divisive p.05, 100 perm."] = lambda v: sorted(
            energy_statistics.e_divisive(np.asarray(v), pvalue=0.05, permutations=100)
        )
    try:
        from otava.analysis import compute_change_points
    except ImportError:
        print("(otava not importable: no Otava row)")
    else:
        out["Otava, window 50, p .001"] = lambda v: sorted(
            p.index for p in compute_change_points(np.asarray(v), 50, 0.001)[0]
        )
    return out


def scan(values: np.ndarray) -> tuple[float, int]:
    """The best single split of a series: its likelihood-ratio statistic (σ = 1) and where."""
    n = values.size
    k = np.arange(1, n)
    centred = np.cumsum(values)[:-1] - k / n * values.sum()
    stat = (centred**2 / (k * (n - k) / n))[
        changepoints.MIN_SEGMENT - 1 : n - changepoints.MIN_SEGMENT
    ]
    best = int(stat.argmax())
    return float(stat[best]), best + changepoints.MIN_SEGMENT


def oracle_cells(columns: list[list[tuple[np.ndarray, int]]]) -> list[float]:
    """A bound no detector can beat: one that knows the noise exactly (its kind, φ and σ).

    Per column, the best single split's statistic is compared with its 99th percentile on
    pure noise of the same kind and length (1,000 simulated series), so it raises a false
    change point in 1% of noise by construction; what it finds of the steps is the most
    that a 1% detector can find, with nothing estimated from the series itself.
    """
    out = []
    for column, ((_, noise, n, _, size), batch) in enumerate(zip(COLUMNS, columns, strict=True)):
        rng = np.random.default_rng([7, column])
        null = [scan(noise(rng, n))[0] for _ in range(SERIES)]
        threshold = float(np.quantile(null, 0.99))
        hits = 0
        for values, at in batch:
            stat, cut = scan(values)
            hits += (stat > threshold and abs(cut - at) <= 1) if size else stat > threshold
        out.append(100.0 * hits / len(batch))
    return out


def comparison(with_others: bool) -> None:
    width = 32
    print(f"{'% of series':{width}}" + "".join(f"{c[0]:>12}" for c in COLUMNS))
    print(f"{'':{width}}" + "".join(f"{'false' if c[4] == 0 else 'found':>12}" for c in COLUMNS))
    rows = [(SERIES, candidates())]
    if with_others:
        np.random.seed(2026)  # E-Divisive permutes with numpy's global generator
        rows.append((SERIES_OTHERS, others()))
    for series, methods in rows:
        columns = simulated(2026, series)
        for name, detector in methods.items():
            cells = score(detector, columns)
            label = name if series == SERIES else f"{name} ({series})"
            print(f"{label:{width}}" + "".join(f"{c:12.1f}" for c in cells))
        if series == SERIES:
            label = "oracle: noise known, 1% false"
            print(f"{label:{width}}" + "".join(f"{c:12.1f}" for c in oracle_cells(columns)))


def final_rows() -> None:
    """The chosen method on the original design (issue 29 keeps reporting it)."""
    rng = np.random.default_rng(2026)
    for n in (10, 25, 50):
        alarms = sum(
            bool(changepoints.detect(rng.normal(100.0, 3.0, n).tolist()))
            for _ in range(SERIES_ROWS)
        )
        print(
            f"noise only, {n} runs: false change point in {100 * alarms / SERIES_ROWS:.1f}% "
            "of series"
        )
    for sigmas in (2.0, 3.3, 5.0):
        near = 0
        for _ in range(SERIES_ROWS):
            values = np.r_[rng.normal(100.0, 1.5, 12), rng.normal(100.0 - 1.5 * sigmas, 1.5, 10)]
            near += any(abs(c.index - 12) <= 1 for c in changepoints.detect(values.tolist()))
        print(
            f"step of {sigmas:.1f} sigma after 12 of 22 runs: found within one run in "
            f"{100 * near / SERIES_ROWS:.1f}% of series"
        )


def speed() -> None:
    """The history pages call detect once per series: a 1,000-run series must stay fast."""
    rng = np.random.default_rng(1)
    values = ar1(rng, 1000)
    values[500:] -= 3 * SCALE
    changepoints.detect(values.tolist())  # imports ruptures
    start = time.perf_counter()
    for _ in range(20):
        changepoints.detect(values.tolist())
    print(
        f"detect on 1,000 runs of AR(1) noise: {(time.perf_counter() - start) / 20 * 1000:.1f} ms"
    )


def main() -> None:
    comparison("--others" in sys.argv[1:])
    print()
    final_rows()
    speed()


if __name__ == "__main__":
    main()
