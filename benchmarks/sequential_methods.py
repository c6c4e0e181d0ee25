#!/usr/bin/env python3
"""Which sequential interval should the CI gate use? Simulated, no Redis needed.

The gate looks after every ``--look-every`` blocks. For each candidate interval this prints:

  n=2 ... n=24    half-width at n blocks, in units of the sample sd (inf: unbounded)
  miss@B          share of simulated normal streams whose interval EVER excluded the true
                  mean at a look up to ``--blocks`` blocks (must stay <= alpha)
  A/A s=..        mean blocks until the gate decides (and share decided within the budget
  -10% s=..       of ``--blocks``), threshold ``--threshold``%, for an A/A stream and a
                  10% slowdown, block sd = s * threshold

Candidates: the t-mixture confidence sequence (Wang & Ramdas 2023, after Lai 1976) with a
few prior precisions c; Bonferroni spending of alpha over looks with exact t intervals,
alpha_k = alpha 6 / (pi^2 k^2) or alpha / (k (k + 1)), counted from the first look
("k") or from the first look with 3 blocks ("j"); planned spending, alpha spread evenly
over the looks up to ``--blocks`` (the most a gate can take is its --max-repetitions),
alone or half and half with 1/(j (j + 1)); the naive fixed-n t interval at every
look (invalid, for scale); and, for reference only, exact group-sequential boundaries
calibrated by simulation for looks up to ``--blocks`` (valid only for exactly that look
schedule and budget; not offered). Prints a table to quote in regtrack/analysis/sequential.py;
asserts nothing.

    benchmarks/sequential_methods.py --sims 100000
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from regtrack.analysis import sequential  # noqa: E402

SHOWN_N = (2, 4, 6, 8, 12, 16, 24)
Radius = Callable[[int], float]


def spending_from(
    first_k: int, shape: str, alpha: float, planned: int = 0
) -> Callable[[int], float]:
    """alpha_k for looks k >= first_k (j = k - first_k + 1), summing to alpha ("flat" and
    "half": over the ``planned`` looks a gate can take)."""

    def spend(k: int) -> float:
        j = k - first_k + 1
        if j < 1:
            return 0.0
        if shape == "pi2":
            return alpha * 6 / (math.pi**2 * j**2)
        flat = alpha / planned if 1 <= j <= planned else 0.0
        if shape == "flat":  # alpha / J at each of the J planned looks, none beyond
            return flat
        if shape == "half":  # half as 1/(j(j+1)), half flat
            return (alpha / (j * (j + 1)) + flat) / 2
        return alpha / (j * (j + 1))

    return spend


def methods(alpha: float, look_every: int, blocks: int) -> dict[str, Radius]:
    found: dict[str, Radius] = {}
    for c in (0.1, 0.25, 0.5, 1.0, 2.0):
        found[f"t-mixture c={c:g}"] = lambda n, c=c: sequential.lai_radius(n, alpha, c)
    first_j = math.ceil(sequential.FIRST_SPENDING_BLOCKS / look_every)
    for label, first_k in (("k", 1), ("j", first_j)):
        for shape, name in (("pi2", "6/(pi^2 {0}^2)"), ("kk1", "1/({0}({0}+1))")):
            spend = spending_from(first_k, shape, alpha)
            found[f"spend {name.format(label)}"] = lambda n, s=spend: sequential.t_radius(
                n, s(math.ceil(n / look_every))
            )
    # Planned: the most looks a gate can take is known (its --max-repetitions, or the looks
    # its time budget holds), so alpha can be spread evenly over them instead of decaying.
    planned = len(range(first_j, blocks // look_every + 1))
    for shape, name in (
        ("flat", f"planned flat over {planned}"),
        ("half", "half 1/(j(j+1)), half flat"),
    ):
        spend = spending_from(first_j, shape, alpha, planned)
        found[name] = lambda n, s=spend: sequential.t_radius(n, s(math.ceil(n / look_every)))
    found["fixed-n t (naive)"] = lambda n: sequential.t_radius(n, alpha)
    return found


def t_stats(z: np.ndarray, looks: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sample sd of the first n columns, for each n in looks: (sims, looks)."""
    cs, cs2 = np.cumsum(z, axis=1), np.cumsum(z * z, axis=1)
    idx = np.array(looks) - 1
    n = np.array(looks, dtype=float)
    mean = cs[:, idx] / n
    var = np.maximum(cs2[:, idx] - n * mean**2, 0.0) / (n - 1)
    return mean, np.sqrt(var)


def gs_boundaries(z: np.ndarray, looks: list[int], spend: Callable[[int], float]) -> list[float]:
    """Exact (simulated) group-sequential boundaries for |mean| / sd at each look."""
    mean, sd = t_stats(z, looks)
    ratio = np.abs(mean) / np.where(sd > 0, sd, np.inf)
    alive = np.ones(len(z), dtype=bool)
    bounds = []
    for i in range(len(looks)):
        target = round(spend(i + 1) * len(z))
        if target <= 0:
            bounds.append(math.inf)
            continue
        candidates = np.sort(ratio[alive, i])[::-1]
        bound = float(candidates[target]) if target < len(candidates) else 0.0
        bounds.append(bound)
        alive &= ratio[:, i] <= bound
    return bounds


def decisions(
    mean: np.ndarray,
    sd: np.ndarray,
    radii: np.ndarray,
    looks: list[int],
    scenario: tuple[float, float],
    threshold: float,
    budget: int,
) -> tuple[float, float]:
    """(mean blocks to a decision, share decided) for block values N(log(1 + effect), sd),
    with ``scenario`` = (effect %, sd in thresholds) and stats.verdict's rules."""
    effect_pct, sd_thresholds = scenario
    sd_log = sd_thresholds * threshold / 100
    est = math.log1p(effect_pct / 100) + sd_log * mean
    with np.errstate(invalid="ignore"):
        half = np.where(np.isinf(radii), np.inf, radii * sd_log * sd)
    e, lo, hi = (100 * np.expm1(np.minimum(x, 50)) for x in (est, est - half, est + half))
    decided = ((hi < 0) & (e < -threshold)) | ((lo > 0) & (e > threshold))
    decided |= (lo >= -threshold) & (hi <= threshold)
    first = np.where(decided.any(axis=1), decided.argmax(axis=1), -1)
    blocks = np.where(first >= 0, np.array(looks)[first], budget)
    return float(blocks.mean()), float((first >= 0).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--sims", type=int, default=100_000)
    parser.add_argument("--blocks", type=int, default=30, help="budget: most blocks a gate takes")
    parser.add_argument("--look-every", type=int, default=2)
    parser.add_argument("--threshold", type=float, default=5.0, help="percent")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--effect", type=float, default=-10.0, help="the true change, percent")
    parser.add_argument("--sds", default="0.4,0.8", help="block sds, in thresholds")
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    looks = [n for n in range(args.look_every, args.blocks + 1, args.look_every) if n >= 2]
    table = methods(args.alpha, args.look_every, args.blocks)

    # Reference: exact boundaries for this look schedule, calibrated on separate streams.
    first_j = math.ceil(sequential.FIRST_SPENDING_BLOCKS / args.look_every)
    spend = spending_from(first_j, "kk1", args.alpha)
    calibration = rng.standard_normal((args.sims, args.blocks))
    gs = dict(zip(looks, gs_boundaries(calibration, looks, spend), strict=True))
    del calibration
    table["gs-sim 1/(j(j+1)) (ref.)"] = lambda n: gs.get(n, math.inf)

    z = rng.standard_normal((args.sims, args.blocks))
    mean, sd = t_stats(z, looks)
    radii = {name: np.array([radius_of(n) for n in looks]) for name, radius_of in table.items()}
    print(
        f"alpha={args.alpha}, {args.sims} simulated normal streams, a look every "
        f"{args.look_every} blocks up to {args.blocks}, seed {args.seed}"
    )
    print()
    shown = [n for n in SHOWN_N if n <= args.blocks]
    print(f"{'half-width / sd':<26}" + "".join(f"{f'n={n}':>6}" for n in shown), end="")
    print(f"{f'miss@{args.blocks}':>9}")
    for name, radius_of in table.items():
        with np.errstate(invalid="ignore"):
            miss = (np.abs(mean) > radii[name] * sd).any(axis=1).mean()
        cells = "".join(f"{radius_of(n):6.2f}" for n in shown)
        print(f"{name:<26}{cells}{miss:9.4f}")
    print()
    sds = [float(x) for x in args.sds.split(",")]
    scenarios = [(effect, s) for s in sds for effect in (0.0, args.effect)]
    print(f"blocks to decide, {args.threshold:g}% threshold (share decided by {args.blocks})")
    head = "".join(
        f"{('A/A' if effect == 0 else f'{effect:+g}%') + f' sd={s:g}t':>13}"
        for effect, s in scenarios
    )
    print(f"{'':<26}{head}")
    for name in table:
        cells = ""
        for scenario in scenarios:
            blocks, share = decisions(
                mean, sd, radii[name], looks, scenario, args.threshold, args.blocks
            )
            cells += f"{blocks:7.1f} {100 * share:4.0f}%"
        print(f"{name:<26}{cells}")


if __name__ == "__main__":
    main()
