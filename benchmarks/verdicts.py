#!/usr/bin/env python3
"""Which interval method and threshold give honest verdicts on this machine?

Measures, in one interleaved run, Redis 7.0.15 twice (labels a and b: an A/A pair) and a
copy with a known slowdown in every GET (label slow), then re-analyses random subsets of
n repetitions with each interval method:

  false alarms  share of A/A subsets with any cell judged regression or improvement
  detection     share of A/slow subsets judged regression, per point
  width         mean width of the interval, in percentage points

Prints a table to quote in docs/methodology.md; asserts nothing.

    benchmarks/verdicts.py --source-repo ~/.cache/regtrack/offline-redis --metric throughput
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from regtrack.analysis import stats  # noqa: E402
from tests.slowdown import make_slow_branch  # noqa: E402

METHODS = {
    "paired-t": stats.paired,
    "welch-t": stats.unpaired,
    "bootstrap": stats.bootstrap_medians,
}


def measure(args: argparse.Namespace, repo: Path, branch: str, db: Path) -> float:
    command = [
        sys.executable, "-m", "regtrack", "run",
        "--versions", f"a=7.0.15,b=7.0.15,slow={branch}",
        "--source-repo", str(repo), "--metric", args.metric,
        "--pipelines", args.pipelines, "--repetitions", str(args.repetitions),
        "--duration", str(args.duration), "--warmup", "1",
        "--instruction-requests", str(args.instruction_requests), "--db", str(db),
    ]  # fmt: skip
    started = time.monotonic()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def values(db: Path, column: str) -> dict[tuple[str, str], dict[int, float]]:
    """(label, point) -> {repetition: value} of valid trials."""
    rows = sqlite3.connect(db).execute(
        f"SELECT g.label, t.point, t.repetition, t.{column} FROM trials t"
        f" JOIN targets g ON g.id = t.target_id WHERE t.valid = 1 AND t.{column} IS NOT NULL"
    )
    out: dict[tuple[str, str], dict[int, float]] = {}
    for label, point, rep, value in rows:
        out.setdefault((label, point), {})[rep] = value
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source-repo", required=True)
    parser.add_argument("--metric", choices=["throughput", "instructions"], default="throughput")
    parser.add_argument("--spins", type=int, default=25)
    parser.add_argument("--pipelines", default="10,30")
    parser.add_argument("--repetitions", type=int, default=10)
    parser.add_argument("--duration", type=float, default=3)
    parser.add_argument("--instruction-requests", type=int, default=200000)
    parser.add_argument("--sizes", default="3,5,8")
    parser.add_argument("--thresholds", default="1,2,3,5")
    parser.add_argument("--subsets", type=int, default=300)
    parser.add_argument("--db", help="analyse this database instead of measuring")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="regtrack-verdicts-"))
    db = Path(args.db) if args.db else work / "verdicts.db"
    if not args.db:
        branch = make_slow_branch(Path(args.source_repo), work / "repo", "7.0.15", args.spins)
        elapsed = measure(args, work / "repo", branch, db)
        print(f"measured in {elapsed:.0f} s: {db}")
    column = "ops_per_sec" if args.metric == "throughput" else "instructions_per_op"
    higher_is_better = args.metric == "throughput"
    data = values(db, column)
    points = sorted({p for _, p in data}, key=lambda p: int(p.split("=")[1]))
    reps = sorted(set.intersection(*(set(v) for v in data.values())))
    print(f"metric {column}; points {', '.join(points)}; {len(reps)} repetitions valid for all")
    for point in points:
        a, b, s = (data[(label, point)] for label in ("a", "b", "slow"))
        true = 100 * (sorted(s.values())[len(s) // 2] / sorted(a.values())[len(a) // 2] - 1)
        spread = 100 * (max(a.values()) - min(a.values())) / sorted(a.values())[len(a) // 2]
        print(f"  {point}: slow vs a (all reps, medians) {true:+.2f}%; spread of a {spread:.1f}%")
    rng = random.Random(1)
    m = len(points)  # Bonferroni over the cells of one sweep
    confidence = 1 - (1 - stats.CONFIDENCE) / m
    print(f"\nintervals at {100 * confidence:.1f}% per cell (95% over {m} cells)")
    print(f"{'method':<10} {'n':>2} {'t%':>4} {'A/A false alarms':>17} "
          + " ".join(f"{'detect ' + p:>18}" for p in points) + f" {'mean width':>11}")  # fmt: skip
    for size in (int(x) for x in args.sizes.split(",")):
        if size > len(reps):
            continue
        subsets = [rng.sample(reps, size) for _ in range(args.subsets)]
        for name, method in METHODS.items():
            for threshold in (float(x) for x in args.thresholds.split(",")):
                alarms, detected, widths = 0, dict.fromkeys(points, 0), []
                for subset in subsets:
                    alarm = False
                    for point in points:
                        a, b, s = (data[(label, point)] for label in ("a", "b", "slow"))
                        aa = method([a[r] for r in subset], [b[r] for r in subset], confidence)
                        ab = method([a[r] for r in subset], [s[r] for r in subset], confidence)
                        if stats.verdict(aa, threshold, higher_is_better) in (
                            "regression",
                            "improvement",
                        ):
                            alarm = True
                        if stats.verdict(ab, threshold, higher_is_better) == "regression":
                            detected[point] += 1
                        if aa:
                            widths.append(aa.high_pct - aa.low_pct)
                    alarms += alarm
                n = len(subsets)
                print(
                    f"{name:<10} {size:>2} {threshold:>4g} {100 * alarms / n:>16.1f}% "
                    + " ".join(f"{100 * detected[p] / n:>17.1f}%" for p in points)
                    + f" {sum(widths) / max(1, len(widths)):>10.2f}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
