#!/usr/bin/env python3
"""Each lifecycle preset against the real library it follows, as issue 48 asks: commands per
task, real vs preset, command by command, and server CPU per task (tests/library_check.py
says how both are run alike). Repeats each check and prints every repetition's CPU figures
and their medians: the real library's own CPU per task moves 10-50% between runs.

    benchmarks/library_check.py [--repeat 3] [--small 100] [--large 1100] [LIBRARY ...]
    benchmarks/library_check.py --workload FILE LIBRARY   (a captured lifecycle, not the preset)

Asserts nothing; tests/test_lifecycle_real.py holds the presets to the command counts. The
server CPU bound is judged on the repetitions as pairs, with an interval (paired())."""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scipy import stats

from tests import library_check
from tests.library_traffic import LIBRARIES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("libraries", nargs="*", default=list(LIBRARIES))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=1100)
    parser.add_argument("--workload", help="a lifecycle file to check instead of the preset")
    args = parser.parse_args()
    for library in args.libraries:
        checks = [
            library_check.check(library, args.small, args.large, args.workload)
            for _ in range(args.repeat)
        ]
        print(checks[0].table())
        real = [c.real_cpu_us for c in checks]
        preset = [c.preset_cpu_us for c in checks]
        print("  repetitions (server CPU us per task, real / preset): " + ", ".join(
            f"{r:.0f} / {p:.0f}" for r, p in zip(real, preset, strict=True)
        ))  # fmt: skip
        mr, mp = statistics.median(real), statistics.median(preset)
        within = abs(mp - mr) / mr <= library_check.CPU_PCT / 100
        print(
            f"  median: real {mr:.1f} us, preset {mp:.1f} us ({100 * (mp - mr) / mr:+.1f}%; "
            f"within {library_check.CPU_PCT:g}%: {'yes' if within else 'no'}); commands "
            f"within {library_check.COMMANDS_PCT:g}% per task in every repetition: "
            f"{'yes' if all(c.commands_ok for c in checks) else 'no'}",
            flush=True,
        )
        print(paired(real, preset), flush=True)


def paired(real: list[float], preset: list[float]) -> str:
    """The repetitions as pairs (each repetition runs the real library and the preset back
    to back): the mean log ratio with its 95% t interval. The medians of each side above
    can pair a fast real run with a slow preset run; the real library's own CPU per task
    moves 10-50% between runs, so only an interval says whether 15% is met."""
    logs = [math.log(p / r) for r, p in zip(real, preset, strict=True) if r > 0 and p > 0]
    if len(logs) < 2:
        return "  paired: fewer than 2 repetitions, no interval\n"
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    half = float(stats.t.ppf(0.975, len(logs) - 1)) * sd / math.sqrt(len(logs))
    lo, hi = (100.0 * math.expm1(x) for x in (mean - half, mean + half))
    bound = library_check.CPU_PCT
    held = (
        "yes"
        if -bound <= lo and hi <= bound
        else ("no" if lo > bound or hi < -bound else "undecided")
    )
    return (
        f"  paired: preset/real {100.0 * math.expm1(mean):+.1f}% [95%: {lo:+.1f}, {hi:+.1f}] over "
        f"{len(logs)} repetitions; within {bound:g}%: {held}\n"
    )


if __name__ == "__main__":
    main()
