#!/usr/bin/env python3
"""What sharding a CI gate over H hosts buys in wall time. Simulated, no Redis needed.

One host runs the gate as `regtrack ci` does: blocks of two repetitions (A B, B A), a look
after each pair, until the pooled answer is decided or the 10-minute budget is spent. H
hosts run it as `regtrack ci --shard K/H` with a fixed number of repetitions, each host
measuring P pairs of blocks at the same time, then `regtrack ci --merge` looks once (a
merged run's first look: the t-spending interval of regtrack.analysis.sequential at its
first look) and decides, or says it could not. Each host's blocks carry that host's own
offset (``--host-sd``: a change that shows more on one CPU than another), and the interval
takes hosts as a level of the model, exactly as a merged run's analysis does
(sequential.interval(..., hosts=...)).

The two scenarios are the two gating metrics at their gate thresholds, with block sds
measured on this 2-core VM (docs/methodology.md, benchmarks/results/gate_rates.jsonl):
throughput guard 20% with blocks spreading ~15% (a shared VM), and instructions per op
1% with seed-matched blocks spreading ~0.15%. A pair of blocks takes ``--pair-seconds``
(a default `ci` repetition of two versions, both metrics: ~55 s here, so ~110 s a pair);
the merge adds ``--merge-overhead`` (artifact upload and download, merge). Prints, per
scenario and design, the mean and 90th percentile wall time and the verdicts for an A/A
stream and a true change of twice the threshold; asserts nothing.

    .venv/bin/python benchmarks/scale_out.py --sims 20000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from regtrack.analysis import sequential, stats  # noqa: E402

SCENARIOS = {
    # name: (gate threshold %, block sd %, higher is better)
    "throughput guard": (20.0, 15.0, True),
    "instructions per op": (1.0, 0.15, False),
}


def gate(
    values: np.ndarray,
    hosts: int,
    per_host: int,
    max_rounds: int,
    threshold: float,
    alpha: float,
    higher_is_better: bool,
) -> tuple[int, str]:
    """(rounds used, verdict) of one simulated gate on a stream of block values (log
    ratios; each round, host h measured ``per_host`` blocks), decided as regtrack does."""
    per_round = per_host * hosts
    labels = [f"h{(i % per_round) // per_host}" for i in range(per_round * max_rounds)]
    verdict = "inconclusive"
    for k in range(1, max_rounds + 1):
        n = k * per_round
        seq = sequential.interval(
            values[:n].tolist(),
            alpha,
            look=sequential.Look(k, per_round),
            hosts=labels[:n] if hosts > 1 else None,
        )
        verdict = stats.verdict(seq, threshold, higher_is_better)
        if verdict != "inconclusive":
            return k, verdict
    return max_rounds, verdict


def simulate(
    rng: np.random.Generator,
    args: argparse.Namespace,
    scenario: tuple[float, float, bool],
    hosts: int,
    pairs: int,
    rounds: int,
    truth: float,
) -> tuple[list[int], dict[str, int]]:
    """Rounds used and verdict counts of ``args.sims`` gates: ``hosts`` hosts measuring
    ``pairs`` pairs of blocks each per round, a look after each round, at most ``rounds``."""
    threshold, block_sd, higher = scenario
    used, verdicts = [], {}
    per_round = 2 * pairs * hosts
    host_of = (np.arange(per_round * rounds) % per_round) // (2 * pairs)
    for _ in range(args.sims):
        offsets = rng.normal(0.0, args.host_sd * block_sd, size=hosts)
        pct = truth + offsets[host_of] + rng.normal(0.0, block_sd, host_of.size)
        values = np.log1p(np.clip(pct, -99.0, None) / 100.0)
        k, verdict = gate(values, hosts, 2 * pairs, rounds, threshold, args.alpha, higher)
        used.append(k)
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
    return used, verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sims", type=int, default=20000)
    parser.add_argument("--hosts", default="2,4,8")
    parser.add_argument("--host-sd", type=float, default=0.25, help="host offset, x block sd")
    parser.add_argument("--pair-seconds", type=float, default=110.0)
    parser.add_argument("--merge-overhead", type=float, default=60.0)
    parser.add_argument("--budget-minutes", type=float, default=10.0)
    parser.add_argument("--alpha", type=float, default=0.025, help="per gating metric")
    args = parser.parse_args()
    rng = np.random.default_rng(20261201)
    print(
        f"a pair of blocks {args.pair_seconds:.0f} s per host, {args.merge_overhead:.0f} s "
        f"to merge, one host's budget {args.budget_minutes:.0f} min, host offsets sd "
        f"{args.host_sd} x block sd, alpha {args.alpha} per metric, {args.sims} gates each"
    )
    budget_pairs = max(1, int(args.budget_minutes * 60 // args.pair_seconds))
    designs = [("1 host, sequential", 1, 1, budget_pairs, 0.0)]
    for hosts in (int(h) for h in args.hosts.split(",")):
        for pairs in (1, 2):
            # P pairs per host = P blocks of two on every host, one look after the merge:
            # the same statistics as P rounds of one pair, looked at only once.
            name = f"{hosts} hosts x {pairs} pair{'s' if pairs > 1 else ''}, one merge"
            designs.append((name, hosts, pairs, 1, args.merge_overhead))
    for title, scenario in SCENARIOS.items():
        threshold, block_sd, higher = scenario
        print(f"{title}: threshold {threshold:g}%, block sd {block_sd:g}%")
        sign = -1.0 if higher else 1.0  # a regression: slower, or more instructions
        for name, hosts, pairs, looks, overhead in designs:
            line = [f"  {name}:"]
            for label, truth in (("A/A", 0.0), ("2x threshold", sign * 2 * threshold)):
                if looks > 1:
                    used, verdicts = simulate(rng, args, scenario, hosts, 1, looks, truth)
                    wall = np.asarray(used) * args.pair_seconds / 60.0
                else:
                    used, verdicts = simulate(rng, args, scenario, hosts, pairs, 1, truth)
                    wall = np.full(len(used), (pairs * args.pair_seconds + overhead) / 60.0)
                shares = ", ".join(
                    f"{v} {100.0 * c / args.sims:.1f}%" for v, c in sorted(verdicts.items())
                )
                line.append(
                    f"    {label}: wall mean {wall.mean():.1f} min, p90 "
                    f"{np.percentile(wall, 90):.1f} min; {shares}"
                )
            print("\n".join(line))


if __name__ == "__main__":
    main()
