#!/usr/bin/env python3
"""Would spending alpha evenly over the looks a gate can take decide more A/A latency gates?

A `ci` gate's p99 is one of four gating metrics (alpha 0.05 / 4) and its ten-minute budget
ends after 8 to 18 blocks on a 2-vCPU VM, with a block sd of the log p99 ratio of 0.13 to
0.24 (benchmarks/results/gate_rates_latency_stalls.jsonl). The gate spends alpha over its
looks as 1/(j (j + 1)) (analysis/sequential.py), most of it at the first looks. The most
looks a gate can take is known before it starts (--max-repetitions 30: 14 spending looks),
so alpha could instead be spread evenly over them ("planned flat"), or half and half.
For simulated normal A/A streams this prints the share of gates that decide `no change`
by the look at which the budget ends. Simulated, no Redis needed; asserts nothing.

    benchmarks/spending_budget.py [--sims 40000]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import sequential_methods as sm  # noqa: E402

from regtrack.analysis import sequential  # noqa: E402

SDS = (0.13, 0.20, 0.24)  # block sd of log(p99 ratio), as measured
BUDGET_BLOCKS = (10, 14)  # blocks when the ten-minute budget ends


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sims", type=int, default=40_000)
    parser.add_argument("--alpha", type=float, default=0.05 / 4)
    parser.add_argument("--threshold", type=float, default=35.0, help="percent")
    parser.add_argument("--max-repetitions", type=int, default=30)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    looks = list(range(2, args.max_repetitions + 1, 2))
    first = math.ceil(sequential.FIRST_SPENDING_BLOCKS / 2)
    planned = len(looks) - first + 1
    rows = {
        "1/(j(j+1)) (the gate's)": sm.spending_from(first, "kk1", args.alpha),
        f"planned flat over {planned}": sm.spending_from(first, "flat", args.alpha, planned),
        "half and half": sm.spending_from(first, "half", args.alpha, planned),
    }
    z = np.random.default_rng(args.seed).standard_normal((args.sims, args.max_repetitions))
    mean, sd = sm.t_stats(z, looks)
    print(
        f"A/A gates, alpha {args.alpha:g}, threshold {args.threshold:g}%, {args.sims} "
        f"simulated normal streams: share deciding `no change` by the budget's last look"
    )
    head = "".join(f"{f'sd {s:.2f} n<={b}':>16}" for s in SDS for b in BUDGET_BLOCKS)
    print(f"{'spending':<26}{head}")
    for name, spend in rows.items():
        radii = np.array([sequential.t_radius(n, spend(math.ceil(n / 2))) for n in looks])
        cells = ""
        for s in SDS:
            for budget in BUDGET_BLOCKS:
                k = looks.index(budget) + 1
                scenario = (0.0, s * 100 / args.threshold)
                _, share = sm.decisions(
                    mean[:, :k], sd[:, :k], radii[:k], looks[:k], scenario, args.threshold, budget
                )
                cells += f"{100 * share:15.0f}%"
        print(f"{name:<26}{cells}")


if __name__ == "__main__":
    main()
