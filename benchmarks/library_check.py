#!/usr/bin/env python3
"""Each lifecycle preset against the real library it follows, as issue 48 asks: commands per
task, real vs preset, command by command, and server CPU per task (tests/library_check.py
says how both are run alike). Repeats each check and prints every repetition's CPU figures
and their medians: the real library's own CPU per task moves 10-50% between runs.

    benchmarks/library_check.py [--repeat 3] [--small 100] [--large 1100] [LIBRARY ...]
    benchmarks/library_check.py --workload FILE LIBRARY   (a captured lifecycle, not the preset)

Asserts nothing; tests/test_lifecycle_real.py holds the presets to the command counts."""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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
            f"{'yes' if all(c.commands_ok for c in checks) else 'no'}\n",
            flush=True,
        )


if __name__ == "__main__":
    main()
