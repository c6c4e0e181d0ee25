#!/usr/bin/env python3
"""What `regtrack mix capture --sample` costs a busy server, and that it stops at its bound.

A 7.0.15 redis-server (regtrack's build of the offline sources; --server to choose
another) on CPU 0, memtier_benchmark on CPU 1 sending GET at pipeline 10 with 50
connections, flat out; the capture runs as a user runs it (the regtrack command line,
pinned to CPU 1 beside memtier: on this 2-core VM no CPU is left for it). A poller reads
INFO commandstats, the server's CPU time (/proc) and whether a MONITOR client is
connected (CLIENT LIST, flag O) every 0.25 s, so throughput and server CPU per GET
are split into before, during and after the sample. Run once bounded by time
(--sample S) and once by count (--sample-commands N). Prints; asserts nothing.

    .venv/bin/python benchmarks/capture_overhead.py [--sample 3] [--count 20000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import redis

CACHE = Path.home() / ".cache" / "regtrack"
SERVER_CPU, CLIENT_CPU = "0", "1"
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Poll:
    t: float
    gets: int
    cpu_s: float
    monitors: int
    used_memory: int


def build_7015() -> str:
    """regtrack's cached build of 7.0.15 from the offline sources."""
    repo = CACHE / "offline-redis"
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "7.0.15^{commit}"],
                            capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    for found in sorted((CACHE / "builds").glob(f"{commit[:12]}-*/src/src/redis-server")):
        return str(found)
    sys.exit(
        f"no build of 7.0.15 ({commit[:12]}) in {CACHE / 'builds'}: run `regtrack run "
        "--versions 7.0.15 --duration 1 --repetitions 1` once, or give --server"
    )


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def poll(client: redis.Redis, pid: int, stop: threading.Event, out: list[Poll]) -> None:
    while not stop.is_set():
        stats = client.info("commandstats").get("cmdstat_get", {})
        lines = [c for c in client.client_list() if "O" in str(c.get("flags", ""))]
        memory = int(client.info("memory")["used_memory"])
        out.append(Poll(time.monotonic(), int(stats.get("calls", 0)), cpu_seconds(pid),
                        len(lines), memory))  # fmt: skip
        time.sleep(0.25)


def window(polls: list[Poll]) -> tuple[float, float, float]:
    """ops/s, server CPU %, server CPU µs per GET over ``polls``."""
    a, b = polls[0], polls[-1]
    dt, gets, cpu = b.t - a.t, b.gets - a.gets, b.cpu_s - a.cpu_s
    return gets / dt, 100 * cpu / dt, 1e6 * cpu / max(gets, 1)


def one(server: str, memtier: str, bound: list[str], test_time: int, tmp: Path) -> None:
    port = 23000 + os.getpid() % 1000
    proc = subprocess.Popen(["taskset", "-c", SERVER_CPU, server, "--port", str(port), "--bind",
                             "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(tmp)],
                            stdout=subprocess.DEVNULL)  # fmt: skip
    client = redis.Redis(port=port, socket_timeout=10)
    polls: list[Poll] = []
    stop = threading.Event()
    try:
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        pipe = client.pipeline(transaction=False)
        for i in range(10_000):
            pipe.set(f"memtier-{i}", b"v" * 100)
        pipe.execute()
        load = subprocess.Popen(
            ["taskset", "-c", CLIENT_CPU, memtier, "-s", "127.0.0.1", "-p", str(port),
             "--ratio", "0:1", "--pipeline", "10", "-c", "50", "-t", "1", "--key-minimum",
             "1", "--key-maximum", "9999", "--test-time", str(test_time),
             "--hide-histogram"],
            stdout=subprocess.DEVNULL, stderr=(tmp / "memtier.err").open("w"),
        )  # fmt: skip
        poller = threading.Thread(target=poll, args=(client, proc.pid, stop, polls), daemon=True)
        poller.start()
        time.sleep(5)
        started = time.monotonic()
        cap = subprocess.run(
            ["taskset", "-c", CLIENT_CPU, sys.executable, "-m", "regtrack", "mix", "capture",
             "--url", f"redis://127.0.0.1:{port}", *bound, "--out", str(tmp / "sampled.toml")],
            capture_output=True, text=True, check=False, timeout=300,
        )  # fmt: skip
        wall = time.monotonic() - started
        time.sleep(3)
        stop.set()
        poller.join(5)
        if load.poll() is not None:
            sys.exit(f"memtier_benchmark ended early: {(tmp / 'memtier.err').read_text()[-2000:]}")
        load.terminate()
        load.wait(30)
    finally:
        stop.set()
        client.close()
        proc.terminate()
        proc.wait(10)
    before = [p for p in polls if p.t < started and p.monitors == 0][6:]  # memtier warmed up
    during = [p for p in polls if p.monitors > 0]
    after = [p for p in polls if p.t > started + wall and p.monitors == 0]
    print(f"\n$ regtrack mix capture --url redis://127.0.0.1:PORT {' '.join(bound)} --out ...")
    print(f"  exit {cap.returncode} after {wall:.1f} s: {(cap.stdout + cap.stderr).strip()}")
    print(f"  MONITOR connected for {len(during)} polls of 0.25 s; peak used_memory "
          f"{max(p.used_memory for p in polls) / 2**20:.1f} MiB "
          f"(before: {max(p.used_memory for p in before) / 2**20:.1f} MiB)")  # fmt: skip
    print("  | window | GET ops/s | server CPU | server CPU per GET |")
    print("  | --- | ---: | ---: | ---: |")
    for name, ps in (("before", before), ("during the sample", during), ("after", after)):
        if len(ps) >= 2:
            ops, busy, per = window(ps)
            print(f"  | {name} | {ops:,.0f} | {busy:.0f}% | {per:.2f} µs |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", help="redis-server (default: regtrack's 7.0.15 build)")
    parser.add_argument("--sample", type=float, default=3.0, help="seconds of the time bound")
    parser.add_argument("--count", type=int, default=20_000, help="commands of the count bound")
    args = parser.parse_args()
    server = args.server or build_7015()
    memtier = shutil.which("memtier_benchmark") or str(
        Path(sys.executable).parent / "memtier_benchmark"
    )
    version = subprocess.run([server, "--version"], capture_output=True, text=True).stdout.strip()
    print(
        f"server: {version} ({server}) on CPU {SERVER_CPU}; memtier GET pipeline 10, "
        f"50 connections, 1 thread on CPU {CLIENT_CPU}; the capture on CPU {CLIENT_CPU}"
    )
    with tempfile.TemporaryDirectory(prefix="capture-overhead-") as tmp:
        one(server, memtier, ["--sample", str(args.sample)], 60, Path(tmp))
        one(server, memtier, ["--sample", "60", "--sample-commands", str(args.count)], 60,
            Path(tmp))  # fmt: skip


if __name__ == "__main__":
    main()
