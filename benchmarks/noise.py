#!/usr/bin/env python3
"""How repeatable is each metric on this machine? Throughput against instructions per op.

Runs one regtrack run with --metric both, then prints, per version and point, every
repetition's throughput and instructions per op and their spread ((max - min) / median).
Quote its output when claiming how noisy a metric is; it asserts nothing.

    benchmarks/noise.py --versions 6.2,7.0 --source-repo ~/.cache/regtrack/offline-redis
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", required=True)
    parser.add_argument("--source-repo")
    parser.add_argument("--pipelines", default="1,10")
    parser.add_argument("--repetitions", default="3")
    parser.add_argument("--duration", default="3")
    parser.add_argument("--instruction-requests", default="200000")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "noise.db"
        command = [
            sys.executable,
            "-m",
            "regtrack",
            "run",
            "--versions",
            args.versions,
            "--metric",
            "both",
            "--pipelines",
            args.pipelines,
            "--repetitions",
            args.repetitions,
            "--duration",
            args.duration,
            "--instruction-requests",
            args.instruction_requests,
            "--db",
            str(db),
        ]
        if args.source_repo:
            command += ["--source-repo", args.source_repo]
        started = time.monotonic()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        elapsed = time.monotonic() - started
        rows = (
            sqlite3.connect(db)
            .execute(
                "SELECT g.label, t.point, t.mode, t.ops_per_sec, t.instructions_per_op, t.valid"
                " FROM trials t JOIN targets g ON g.id = t.target_id ORDER BY g.position, t.point"
            )
            .fetchall()
        )
    table: dict[tuple[str, str, str], list[float]] = {}
    for label, point, mode, ops, ipo, valid in rows:
        value = ops if mode == "throughput" else ipo
        if valid and value:
            table.setdefault((label, point, mode), []).append(value)
    print(f"regtrack run took {elapsed:.0f} s; valid repetitions per cell shown")
    print(f"{'version':<10} {'point':<12} {'metric':<22} {'spread':>8}  values")
    for (label, point, mode), values in sorted(table.items()):
        median = statistics.median(values)
        spread = 100 * (max(values) - min(values)) / median if len(values) > 1 else 0.0
        unit = "ops/s" if mode == "throughput" else "instructions/op"
        shown = ", ".join(f"{v:,.0f}" if mode == "throughput" else f"{v:,.1f}" for v in values)
        print(f"{label:<10} {point:<12} {unit:<22} {spread:>7.2f}%  {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
