#!/usr/bin/env python3
"""Does one binary's simulated last-level misses per op vary between server processes?

A cycles A/A gate once stayed undecided after 26 repetitions: one of its 52 server
processes counted 7.8 LL misses per GET where the others counted about 14. This reads a
`regtrack run --metric cycles` database of one binary under two labels (or runs one, with
--run) and prints, per trial, instructions, LL misses (instruction, data read, data
write), L1 misses and branch misses per op; then the functions whose LL misses per op
differ most between the trial with the fewest and the one with the most. Asserts nothing.

    benchmarks/cycles_ll_spread.py --run /usr/bin/redis-server --repetitions 8 \\
        --db /tmp/cyc.db --out benchmarks/results/cycles_ll_spread.txt
"""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
from pathlib import Path

TRIALS = """SELECT t.id, g.label, t.repetition, t.server_calls, c.ir, c.ilmr, c.dlmr, c.dlmw,
  c.d1mr + c.d1mw + c.i1mr, c.bcm + c.bim FROM trials t JOIN trial_cache_sim c
  ON c.trial_id = t.id JOIN targets g ON g.id = t.target_id ORDER BY t.id"""


def by_function(conn: sqlite3.Connection, trial: int) -> dict[str, float]:
    (calls,) = conn.execute("SELECT server_calls FROM trials WHERE id = ?", (trial,)).fetchone()
    rows = conn.execute(
        "SELECT function, ll_misses FROM function_costs WHERE trial_id = ?", (trial,)
    )
    return {f: (ll or 0) / calls for f, ll in rows}


def report(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    lines, per_trial = [], []
    for tid, label, rep, calls, ir, ilmr, dlmr, dlmw, l1, branch in conn.execute(TRIALS):
        ll = (ilmr + dlmr + dlmw) / calls
        per_trial.append((ll, tid))
        lines.append(
            f"trial {tid} {label} rep {rep}: Ir/op {ir / calls:8.1f} LL/op {ll:6.2f} "
            f"(i {ilmr / calls:.2f} dr {dlmr / calls:.2f} dw {dlmw / calls:.2f}) "
            f"L1/op {l1 / calls:6.2f} branch/op {branch / calls:5.2f}"
        )
    if len(per_trial) < 2:
        return [*lines, "fewer than two simulated trials"]
    per_trial.sort()
    (low_ll, low), (high_ll, high) = per_trial[0], per_trial[-1]
    a, b = by_function(conn, low), by_function(conn, high)
    lines.append(
        f"LL/op from {low_ll:.2f} to {high_ll:.2f} ({100 * (high_ll - low_ll) / low_ll:.1f}%); "
        f"by function, trial {low} (fewest) vs trial {high} (most):"
    )
    moved = sorted(set(a) | set(b), key=lambda f: -abs(b.get(f, 0) - a.get(f, 0)))[:8]
    lines += [
        f"  {f[:56]:<56} {a.get(f, 0):7.3f} {b.get(f, 0):7.3f} {b.get(f, 0) - a.get(f, 0):+7.3f}"
        for f in moved
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--run", metavar="REDIS_SERVER", help="measure first (a and b)")
    parser.add_argument("--repetitions", type=int, default=8)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.run:
        subprocess.run(
            [sys.executable, "-m", "regtrack", "run", "--versions",
             f"a=bin:{args.run},b=bin:{args.run}", "--metric", "cycles", "--pipelines", "10",
             "--instruction-requests", "20000", "--repetitions", str(args.repetitions),
             "--db", str(args.db), "--no-report"],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
    text = "\n".join(report(args.db))
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
