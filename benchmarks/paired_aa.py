#!/usr/bin/env python3
"""A/A runs of one binary, paired in time at several window lengths and as separate trials:
is the paired mode unbiased, and how much does it resolve per minute?

Each configuration is one real `regtrack run --versions a=bin:X,b=bin:X` (GET pipelines 10
and 30, --duration seconds per server and point, --repetitions) in a database of its own;
the configurations run one after the other, in the order given, --rounds times (rounds
alternate the order, so the host's drift falls on all alike). For each configuration it
prints, over all its repetitions (blocks):

  mean     the mean block value, log(b/a) averaged over the points (an A/A: 0 if unbiased)
  sd       the sd of the block values
  t        the mean over its standard error (|t| > 2.1 at 16 blocks: a bias)
  s/block  wall seconds per repetition (both servers, both points)
  sd@60s   the sd of an estimate made of one minute of blocks: sd * sqrt(s/block / 60)

With --candidate, b is another build instead (an A/B: the mean is the change, e.g. of a
memory-stall build, tests/slowdown.make_stall_branch). --server and --candidate take a
binary's path, or a git ref of --source-repo that regtrack builds as `run` would (default
build flags, its build cache). docs/methodology.md quotes the table; it asserts nothing.

    .venv/bin/python benchmarks/paired_aa.py [--server PATH|REF] [--rounds 2]
        [--repetitions 8] [--configs time:0.1,time:0.25,time:0.5,time:1,separate]
        [--candidate PATH|REF --source-repo REPO]
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REGTRACK = str(Path(sys.executable).with_name("regtrack"))


def one_run(
    server: str, candidate: str, config: str, reps: int, duration: float
) -> tuple[list[float], float]:
    """Block values (mean over points of log(b/a)) and the run's wall seconds."""
    pairing, _, window = config.partition(":")
    with tempfile.TemporaryDirectory(prefix="paired-aa-") as tmp:
        db = Path(tmp) / "r.db"
        argv = [
            REGTRACK, "run", "--versions", f"a=bin:{server},b=bin:{candidate}",
            "--pipelines", "10,30", "--duration", str(duration), "--warmup", "1",
            "--repetitions", str(reps), "--pairing", pairing, "--db", str(db), "--no-report",
            "--loadgen", "redis-benchmark",
        ]  # fmt: skip
        if window:
            argv += ["--window", window]
        start = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        wall = time.monotonic() - start
        if proc.returncode != 0:
            sys.exit(f"{config}: regtrack run failed: {proc.stderr[-2000:]}")
        rows = (
            sqlite3.connect(db)
            .execute(
                "SELECT g.label, t.repetition, t.point, t.ops_per_sec, t.valid FROM trials t "
                "JOIN targets g ON g.id = t.target_id WHERE t.mode = 'throughput'"
            )
            .fetchall()
        )
    values: dict[tuple[int, str], dict[str, float]] = {}
    for label, rep, point, ops, valid in rows:
        if valid and ops:
            values.setdefault((rep, point), {})[label] = math.log(ops)
    blocks: dict[int, list[float]] = {}
    for (rep, _), sides in values.items():
        if len(sides) == 2:
            blocks.setdefault(rep, []).append(sides["b"] - sides["a"])
    return [statistics.fmean(v) for v in blocks.values() if len(v) == 2], wall / reps


def server_binary(spec: str, source_repo: str | None) -> str:
    """A binary's path as given, or the server regtrack builds for a git ref."""
    if Path(spec).is_file():
        return spec
    from regtrack.targets import build, versions

    targets = versions.resolve([versions.parse_spec(spec)], source_repo)
    build.obtain(targets, [], lambda text: None)
    return str(targets[0].binary)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default=shutil.which("redis-server"))
    parser.add_argument("--candidate", help="b's binary or ref (default: --server, an A/A)")
    parser.add_argument("--source-repo", help="where --server/--candidate refs resolve")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repetitions", type=int, default=8)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--configs", default="time:0.1,time:0.25,time:0.5,time:1,separate")
    parser.add_argument("--json", type=Path, help="also write the block values here")
    args = parser.parse_args()
    args.server = server_binary(args.server, args.source_repo)
    if args.candidate:
        args.candidate = server_binary(args.candidate, args.source_repo)
    configs = args.configs.split(",")
    blocks: dict[str, list[float]] = {c: [] for c in configs}
    seconds: dict[str, list[float]] = {c: [] for c in configs}
    for r in range(args.rounds):
        for config in configs if r % 2 == 0 else list(reversed(configs)):
            values, per_block = one_run(
                args.server, args.candidate or args.server, config, args.repetitions,
                args.duration,
            )  # fmt: skip
            blocks[config] += values
            seconds[config].append(per_block)
            print(f"round {r + 1} {config}: {len(values)} blocks, {per_block:.1f} s each",
                  file=sys.stderr, flush=True)  # fmt: skip
    what = (
        f"A/A of {args.server}"
        if not args.candidate
        else (f"{args.candidate} (b) against {args.server} (a)")
    )
    print(
        f"{what}, GET pipelines 10 and 30, {args.duration:g} s per server and "
        f"point, {args.rounds} rounds x {args.repetitions} repetitions\n"
    )
    print("| method | blocks | mean | sd | t | s/block | sd@60s |")
    print("|---|---|---|---|---|---|---|")
    for config in configs:
        xs = blocks[config]
        mean, sd = statistics.fmean(xs), statistics.stdev(xs)
        per_block = statistics.fmean(seconds[config])
        name = f"paired, {config.partition(':')[2]} s windows" if ":" in config else config
        print(
            f"| {name} | {len(xs)} | {100 * mean:+.2f}% | {100 * sd:.2f}% | "
            f"{mean / (sd / math.sqrt(len(xs))):+.2f} | {per_block:.1f} | "
            f"{100 * sd * math.sqrt(per_block / 60):.2f}% |"
        )
    if args.json:
        args.json.write_text(json.dumps({"blocks": blocks, "seconds": seconds}))


if __name__ == "__main__":
    main()
