#!/usr/bin/env python3
"""Where does an open-loop p99 come from on this host: the server, or the CPUs' hiccups?

1. Each CPU alone: a thread pinned to it spins on the monotonic clock for --spin seconds
   and counts the gaps in which it did not run (another task, an interrupt, the
   hypervisor): how many per second over 20 us .. 5 ms, and the longest.
2. The engine against one redis-server at --rate for --duration seconds, the server on
   one CPU and the engine on the other, then swapped: latency from the intended time
   (p50, p99, p99.9, max) beside the engine's own lag (how late it wrote).

A hiccup of the engine's CPU delays every request due or answered meanwhile: at 22,000/s a
3-ms stall is 66 requests, so a few stalls a second move p99 by milliseconds while p50
does not move. Prints every figure; asserts nothing.

    benchmarks/cpu_hiccups.py --rate 22000 --duration 10
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENGINE = ROOT / ".venv" / "bin" / "regtrack-openloop"
PORT = 16_517
SPIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(int argc, char **argv) {
    double secs = atof(argv[1]), t0 = now(), prev = t0, end = t0 + secs, worst = 0;
    double lim[6] = {20e-6, 100e-6, 500e-6, 1e-3, 2e-3, 5e-3}, lost[6] = {0};
    long n[6] = {0};
    for (;;) {
        double t = now(), gap = t - prev; prev = t;
        if (t > end) break;
        if (gap > worst) worst = gap;
        for (int i = 0; i < 6; i++) if (gap > lim[i]) { n[i]++; lost[i] += gap; }
    }
    printf("max gap %.2f ms;", worst * 1e3);
    for (int i = 0; i < 6; i++)
        printf(" >%.0fus %.2f/s (%.3f%%)", lim[i] * 1e6, n[i] / secs, 100 * lost[i] / secs);
    printf("\n");
    return 0;
}
"""


def spin(exe: Path, cpu: int, seconds: float) -> str:
    out = subprocess.run(["taskset", "-c", str(cpu), str(exe), str(seconds)],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return out.stdout.strip()


def engine_run(server_cpu: int, engine_cpu: int, rate: float, duration: float, tmp: Path) -> str:
    server = subprocess.Popen(
        ["taskset", "-c", str(server_cpu), shutil.which("redis-server") or "redis-server",
         "--port", str(PORT), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--logfile", ""],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(100):
            ping = subprocess.run(["redis-cli", "-p", str(PORT), "ping"], capture_output=True)
            if ping.stdout.strip() == b"PONG":
                break
            time.sleep(0.05)
        subprocess.run(["redis-cli", "-p", str(PORT), "debug", "populate", "1000", "key:", "32"],
                       capture_output=True, check=True)  # fmt: skip
        spec = tmp / "spec.json"
        spec.write_text(json.dumps({"key_prefix": "key:", "key_min": 0, "key_max": 999,
                                    "data_size": 32, "commands": []}))  # fmt: skip
        out = subprocess.run(
            ["taskset", "-c", str(engine_cpu), str(ENGINE), "--spec", str(spec), "--port",
             str(PORT), "--rate", str(rate), "--duration", str(duration), "--warmup", "1"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
    finally:
        server.terminate()
        server.wait()
    report = json.loads(out)
    lat, lag = report["latency_us"], report["lag_us"]
    return (
        f"latency p50 {lat['p50']:.0f} us, p99 {lat['p99']:.0f}, p99.9 {lat['p999']:.0f}, "
        f"max {lat['max']:.0f}; engine lag p99 {lag['p99']:.0f} us, max {lag['max']:.0f}; "
        f"engine busy {100 * report['cpu']['busy_fraction']:.0f}%"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spin", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=22_000.0)
    parser.add_argument("--duration", type=float, default=10.0)
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))[:2]
    with tempfile.TemporaryDirectory(prefix="hiccups-") as tmp:
        exe = Path(tmp) / "spin"
        (Path(tmp) / "spin.c").write_text(SPIN)
        subprocess.run(["cc", "-O2", "-o", str(exe), str(Path(tmp) / "spin.c")], check=True)
        print(f"1. a spinning thread, {args.spin:g} s per CPU:")
        for cpu in cpus:
            print(f"   CPU {cpu}: {spin(exe, cpu, args.spin)}")
        print(f"2. the engine at {args.rate:,.0f}/s for {args.duration:g} s, GET, 4 connections:")
        for server_cpu, engine_cpu in ((cpus[0], cpus[1]), (cpus[1], cpus[0])):
            line = engine_run(server_cpu, engine_cpu, args.rate, args.duration, Path(tmp))
            print(f"   server CPU {server_cpu}, engine CPU {engine_cpu}: {line}")


if __name__ == "__main__":
    main()
