#!/usr/bin/env python3
"""What callgrind's cache and branch simulation adds to an instruction trial's time, and
how far apart two processes with one seed count simulated cycles (A/A).

1. Runs one version --runs times with --metric instructions and with --metric cycles
   alternately (same points and requests), and prints per metric each instruction
   trial's time (its warm-up and two windows, from the store) and each command's wall
   time, then the ratio. ci's default (--metric both) never simulates: its budget is
   unchanged; this says what a gate that asks for --metric cycles pays.
2. With --aa-repetitions N: one --metric cycles run of the version twice (a and b), N
   seed-matched repetitions at --aa-requests, the gates' settings; per repetition how far
   apart a and b count each metric (percent of their mean): the A/A spread the cycles
   threshold is chosen from.

Asserts nothing.

    flock /tmp/regtrack-tests.lock benchmarks/cycles_cost.py --runs 2 --aa-repetitions 8
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REGTRACK = str(ROOT / ".venv" / "bin" / "regtrack")


def one(metric: str, args: argparse.Namespace, db: Path) -> tuple[float, list[float]]:
    argv = [
        REGTRACK, "run", "--versions", args.version, "--source-repo", args.source_repo,
        "--metric", metric, "--pipelines", args.pipelines, "--repetitions", str(args.repetitions),
        "--instruction-requests", str(args.requests), "--db", str(db), "--no-report",
    ]  # fmt: skip
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=os.environ)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{metric}: exit {proc.returncode}: {proc.stderr[-1500:]}")
    with sqlite3.connect(db) as conn:
        trials = [
            (w or 0) + (u or 0)
            for w, u in conn.execute(
                "SELECT wall_s, warmup_s FROM trials WHERE mode = 'instructions' AND run_id ="
                " (SELECT MAX(id) FROM runs)"
            )
        ]
    return wall, trials


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--version", default="7.0.15")
    parser.add_argument("--source-repo", default=str(Path.home() / ".cache/regtrack/offline-redis"))
    parser.add_argument("--pipelines", default="10,30", help="ci's default points")
    parser.add_argument("--repetitions", type=int, default=2)
    parser.add_argument("--requests", type=int, default=100_000, help="ci's default")
    parser.add_argument("--runs", type=int, default=2, help="runs of each metric, alternated")
    parser.add_argument("--aa-repetitions", type=int, default=0)
    parser.add_argument("--aa-requests", type=int, default=20_000)
    parser.add_argument("--aa-pipelines", default="10")
    args = parser.parse_args()
    if args.runs:
        cost(args)
    if args.aa_repetitions:
        aa(args)


METRICS = ("instructions_per_op", "cycles", "l1", "ll", "branch")


def aa(args: argparse.Namespace) -> None:
    """Seed-matched pairs of one version under the simulation: their differences."""
    with tempfile.TemporaryDirectory(prefix="cycles-aa-") as tmp:
        db = Path(tmp) / "aa.db"
        argv = [
            REGTRACK, "run", "--versions", f"a={args.version},b={args.version}",
            "--source-repo", args.source_repo, "--metric", "cycles", "--pipelines",
            args.aa_pipelines, "--repetitions", str(args.aa_repetitions),
            "--instruction-requests", str(args.aa_requests), "--db", str(db), "--no-report",
        ]  # fmt: skip
        proc = subprocess.run(argv, capture_output=True, text=True, env=os.environ)
        if proc.returncode != 0:
            raise SystemExit(f"A/A: exit {proc.returncode}: {proc.stderr[-1500:]}")
        with sqlite3.connect(db) as conn:
            rows = conn.execute(
                "SELECT t.repetition, t.point, g.label, t.seed, t.instructions_per_op,"
                " 1.0 * c.cycles / t.server_calls,"
                " 1.0 * (c.i1mr + c.d1mr + c.d1mw) / t.server_calls,"
                " 1.0 * (c.ilmr + c.dlmr + c.dlmw) / t.server_calls,"
                " 1.0 * (c.bcm + c.bim) / t.server_calls"
                " FROM trials t JOIN targets g ON g.id = t.target_id"
                " JOIN trial_cache_sim c ON c.trial_id = t.id WHERE t.valid = 1"
                " ORDER BY t.point, t.repetition, g.label"
            ).fetchall()
    pairs: dict[tuple, dict[str, tuple]] = {}
    for rep, point, label, seed, *values in rows:
        pairs.setdefault((point, rep), {})[label] = (seed, values)
    print(
        f"\nA/A: {args.version} twice, --metric cycles, {args.aa_repetitions} seed-matched "
        f"repetitions, {args.aa_requests:,} requests, pipelines {args.aa_pipelines}"
    )
    print(f"{'point':<12} {'rep':>3} " + " ".join(f"{m:>20}" for m in METRICS))
    worst = dict.fromkeys(METRICS, 0.0)
    for (point, rep), pair in sorted(pairs.items()):
        if set(pair) != {"a", "b"} or pair["a"][0] != pair["b"][0]:
            continue
        a, b = pair["a"][1], pair["b"][1]
        cells = []
        for m, x, y in zip(METRICS, a, b, strict=True):
            pct = 200.0 * (y - x) / (x + y) if x + y else 0.0
            worst[m] = max(worst[m], abs(pct))
            cells.append(f"{x:>9,.2f} {pct:>+8.3f}%")
        print(f"{point:<12} {rep:>3} " + " ".join(cells))
    print("largest |b - a| of a seed-matched pair: "
          + ", ".join(f"{m} {v:.3f}%" for m, v in worst.items()))  # fmt: skip


def cost(args: argparse.Namespace) -> None:
    found: dict[str, tuple[list[float], list[float]]] = {
        "instructions": ([], []),
        "cycles": ([], []),
    }
    with tempfile.TemporaryDirectory(prefix="cycles-cost-") as tmp:
        for i in range(args.runs):
            for metric in ("instructions", "cycles"):
                wall, trials = one(metric, args, Path(tmp) / f"{metric}.db")
                found[metric][0].append(wall)
                found[metric][1].extend(trials)
                print(f"run {i + 1} {metric:<12}: command {wall:6.1f} s, trials "
                      + ", ".join(f"{t:.1f}" for t in trials) + " s", flush=True)  # fmt: skip
    print(
        f"\n{args.version}, pipelines {args.pipelines}, {args.repetitions} repetitions, "
        f"{args.requests:,} requests per trial (warm-up and two windows)"
    )
    median = {m: statistics.median(v[1]) for m, v in found.items()}
    walls = {m: statistics.median(v[0]) for m, v in found.items()}
    for metric in found:
        print(
            f"  --metric {metric:<12}: median trial {median[metric]:5.1f} s, "
            f"median command {walls[metric]:6.1f} s"
        )
    print(
        f"  the simulation: trials x{median['cycles'] / median['instructions']:.2f} "
        f"(+{median['cycles'] - median['instructions']:.1f} s each), commands "
        f"x{walls['cycles'] / walls['instructions']:.2f}"
    )


if __name__ == "__main__":
    main()
