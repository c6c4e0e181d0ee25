#!/usr/bin/env python3
"""What controlling the hash seed does to instructions per GET: A/A spread and real pairs.

Runs one interleaved `regtrack run --metric instructions` of 6.2.14, 7.0.15 (twice: an
A/A pair) and unstable (8.0.6 in the offline source set) with seeds fixed per repetition,
then the same with Redis seeding itself, and prints for each:

  spread   (max - min) / median of one version's trials (one server process each)
  A/A      the largest difference between the two 7.0.15 processes of one repetition
  change   the pooled change vs 6.2.14 with its interval, as `regtrack compare` gives it

Asserts nothing.

    benchmarks/seed_effect.py --source-repo ~/.cache/regtrack/offline-redis --repetitions 6
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REGTRACK = str(ROOT / ".venv" / "bin" / "regtrack")
VERSIONS = "6.2=6.2.14,7.0=7.0.15,7.0bis=7.0.15,8.0=unstable"


def measure(seeds: str, args: argparse.Namespace, tmp: Path) -> None:
    configs = tmp / f"configs-{seeds}"
    configs.mkdir()
    (configs / "regtrack.toml").write_text(f'[run]\nseeds = "{seeds}"\n')
    db = tmp / f"{seeds}.db"
    argv = [
        REGTRACK, "run", "--versions", VERSIONS, "--source-repo", args.source_repo,
        "--metric", "instructions", "--pipelines", "10", "--repetitions", str(args.repetitions),
        "--instruction-requests", str(args.requests), "--db", str(db), "--no-report",
    ]  # fmt: skip
    env = {**os.environ, "REGTRACK_CONFIG_DIR": str(configs)}
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"regtrack run failed: {proc.stderr[-2000:]}")
    rows = sqlite3.connect(db).execute(
        "SELECT g.label, t.repetition, t.seed, t.instructions_per_op FROM trials t"
        " JOIN targets g ON g.id = t.target_id WHERE t.valid = 1"
    )
    by = {}
    for label, rep, _seed, value in rows:
        by.setdefault(label, {})[rep] = value
    compare = subprocess.run(
        [REGTRACK, "compare", "--db", str(db), "--format", "json"], capture_output=True, text=True
    )
    records = json.loads(compare.stdout)
    print(f"seeds {seeds}: {args.repetitions} repetitions, pipeline 10")
    for label, values in by.items():
        vals = sorted(values.values())
        median = vals[len(vals) // 2]
        print(
            f"  {label:<7} {min(vals):9,.1f} .. {max(vals):9,.1f} Ir/GET  "
            f"spread {100 * (max(vals) - min(vals)) / median:5.2f}%"
        )
    pairs = [abs(by["7.0bis"][r] / by["7.0"][r] - 1) for r in by["7.0"] if r in by["7.0bis"]]
    print(f"  A/A (7.0 vs 7.0bis, same repetition): largest difference {100 * max(pairs):.3f}%")
    for r in records:
        if r["metric"] == "instructions_per_op":
            print(
                f"  {r['candidate']:<7} vs 6.2: {r['change_pct']:+.2f}% "
                f"[{r['ci_low_pct']:+.2f}, {r['ci_high_pct']:+.2f}] {r['verdict']}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source-repo", default=str(Path.home() / ".cache/regtrack/offline-redis"))
    parser.add_argument("--repetitions", type=int, default=6)
    parser.add_argument("--requests", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="seed-effect-") as tmp:
        for seeds in ("fixed", "random"):
            measure(seeds, args, Path(tmp))


if __name__ == "__main__":
    main()
