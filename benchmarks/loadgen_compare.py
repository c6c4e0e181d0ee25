#!/usr/bin/env python3
"""memtier_benchmark against redis-benchmark as the GET sweep's load generator, on this
machine: ops/s, how busy the server was (its share of its CPU) and the load generator's
CPU, at GET pipelines 1, 10 and 30.

One redis-server (the installed one, or --server), pinned as regtrack pins it; each round
runs `regtrack run --loadgen TOOL` once per tool, the order alternating round by round so
that the machine's drift falls on both alike. Prints medians over the rounds per tool and
point (docs/workloads.md quotes the table); it asserts nothing.

    .venv/bin/python benchmarks/loadgen_compare.py [--rounds 4] [--duration 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TOOLS = ("redis-benchmark", "memtier")
PIPELINES = (1, 10, 30)


def one_run(tool: str, server: str, db: Path, duration: float, configs: Path) -> None:
    argv = [
        sys.executable, "-m", "regtrack", "run", "--versions", f"{tool}=bin:{server}",
        "--loadgen", tool, "--pipelines", ",".join(map(str, PIPELINES)), "--repetitions", "1",
        "--duration", str(duration), "--warmup", "1", "--db", str(db), "--no-report",
    ]  # fmt: skip
    env = {**os.environ, "REGTRACK_CONFIG_DIR": str(configs)}
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False, timeout=900)
    if proc.returncode != 0:
        sys.exit(f"{tool}: regtrack run failed: {proc.stderr[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--server", default=shutil.which("redis-server"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="loadgen-compare-") as tmp:
        db, configs = Path(tmp) / "r.db", Path(tmp) / "configs"
        configs.mkdir()
        # Every trial is kept and shown: its flags (client-bound, not server-bound) are
        # what this compares, so no trial is dropped for contention either.
        (configs / "regtrack.toml").write_text("[run]\ncontention_limit_pct = 100\n")
        for n in range(args.rounds):
            for tool in TOOLS if n % 2 == 0 else reversed(TOOLS):
                one_run(tool, args.server, db, args.duration, configs)
        rows = (
            sqlite3.connect(db)
            .execute(
                "SELECT g.label, t.params, t.ops_per_sec, t.server_cpu_pct, t.client_cpu_pct,"
                " (SELECT group_concat(c.code) FROM trial_reasons c WHERE c.trial_id = t.id),"
                " r.loadgen FROM trials t JOIN targets g ON g.id = t.target_id"
                " JOIN runs r ON r.id = t.run_id"
            )
            .fetchall()
        )
    cells: dict[tuple[str, int], list[tuple]] = {}
    versions: dict[str, str] = {}
    for label, params, ops, server, client, reason, loadgen in rows:
        cells.setdefault((label, json.loads(params)["pipeline"]), []).append(
            (ops, server, client, reason)
        )
        versions[label] = json.loads(loadgen).get("version", "?").split(" sha=")[0]
    print(f"{args.rounds} rounds of {args.duration:g} s trials, medians; server {args.server}")
    for tool in TOOLS:
        print(f"  {tool}: {versions.get(tool, '?')}")
    print(
        f"{'tool':<16} {'pipeline':>8} {'ops/s':>10} {'server busy':>12} {'client CPU':>11}"
        "  trials flagged"
    )
    for tool in TOOLS:
        for pipeline in PIPELINES:
            got = cells.get((tool, pipeline), [])
            if not got:
                continue
            ops = statistics.median(g[0] or 0 for g in got)
            server = statistics.median(g[1] or 0 for g in got)
            client = statistics.median(g[2] or 0 for g in got)
            flags = sorted({code for *_, r in got if r for code in r.split(",")})
            print(
                f"{tool:<16} {pipeline:>8} {ops:>10,.0f} {server:>11.0f}% {client:>10.0f}%"
                f"  {len([g for g in got if g[3]])}/{len(got)} {', '.join(flags)}"
            )


if __name__ == "__main__":
    main()
