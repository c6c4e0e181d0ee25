#!/usr/bin/env python3
"""What moving the load costs: two servers of one binary paired in time (bench/windows.py)
against one of them under continuous load, at one GET pipeline and window length.

Two redis-servers (the installed one, or --server) on CPU 0, populated like the GET
sweep, each with its own held redis-benchmark on CPU 1; a warm-up of 2 groups, then
--seconds of A B B A windows, then server a alone, continuously, for 3 s. Prints ops/s
and CPU shares of both (docs/methodology.md quotes them); it asserts nothing.

    .venv/bin/python benchmarks/switch_cost.py [--pipeline 10] [--window 0.1]
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import time

from regtrack.bench import setup, windows
from regtrack.bench.loadgen import redis_benchmark
from regtrack.bench.loadgen.base import Aim
from regtrack.bench.loadgen.held import HeldLoad
from regtrack.bench.runtimes.native import native_server
from regtrack.workloads import points
from regtrack.workloads.files import load_workload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default=shutil.which("redis-server"))
    parser.add_argument("--pipeline", type=int, default=10)
    parser.add_argument("--window", type=float, default=0.1)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    workload = load_workload("get-pipeline", pipelines=[args.pipeline])
    point = points.points(workload)[0]
    with contextlib.ExitStack() as stack:
        lanes = []
        for label in "ab":
            server = stack.enter_context(native_server(args.server, (0,)))
            client = server.client(timeout=600)
            stack.callback(client.close)
            setup.prepare_server(client, workload, redis_benchmark.NAME)
            aim = Aim(redis_benchmark.locate(), server.host, server.port, (1,), server.alive)
            load = HeldLoad(aim, points.load_specs(workload, point, redis_benchmark.NAME))
            stack.callback(load.close)
            lane = windows.Lane(label, client, load, frozenset({"get"}))
            problem = load.wait_flowing(lambda lane=lane: lane.reading().ops)
            if problem:
                raise SystemExit(problem)
            lanes.append(lane)
        windows.alternate(lanes, 2, args.window)
        groups = windows.groups_for(args.seconds, args.window)
        measured = windows.alternate(lanes, groups, args.window)
        print(f"GET pipeline {args.pipeline}, {args.window:g}-s windows, {groups} groups:")
        for lane in lanes:
            t = windows.totals(measured, lane.label)
            print(
                f"  paired     {lane.label}: {t.ops_per_sec:,.0f} ops/s, server "
                f"{t.pct(t.server_cpu_s):.0f}%, client {t.pct(t.client_cpu_s):.0f}%"
            )
        a = lanes[0]
        a.load.resume()
        first, cpu = a.reading(), a.load.cpu_seconds()
        time.sleep(3.0)
        last, cpu_last = a.reading(), a.load.cpu_seconds()
        a.load.pause()
        span = last.at - first.at
        print(
            f"  continuous a: {(last.ops - first.ops) / span:,.0f} ops/s, server "
            f"{100 * (last.cpu_s - first.cpu_s) / span:.0f}%, client "
            f"{100 * (cpu_last - cpu) / span:.0f}%"
        )


if __name__ == "__main__":
    main()
