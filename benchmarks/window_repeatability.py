#!/usr/bin/env python3
"""How far the two measured windows of one server process disagree, and in which functions.

Runs `regtrack run --metric instructions` of one version at one pipeline depth with
--repetitions N (one server process per repetition, each with its own seed) in this
process, keeping each trial's two callgrind profiles before they are merged. Prints, per
trial, the instructions per operation of each window, how far apart they are (the figure
the repeatability limit judges) and the functions whose cost per operation moved most
between the windows; then the spread over all trials and how many a given limit marks
`not repeatable`.

    benchmarks/window_repeatability.py --build-flags MALLOC=libc --repetitions 16

Asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path

from regtrack.bench.callgrind import protocol
from regtrack.cli import main as regtrack_main

LIMITS = (0.3, 0.5, 0.75, 1.0)


# One callgrind window of a trial: its operations and exclusive cost by function.
Window = tuple[int, dict[str, int]]


def capture(into: list[tuple[int, list[Window]]]) -> None:
    """Keep every trial's repetition and its windows, before they are merged."""
    counted = protocol._counted

    def keeping(ctx, record, profiles, windows):
        into.append(
            (
                record.repetition,
                [
                    (ops, {k: v.exclusive for k, v in p.by_key().items()})
                    for p, (_, _, ops) in zip(profiles, windows, strict=True)
                ],
            )
        )
        return counted(ctx, record, profiles, windows)

    protocol._counted = keeping


def run_instructions(args: argparse.Namespace, db: str, what: str = "regtrack run") -> None:
    """`regtrack run --metric instructions` of ``args.version`` in this process (its own
    tables to stderr), ``args.repetitions`` server processes; one line and exit if it
    fails."""
    argv = [
        "run", "--versions", args.version, "--source-repo", args.source_repo,
        "--metric", "instructions", "--pipelines", str(args.pipeline),
        "--instruction-requests", str(args.requests), "--keys", str(args.keys),
        "--repetitions", str(args.repetitions), "--db", db, "--no-report",
    ]  # fmt: skip
    if args.build_flags:
        argv += ["--build-flags", args.build_flags]
    try:
        with contextlib.redirect_stdout(sys.stderr):
            regtrack_main(argv)
    except SystemExit as exc:
        if exc.code:
            sys.exit(f"{what} failed (exit {exc.code})")


def describe(trial: list[Window], top: int) -> tuple[float, str]:
    (ops_a, a), (ops_b, b) = trial
    per_a, per_b = sum(a.values()) / ops_a, sum(b.values()) / ops_b
    apart = 100 * abs(per_a - per_b) / ((per_a + per_b) / 2)
    moved = sorted(
        ((a.get(k, 0) / ops_a - b.get(k, 0) / ops_b, k) for k in set(a) | set(b)),
        key=lambda item: -abs(item[0]),
    )[:top]
    names = ", ".join(f"{name} {diff:+.2f}" for diff, name in moved)
    return apart, f"{per_a:9,.1f} {per_b:9,.1f} {apart:6.3f}%   {names}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--version", default="7.0")
    parser.add_argument("--source-repo", default=str(Path.home() / ".cache/regtrack/offline-redis"))
    parser.add_argument("--build-flags", default="", help="e.g. MALLOC=libc (the tests' builds)")
    parser.add_argument("--pipeline", type=int, default=10)
    parser.add_argument("--requests", type=int, default=50_000, help="both windows together")
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--repetitions", type=int, default=16)
    parser.add_argument("--top", type=int, default=3)
    args = parser.parse_args()
    trials: list[tuple[int, list[Window]]] = []
    capture(trials)
    with tempfile.TemporaryDirectory(prefix="window-repeat-") as tmp:
        run_instructions(args, f"{tmp}/r.db")
    print(
        f"{args.version} {args.build_flags or '(default build)'}, pipeline {args.pipeline}, "
        f"{args.requests // 2:,} requests per window, {len(trials)} server processes"
    )
    print(f"{'trial':>5} {'window 1':>9} {'window 2':>9} {'apart':>7}   moved most (instr/op)")
    spread = []
    for n, (_, trial) in enumerate(trials):
        apart, line = describe(trial, args.top)
        spread.append(apart)
        print(f"{n:5d} {line}")
    spread.sort()
    median = spread[len(spread) // 2]
    print(f"apart: min {spread[0]:.3f}%, median {median:.3f}%, max {spread[-1]:.3f}%")
    for limit in LIMITS:
        over = sum(s > limit for s in spread)
        print(f"limit {limit}%: {over} of {len(spread)} trials not repeatable")


if __name__ == "__main__":
    main()
