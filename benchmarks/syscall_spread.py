#!/usr/bin/env python3
"""Where are syscalls per op deterministic enough to gate? A/A spread, per syscall and total.

Runs one real `regtrack run` of the same build twice (labels a and b: seed-matched, interleaved
repetitions) with --metric both, so every repetition has native throughput trials (paired
in time, the server's calls counted over its windows) and instruction trials (the server
under callgrind, a fixed request count per window, counted from zero to dump), each with
every syscall counted by name (bench/kernel_calls.py). Then, per trial kind and point:

  per op     each syscall's calls per GET (median over trials), and the total
  spread     (max - min) / median of each over every trial of both labels
  A/A        the seed-matched blocks' log(b / a) of the total: mean, sd, largest |value|

The gate's threshold must sit well outside the A/A block spread (a gate decides `no change`
at its first look of 4 blocks when its interval, about 2.1 block sds wide each side with
t-spending, fits inside the threshold). Asserts nothing; prints, and with --out writes the
same text.

    benchmarks/syscall_spread.py --repetitions 6 --out benchmarks/results/syscall_spread.txt
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from regtrack.results import loaded  # noqa: E402
from regtrack.results.store import Store  # noqa: E402

REGTRACK = str(ROOT / ".venv" / "bin" / "regtrack")


def measure(args: argparse.Namespace, db: Path) -> tuple[float, str]:
    argv = [
        REGTRACK, "run", "--versions", f"a={args.version},b={args.version}",
        "--source-repo", args.source_repo, "--metric", "both",
        "--pipelines", args.pipelines, "--repetitions", str(args.repetitions),
        "--duration", str(args.duration), "--db", str(db), "--no-report", *args.extra,
    ]  # fmt: skip
    t0 = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env=os.environ)
    if done.returncode not in (0, 1):
        sys.exit(f"regtrack run failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return time.monotonic() - t0, " ".join(argv[1:])


def report(db: Path) -> list[str]:
    store = Store.open(db, create=False)
    try:
        run = loaded.run(store, store.runs()[0].id)
    finally:
        store.close()
    frame = run.trials
    lines = []
    for mode in ("throughput", "instructions"):
        rows = frame[(frame["mode"] == mode) & frame["valid"]]
        named = rows[rows["syscalls_by_name"].notna()]
        lines.append(f"== {mode} trials: {len(rows)} valid, {len(named)} counted by name")
        for point in sorted(set(named["point"]), key=lambda p: int(p.split("=")[1])):
            at = named[named["point"] == point]
            per_op: dict[str, list[float]] = {}
            totals = []
            for calls, by_name in zip(at["server_calls"], at["syscalls_by_name"], strict=True):
                totals.append(sum(by_name.values()) / calls)
                for name in {n for b in at["syscalls_by_name"] for n in b}:
                    per_op.setdefault(name, []).append(by_name.get(name, 0) / calls)
            lines.append(f"  {point} ({len(at)} trials)")
            lines.append(f"    {'syscall':<16} {'per op (median)':>16} {'spread':>9}")
            for name, values in sorted(per_op.items(), key=lambda kv: -statistics.median(kv[1])):
                lines.append(f"    {name:<16} {statistics.median(values):>16.5f} {_spread(values)}")
            lines.append(f"    {'total':<16} {statistics.median(totals):>16.5f} {_spread(totals)}")
            blocks = _blocks(at)
            if len(blocks) >= 2:
                sd = statistics.stdev(blocks)
                lines.append(
                    f"    A/A blocks log(b/a) of the total: n={len(blocks)} mean "
                    f"{100 * statistics.mean(blocks):+.3f}% sd {100 * sd:.3f}% largest "
                    f"|{100 * max(abs(b) for b in blocks):.3f}|%"
                )
        lines.append("")
    return lines


def _spread(values: list[float]) -> str:
    mid = statistics.median(values)
    return f"{100 * (max(values) - min(values)) / mid:>8.2f}%" if mid else "        -"


def _blocks(at) -> list[float]:  # type: ignore[no-untyped-def]
    """Seed-matched log(b / a) of the total syscalls per op."""
    sides: dict[str, dict[str, float]] = {}
    for target, seed, calls, by_name in zip(
        at["target"], at["seed"], at["server_calls"], at["syscalls_by_name"], strict=True
    ):
        sides.setdefault(target, {})[seed] = sum(by_name.values()) / calls
    a, b = sides.get("a", {}), sides.get("b", {})
    return [math.log(b[s] / a[s]) for s in a if s in b and a[s] > 0 and b[s] > 0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--version", default="7.0.15")
    parser.add_argument("--source-repo", default=str(Path.home() / ".cache/regtrack/offline-redis"))
    parser.add_argument("--pipelines", default="1,10")
    parser.add_argument("--repetitions", type=int, default=6)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--out", type=Path)
    parser.add_argument("extra", nargs="*", help="more regtrack run options, after --")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="syscall-spread-") as tmp:
        db = Path(tmp) / "spread.db"
        wall, command = measure(args, db)
        lines = [f"regtrack {command} (temporary database), {wall:.0f} s", "", *report(db)]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
