#!/usr/bin/env python3
"""What an instruction count means with `io-threads`: every thread's work, spin-waits too.

callgrind sums the instructions of every thread of the server into one count (its
default, --separate-threads=no), so with `io-threads N` instructions per op include what
the I/O threads execute. This measures how much of that is work and how much is waiting:
for each version and each `io-threads` value, one `regtrack run --metric instructions`
(GETs at pipeline 1 from 50 connections, so that enough clients are pending per event
loop iteration for Redis to hand them to its threads), and prints per trial the
instructions per op, the two windows' agreement, and the share of the functions in which
threads wait for each other: Redis 6/7's I/O threads spin up to 1,000,000 times in
IOThreadMain before they sleep, and the main thread spins in
handleClientsWithPendingReadsUsingThreads/WritesUsingThreads until they are done; Redis 8
rebuilt its threads around an event loop each.

valgrind runs one server thread at a time, so the counts need one server CPU whatever
`io-threads` says (regtrack allows it for --metric instructions only).

    .venv/bin/python benchmarks/io_threads_counts.py --source-repo ~/.cache/regtrack/offline-redis \
        --versions 7.0.15,8.0.6 --threads 1,2 --repetitions 2

Prints every figure; asserts nothing.
"""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from regtrack.core.records import TrialReason, reasons_text

ROOT = Path(__file__).resolve().parent.parent
TOP = 5
REGTRACK = str(ROOT / ".venv" / "bin" / "regtrack")
# Where threads wait for each other (Redis 6.0-7.x threaded I/O; iothread.c in 8.x).
WAITING = (
    "IOThreadMain",
    "handleClientsWithPendingReadsUsingThreads",
    "handleClientsWithPendingWritesUsingThreads",
)


def measure(args: argparse.Namespace, threads: int, db: Path) -> None:
    argv = [
        REGTRACK, "run", "--versions", args.versions, "--source-repo", args.source_repo,
        "--metric", "instructions", "--pipelines", "1", "--clients", "50",
        "--keys", "1000", "--data-size", "100", "--repetitions", str(args.repetitions),
        "--instruction-requests", str(args.requests), "--server-cpus", "0",
        "--client-cpus", "1", "--db", str(db), "--no-report",
    ]  # fmt: skip
    if threads > 1:
        argv += ["--server-config", f"io-threads={threads}"]
        argv += ["--server-config", "io-threads-do-reads?=yes"]  # 8.0 reads in threads always
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(
            f"io-threads {threads}: regtrack run failed ({proc.returncode}): {proc.stderr[-800:]}"
        )


def report(threads: int, db: Path) -> None:
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT t.id, g.label, t.repetition, t.instructions_per_op, t.instructions_repeat_pct,"
        " t.server_calls FROM trials t JOIN targets g ON g.id = t.target_id"
        " WHERE t.mode = 'instructions' ORDER BY g.label, t.repetition"
    ).fetchall()
    for trial_id, label, rep, per_op, repeat, calls in rows:
        reason = reasons_text(
            tuple(
                TrialReason.stored(code, detail)
                for code, detail in conn.execute(
                    "SELECT code, detail FROM trial_reasons WHERE trial_id = ? ORDER BY position",
                    (trial_id,),
                )
            )
        )
        costs = dict(
            conn.execute(
                "SELECT function, exclusive FROM function_costs WHERE trial_id = ?", (trial_id,)
            ).fetchall()
        )
        total = sum(costs.values()) or 1
        waiting = {  # with the compiler's split-off parts (name.part.0)
            f: sum(c for name, c in costs.items() if name.split(".")[0] == f) / total
            for f in WAITING
        }
        waiting = {f: share for f, share in waiting.items() if share}
        shown = ", ".join(f"{f} {100 * share:.1f}%" for f, share in waiting.items()) or "none"
        top = sorted(costs.items(), key=lambda item: -item[1])[:TOP]
        heaviest = ", ".join(f"{f} {100 * c / total:.1f}%" for f, c in top)
        print(
            f"io-threads {threads}  {label:8} rep {rep + 1}: {per_op:,.1f} Ir/op, windows "
            f"{repeat:.2f}% apart ({calls} calls){'  INVALID: ' + reason if reason else ''}\n"
            f"    exclusive share of waiting functions: {shown}\n"
            f"    heaviest functions (exclusive): {heaviest}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source-repo", default=str(Path.home() / ".cache/regtrack/offline-redis"))
    parser.add_argument("--versions", default="7.0.15,8.0.6")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repetitions", type=int, default=2)
    parser.add_argument("--requests", type=int, default=40_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="io-threads-") as tmp:
        for threads in (int(t) for t in args.threads.split(",")):
            db = Path(tmp) / f"threads-{threads}.db"
            measure(args, threads, db)
            report(threads, db)


if __name__ == "__main__":
    main()
