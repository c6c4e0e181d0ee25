#!/usr/bin/env python3
"""How a server's throughput wanders in time, and what pairing in time can gain from it.

One redis-server (the installed one, or --server) pinned to CPU 0 as regtrack pins it,
populated like the GET sweep; one redis-benchmark at --pipeline on CPU 1 runs without a
pause for --seconds, while the server's own counters (bench/windows.read: GET calls, CPU
time) are read every --tick seconds. Printed (docs/methodology.md quotes both tables):

1. for windows of 0.1 to 2 s, the spread between two windows some time apart: the
   per-window sd of log throughput from differences, sd(log r[i+k] - log r[i]) / sqrt 2.
   White noise is flat in the separation; a slow wander makes it grow until it saturates.
2. for each window length, what an ideal paired-in-time comparison of this one server
   with itself (an A/A: windows given in turn to "A" and "B" in A B B A groups, no cost
   of switching) would have: the sd of one group's log ratio and of a 60-second estimate.
   The real mode pays for switching (a settle time per window); benchmarks/paired_aa.py
   measures that.

    .venv/bin/python benchmarks/noise_timescale.py [--seconds 180] [--pipeline 10]
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import sys
import time

from regtrack.bench import setup, windows
from regtrack.bench.loadgen import redis_benchmark
from regtrack.bench.loadgen.base import Aim
from regtrack.bench.loadgen.held import HeldLoad
from regtrack.bench.runtimes.native import native_server
from regtrack.workloads import points
from regtrack.workloads.files import load_workload

LENGTHS = (0.1, 0.2, 0.5, 1.0, 2.0)
APART = (0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)


def sample(server_bin: str, seconds: float, tick: float, pipeline: int) -> list[windows.Reading]:
    workload = load_workload("get-pipeline", pipelines=[pipeline])
    with native_server(server_bin, (0,)) as server:
        client = server.client(timeout=600)
        setup.prepare_server(client, workload, redis_benchmark.NAME)
        binary = redis_benchmark.locate()
        aim = Aim(binary, server.host, server.port, (1,), server.alive, server.pid)
        point = points.points(workload)[0]
        load = HeldLoad(aim, points.load_specs(workload, point, redis_benchmark.NAME))
        counted = frozenset({"get"})
        try:
            problem = load.wait_flowing(lambda: windows.read(client, counted).ops)
            if problem:
                sys.exit(problem)
            load.resume()
            time.sleep(2.0)  # warm-up
            readings = []
            start = time.monotonic()
            while time.monotonic() - start < seconds:
                readings.append(windows.read(client, counted))
                time.sleep(max(0.0, readings[0].at + len(readings) * tick - time.monotonic()))
        finally:
            load.close()
            client.close()
    return readings


def rates(readings: list[windows.Reading], every: int) -> list[float]:
    """Throughput of consecutive windows of ``every`` ticks each."""
    out = []
    for i in range(0, len(readings) - every, every):
        a, b = readings[i], readings[i + every]
        out.append((b.ops - a.ops) / (b.at - a.at))
    return out


def spread(logs: list[float], k: int) -> float | None:
    diffs = [logs[i + k] - logs[i] for i in range(len(logs) - k)]
    return statistics.stdev(diffs) / math.sqrt(2) if len(diffs) > 2 else None


def ideal_pairing(logs: list[float], length: float) -> tuple[float, float]:
    """sd of one A B B A group's log ratio, and of a 60-s estimate made of such groups."""
    values = [math.exp(v) for v in logs]
    groups = [
        math.log((values[i + 1] + values[i + 2]) / (values[i] + values[i + 3]))
        for i in range(0, len(values) - 3, 4)
    ]
    sd = statistics.stdev(groups)
    per_minute = 60.0 / (4 * length)
    return sd, sd / math.sqrt(per_minute)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default=shutil.which("redis-server"))
    parser.add_argument("--seconds", type=float, default=180.0)
    parser.add_argument("--tick", type=float, default=0.1)
    parser.add_argument("--pipeline", type=int, default=10)
    args = parser.parse_args()
    if not args.server:
        sys.exit("no redis-server: install redis-server or pass --server PATH")
    readings = sample(args.server, args.seconds, args.tick, args.pipeline)
    whole = (readings[-1].ops - readings[0].ops) / (readings[-1].at - readings[0].at)
    busy = (readings[-1].cpu_s - readings[0].cpu_s) / (readings[-1].at - readings[0].at)
    print(
        f"{args.server}, GET pipeline {args.pipeline}, {args.seconds:.0f} s read every "
        f"{args.tick} s: {whole:,.0f} ops/s, server busy {100 * busy:.0f}%"
    )
    print("\n1. per-window sd of log throughput, windows some time apart (from differences)\n")
    print("| window | " + " | ".join(f"{a:g} s apart" for a in APART) + " |")
    print("|---" * (len(APART) + 1) + "|")
    ideal = []
    for length in LENGTHS:
        every = max(1, round(length / args.tick))
        logs = [math.log(r) for r in rates(readings, every) if r > 0]
        cells = []
        for apart in APART:
            k = round(apart / length)
            value = spread(logs, k) if k >= 1 and abs(k * length - apart) < 1e-9 else None
            cells.append(f"{100 * value:.2f}%" if value is not None else "")
        print(f"| {length:g} s | " + " | ".join(cells) + " |")
        ideal.append((length, *ideal_pairing(logs, length)))
    print("\n2. an ideal A B B A pairing of this server with itself (no switching cost)\n")
    print("| window | sd of one group | sd of a 60-s estimate |")
    print("|---|---|---|")
    for length, group_sd, minute_sd in ideal:
        print(f"| {length:g} s | {100 * group_sd:.2f}% | {100 * minute_sd:.2f}% |")


if __name__ == "__main__":
    main()
