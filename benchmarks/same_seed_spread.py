#!/usr/bin/env python3
"""How far apart two server processes with the same seed count, and in which functions.

Runs `regtrack run --metric instructions` of one version --processes times in this
process, every run with seed offset 0, so repetition r of every run starts its server with
the same seed; keeps each trial's two callgrind windows. Prints, per seed, each process's
instructions per operation, the spread between the processes (max - min over the mean, the
figure tests/test_instructions_real.py bounds), the functions whose cost per operation
differs most between the lowest and the highest process, and the windows' own spread
within each process; then the spread over all seeds.

Variants: --build-flags (MALLOC=libc, the tests' builds; empty: the default jemalloc
build) and --server-env NAME=VALUE (e.g. GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2_Usable),
added to the environment regtrack gives the server.

    benchmarks/same_seed_spread.py --build-flags MALLOC=libc --processes 6 --repetitions 2

Asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import tempfile
from collections import defaultdict
from pathlib import Path

from window_repeatability import Window, capture, describe, run_instructions

from regtrack.core import child_env


def with_server_env(extra: dict[str, str]) -> None:
    """Hand the server ``extra`` on top of what regtrack gives it."""
    server = child_env.server

    def more(*args, **kwargs):
        return {**server(*args, **kwargs), **extra}

    child_env.server = more


def per_op(windows: list[Window]) -> tuple[float, dict[str, float]]:
    ops = sum(o for o, _ in windows)
    costs: dict[str, float] = defaultdict(float)
    for _, by_fn in windows:
        for name, cost in by_fn.items():
            costs[name] += cost / ops
    return sum(costs.values()), costs


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--version", default="7.0")
    parser.add_argument("--source-repo", default=str(Path.home() / ".cache/regtrack/offline-redis"))
    parser.add_argument("--build-flags", default="", help="e.g. MALLOC=libc (the tests' builds)")
    parser.add_argument("--pipeline", type=int, default=10)
    parser.add_argument("--requests", type=int, default=50_000, help="both windows together")
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--processes", type=int, default=6, help="runs, one process per seed")
    parser.add_argument("--repetitions", type=int, default=2, help="seeds per run")
    parser.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--top", type=int, default=4)
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.server_env)
    if extra:
        with_server_env(extra)
    trials: list[tuple[int, list[Window]]] = []
    capture(trials)
    with tempfile.TemporaryDirectory(prefix="same-seed-") as tmp:
        (Path(tmp) / "regtrack.toml").write_text("[run]\nseed_offset = 0\nrepeatability_pct = 50\n")
        os.environ["REGTRACK_CONFIG_DIR"] = tmp
        for n in range(args.processes):
            run_instructions(args, f"{tmp}/{n}.db", f"regtrack run {n}")
    by_seed: dict[int, list[list[Window]]] = defaultdict(list)
    for repetition, windows in trials:
        by_seed[repetition].append(windows)
    env = " ".join(args.server_env) or "(regtrack's server environment)"
    print(
        f"{cpu_model()}; {args.version} {args.build_flags or '(default build)'}, {env}; "
        f"pipeline {args.pipeline}, {args.requests // 2:,} requests per window; "
        f"{args.processes} processes for each of {len(by_seed)} seeds"
    )
    spreads, gaps = [], []
    for seed, processes in by_seed.items():
        counted = [per_op(w) for w in processes]
        totals = [t for t, _ in counted]
        mean = sum(totals) / len(totals)
        spread = 100 * (max(totals) - min(totals)) / mean
        spreads.append(spread)
        proc_gaps = [describe(w, 0)[0] for w in processes]
        gaps += proc_gaps
        lo, hi = counted[totals.index(min(totals))][1], counted[totals.index(max(totals))][1]
        moved = sorted(
            ((hi.get(k, 0) - lo.get(k, 0), k) for k in set(lo) | set(hi)),
            key=lambda item: -abs(item[0]),
        )[: args.top]
        print(f"repetition {seed}: " + ", ".join(f"{t:,.1f}" for t in totals))
        print(f"  spread {spread:.3f}%; windows apart (max) {max(proc_gaps):.3f}%")
        print("  highest - lowest: " + ", ".join(f"{k} {d:+.2f}" for d, k in moved))
    print(
        f"between processes of one seed: max spread {max(spreads):.3f}% "
        f"(median {sorted(spreads)[len(spreads) // 2]:.3f}%); "
        f"windows of one process: max {max(gaps):.3f}%"
    )


if __name__ == "__main__":
    main()
