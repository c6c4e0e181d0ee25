"""How many commits bisection by position measures, and how often it is right, at scale.

Drives the project's own search (analysis/bisection.py) over simulated histories; no Redis
involved. Two parts:

1. Exact verdicts (no noise) on 1,024 commits: one step, two sub-threshold steps, a gradual
   drift, up-down-up; commits judged and what the search names, plain and --all-steps.
2. Throughput bisection with noise: a -10% step at a random commit, each measurement of a
   commit a run of good, the commit and bad side by side (as flows/bisect.py measures a
   throughput step), every block drawing a process effect (servers restart between
   repetitions) and a trial noise per version; blocks added two at a time, intervals from
   analysis/sequential.interval (t-spending, alpha 0.05 over two candidates) until the
   commit's position against the cut is decided or the repetition cap is reached, then its
   point estimate decides. Counts exact answers, answers that are a range of at most 3
   commits holding the step, and wrong answers.

    .venv/bin/python benchmarks/bisect_scale.py [--bisections 400] [--commits 128,1024]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from regtrack.analysis import bisection, sequential
from regtrack.analysis.metrics import ALPHA

N = 1024


def _exact(values: list[float]) -> bisection.Place:
    good, span = values[0], values[-1] - values[0]

    def place(i: int, cut: float) -> bisection.Placement:
        share = (values[i] - good) / span
        return bisection.Placement(share, share >= cut)

    return place


def exact_table() -> None:
    cases = {
        "one +1.5% step": [0.0] * 400 + [1.5] * (N - 400),
        "two +0.6% steps": [0.0] * 300 + [0.6] * 400 + [1.2] * (N - 700),
        "two +0.8% steps": [0.0] * 300 + [0.8] * 400 + [1.6] * (N - 700),
        "drift 0 to +1.5%": list(np.linspace(0.0, 1.5, N)),
        "up +1%, back, up +1.5%": [0.0] * 300 + [1.0] * 300 + [0.0] * 200 + [1.5] * (N - 800),
    }
    print(f"Exact verdicts, {N} commits (commits judged besides the ends; what is named)")
    for name, values in cases.items():
        for every in (False, True):
            search = bisection.locate(N, _exact(values), every)
            named = ", ".join(
                f"{f.kind} {f.last_good}->{f.first_bad} ({100 * f.jump:+.0f}% of the change)"
                for f in search.found
            )
            mode = "--all-steps" if every else "plain"
            print(f"  {name:<24} {mode:<11} {search.judged:>3} judged: {named}")


class _NoisyStep:
    """One simulated throughput bisection: a -10% step at ``step`` (first bad commit)."""

    def __init__(self, n: int, step: int, rng: np.random.Generator, args: argparse.Namespace):
        self.n, self.step, self.rng, self.args = n, step, rng, args
        self.level = np.where(np.arange(n) >= step, math.log(1 - args.step / 100), 0.0)
        self.blocks: dict[int, list[tuple[float, float, float]]] = {}
        self.runs = 0
        self.alpha = ALPHA / 2  # two candidates in a step's run: the commit and bad

    def _block(self, i: int) -> tuple[float, float, float]:
        noise = math.hypot(self.args.trial_noise, self.args.process_noise) / 100
        good, x, bad = (self.level[j] + self.rng.normal(0, noise) for j in (0, i, self.n - 1))
        return good, x, bad

    def _changes(self, i: int) -> tuple[bisection.Change, bisection.Change] | None:
        blocks = self.blocks[i]
        out = []
        for k in (0, 2):  # the commit against good, then against bad
            diffs = [b[1] - b[k] for b in blocks]
            got = sequential.interval(diffs, self.alpha, look=sequential.Look(len(blocks) // 2))
            if got is None:
                return None
            out.append(got)
        return out[0], out[1]

    def place(self, i: int, cut: float) -> bisection.Placement:
        """As flows/bisect.py places: a commit is measured once, until its position at the
        cut asked first is decided or the cap is reached; later cuts reuse its blocks."""
        if i in self.blocks:
            changes = self._changes(i)
            assert changes is not None
            return bisection.placement(*changes, cut, -self.args.step)
        self.blocks[i], self.runs = [], self.runs + 1
        while True:
            changes = self._changes(i) if len(self.blocks[i]) >= 2 else None
            if changes is not None:
                placed = bisection.placement(*changes, cut, -self.args.step)
                if placed.decided or len(self.blocks[i]) >= self.args.cap:
                    return placed
            self.blocks[i] += [self._block(i), self._block(i)]


def noisy_table(args: argparse.Namespace) -> None:
    rng = np.random.default_rng(args.seed)
    print(
        f"\nThroughput, a -{args.step:g}% step, block noise {args.trial_noise:g}% trial + "
        f"{args.process_noise:g}% process per version, at most {args.cap} repetitions per "
        f"commit, {args.bisections} bisections per row"
    )
    print(
        "  commits  exact  range<=3  wrong  more than one change named"
        "  commits measured (mean, max)  blocks per commit (mean)  placed by estimate"
    )
    for n in args.commits:
        exact = near = wrong = extra = estimated = placed = 0
        measured, blocks = [], []
        for _ in range(args.bisections):
            sim = _NoisyStep(n, int(rng.integers(1, n)), rng, args)
            search = bisection.locate(n, sim.place)
            found = max(search.found, key=lambda f: abs(f.jump))
            if (found.last_good, found.first_bad) == (sim.step - 1, sim.step):
                exact += 1
            elif found.last_good < sim.step <= found.first_bad <= found.last_good + 3:
                near += 1
            else:
                wrong += 1
            extra += len(search.found) > 1
            estimated, placed = estimated + len(search.by_estimate), placed + sim.runs
            measured.append(sim.runs)
            blocks.append(np.mean([len(b) for b in sim.blocks.values()]))
        b = args.bisections
        print(
            f"  {n:>7}  {100 * exact / b:4.1f}%  {100 * near / b:7.1f}%  {100 * wrong / b:4.1f}%"
            f"  {100 * extra / b:25.1f}%  {np.mean(measured):13.1f}, {max(measured):>3}"
            f"  {np.mean(blocks):25.1f}  {100 * estimated / placed:17.1f}%"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bisections", type=int, default=400)
    parser.add_argument("--commits", type=lambda s: [int(x) for x in s.split(",")],
                        default=[128, 1024])  # fmt: skip
    parser.add_argument("--step", type=float, default=10.0, help="percent slower")
    parser.add_argument("--trial-noise", type=float, default=3.0)
    parser.add_argument("--process-noise", type=float, default=3.0)
    parser.add_argument("--cap", type=int, default=16, help="repetitions per commit")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    exact_table()
    noisy_table(args)


if __name__ == "__main__":
    main()
