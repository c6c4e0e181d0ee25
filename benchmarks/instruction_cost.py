#!/usr/bin/env python3
"""What one instruction trial costs in wall time, for this checkout and another one.

Runs `regtrack run --metric instructions` of one version at one pipeline depth with the
default 200,000 requests and 100,000 keys, --repetitions N (one server per repetition),
with the regtrack package of each given checkout (e.g. a `git worktree` of an older
commit), one after the other, and prints the wall time per repetition (server start,
populate, warm-up, the two measured windows, stop) and the measured windows' share.

    git worktree add /tmp/regtrack-old 278c5fe
    benchmarks/instruction_cost.py --checkout /tmp/regtrack-old --checkout .

Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cost(checkout: Path, args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="instr-cost-") as tmp:
        db = Path(tmp) / "r.db"
        argv = [
            sys.executable, "-m", "regtrack", "run", "--versions", args.version,
            "--source-repo", args.source_repo, "--metric", "instructions",
            "--pipelines", str(args.pipeline), "--repetitions", str(args.repetitions),
            "--db", str(db), "--no-report",
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(checkout.resolve())}
        t0 = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=checkout)
        wall = time.monotonic() - t0
        if proc.returncode != 0:
            sys.exit(f"{checkout}: regtrack run failed: {proc.stderr[-1500:]}")
        rows = sqlite3.connect(db).execute("SELECT wall_s, warmup_s FROM trials").fetchall()
    windows = sum(w or 0 for w, _ in rows)
    warm = sum(w or 0 for _, w in rows)
    print(
        f"{checkout}: {wall:.1f} s for {len(rows)} trials (preflight, builds cached, included): "
        f"{wall / len(rows):.1f} s per trial; measured windows {windows / len(rows):.1f} s, "
        f"warm-up {warm / len(rows):.1f} s per trial"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkout", type=Path, action="append", required=True)
    parser.add_argument("--version", default="7.0.15")
    parser.add_argument("--source-repo", default=str(Path.home() / ".cache/regtrack/offline-redis"))
    parser.add_argument("--pipeline", type=int, default=10)
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args()
    for checkout in args.checkout:
        cost(checkout, args)


if __name__ == "__main__":
    main()
