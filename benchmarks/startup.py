#!/usr/bin/env python3
"""How long the command line takes to answer before it does any work: wall time of
`regtrack --version`, `regtrack --help` and `regtrack run --help` (shell completion and
every CI step pay it), median and slowest of N runs each, after one unrecorded run.

Also times `python -c "import regtrack.cli.steps"`, what a measuring command imports
before it measures (pandas, scipy.special, plotly, jinja2, redis, docker). Prints a table
(docs/testing.md quotes it); it asserts nothing (tests/test_startup.py pins the imports).

    .venv/bin/python benchmarks/startup.py [--runs 10]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REGTRACK = Path(sys.executable).parent / "regtrack"
COMMANDS = {
    "regtrack --version": [str(REGTRACK), "--version"],
    "regtrack --help": [str(REGTRACK), "--help"],
    "regtrack run --help": [str(REGTRACK), "run", "--help"],
    "import regtrack.cli.steps": [sys.executable, "-c", "import regtrack.cli.steps"],
}


def wall(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    print(f"{'command':<28} {'median s':>9} {'slowest s':>10}   ({args.runs} runs each)")
    for name, argv in COMMANDS.items():
        wall(argv)  # the file cache warm, as on a second keystroke
        times = [wall(argv) for _ in range(args.runs)]
        print(f"{name:<28} {statistics.median(times):>9.3f} {max(times):>10.3f}")


if __name__ == "__main__":
    main()
