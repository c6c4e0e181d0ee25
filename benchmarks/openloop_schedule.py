#!/usr/bin/env python3
"""Does regtrack-openloop keep its schedule on one client CPU at 50% and 80% of a server's
GET pipeline-1 capacity (issue 47: "at no less than 80%, or say at which rate it stops")?

redis-server 7.0.15 (built from the offline sources, as the tests build it) is pinned to
CPU 0, every client to CPU 1. First memtier_benchmark measures the closed-loop capacity
(GET, pipeline 1, 4 connections, 1 thread); then the engine runs --trials Poisson trials
at each load, alternating 50% and 80% so drift hits both alike. Per trial: the rate it
achieved, its schedule lag p99, its own CPU share, `behind`, the latency p99, and what
else ran on CPU 1 meanwhile (another process there delays the engine's wake-ups; a trial
where others took over 5% is disturbed and not counted). If the engine fell behind in most
undisturbed 80% trials, a bisection between 50% and 80% finds the rate where it stops
(one trial or two behind at every load is this VM's stalls, not the rate); with --search it
also bisects above 80%, up to 160% of the capacity (memtier with 4 connections may be the
limit of its own measurement rather than the server).

    flock /tmp/regtrack-tests.lock .venv/bin/python benchmarks/openloop_schedule.py
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from regtrack.core import procs  # noqa: E402
from regtrack.targets.build import build_commit  # noqa: E402
from regtrack.targets.sources import SourceRepo, cache_root  # noqa: E402

ENGINE = ROOT / ".venv" / "bin" / "regtrack-openloop"
MEMTIER = ROOT / ".venv" / "bin" / "memtier_benchmark"
KEYS = 100_000
SPEC = {"key_prefix": "key:", "key_min": 0, "key_max": KEYS - 1}
# Other processes took more than this share of CPU 1 during a trial: it measured them too
# (this machine's other work is not under the benchmark lock), and does not count.
DISTURBED = 0.05


def server_binary(version: str, flags: list[str]) -> str:
    """``version`` built from the offline source repository in regtrack's cache (made
    from the pinned archives first if it is missing), as tests/conftest.py builds it."""
    repo_dir = cache_root() / "offline-redis"
    if not repo_dir.is_dir():
        env = dict(os.environ)
        shared = ROOT.parent / "shared" / "sources"
        if shared.is_dir():
            env.setdefault("REGTRACK_SOURCE_ARCHIVES", str(shared))
        subprocess.run(
            [sys.executable, "-m", "regtrack", "sources", "offline", "redis", str(repo_dir),
             "--work", str(cache_root() / "offline-sources")],
            check=True, env=env,
        )  # fmt: skip
    repo = SourceRepo(str(repo_dir))
    return build_commit(repo, repo.resolve(version).commit, flags).server


def cpu_ticks(cpu: int) -> tuple[int, int]:
    """(busy, total) jiffies of one CPU so far (/proc/stat)."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{cpu} "):
            values = [int(v) for v in line.split()[1:]]
            idle = values[3] + values[4]  # idle + iowait
            return sum(values) - idle, sum(values)
    raise RuntimeError(f"no cpu{cpu} in /proc/stat")


def process_ticks(pid: int) -> int:
    """utime + stime of a process so far, in jiffies."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


class Server:
    """redis-server pinned to CPU 0 on loopback, KEYS keys of 32 bytes populated."""

    def __init__(self, binary: str, workdir: str):
        self.port = procs.free_port()
        self.proc = subprocess.Popen(
            ["taskset", "-c", "0", binary, "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--enable-debug-command", "yes",
             "--dir", workdir],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(port=self.port, socket_timeout=30)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        client.execute_command("DEBUG", "POPULATE", KEYS, "key", 32)
        self.version = client.info("server")["redis_version"]
        client.close()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def capacity(server: Server, seconds: int) -> tuple[float, float]:
    """memtier_benchmark's closed-loop GET rate at pipeline 1 (4 connections, 1 thread,
    on CPU 1), and the server's CPU share meanwhile: near 1 if the server was the limit."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "memtier.json"
        before, t0 = process_ticks(server.proc.pid), time.monotonic()
        subprocess.run(
            ["taskset", "-c", "1", str(MEMTIER), "-s", "127.0.0.1", "-p", str(server.port),
             "--protocol=redis", "-t", "1", "-c", "4", "--pipeline", "1", "--ratio", "0:1",
             "--key-prefix", "key:", "--key-minimum", "1", "--key-maximum", str(KEYS - 1),
             "--key-pattern", "R:R", "--test-time", str(seconds), "--hide-histogram",
             "--json-out-file", str(out)],
            check=True, capture_output=True,
        )  # fmt: skip
        busy = (process_ticks(server.proc.pid) - before) / os.sysconf("SC_CLK_TCK")
        wall = time.monotonic() - t0
        data = json.loads(out.read_text())
    return float(data["ALL STATS"]["Totals"]["Ops/sec"]), busy / wall


def trial(server: Server, spec: str, rate: float, seconds: float, seed: int) -> dict:
    """One engine run on CPU 1: its report, and the share of CPU 1 that others took."""
    busy0, total0 = cpu_ticks(1)
    proc = subprocess.run(
        ["taskset", "-c", "1", str(ENGINE), "--port", str(server.port), "--spec", spec,
         "--rate", f"{rate:.0f}", "--arrival", "poisson", "--connections", "4",
         "--duration", str(seconds), "--warmup", "1", "--seed", str(seed)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    busy1, total1 = cpu_ticks(1)
    if proc.returncode != 0:
        raise SystemExit(f"regtrack-openloop failed: {proc.stderr.strip()}")
    report = json.loads(proc.stdout)
    cpu1 = (busy1 - busy0) / max(1, total1 - total0)
    report["others_cpu1"] = max(0.0, cpu1 - report["cpu"]["busy_fraction"])
    report["disturbed"] = report["others_cpu1"] > DISTURBED
    return report


def line(label: str, r: dict) -> str:
    return (
        f"{label:<10} {r['rate_intended']:>9,.0f} {r['achieved_rate']:>10,.0f} "
        f"{r['lag_us']['p99']:>9.1f} {r['lag_us']['max']:>9.0f} "
        f"{r['cpu']['busy_fraction'] * 100:>6.1f}% {r['others_cpu1'] * 100:>6.1f}% "
        f"{r['behind']!s:>6} {r['latency_us']['p99']:>10.1f}"
        + ("  disturbed" if r["disturbed"] else "")
    )


HEADER = (
    f"{'trial':<10} {'rate':>9} {'achieved':>10} {'lag p99':>9} {'lag max':>9} "
    f"{'engine':>7} {'others':>7} {'behind':>6} {'p99 (us)':>10}"
)


def summary(label: str, rows: list[dict]) -> str:
    def med(f) -> float:
        return statistics.median(f(r) for r in rows)

    disturbed = sum(r["disturbed"] for r in rows)
    rows = [r for r in rows if not r["disturbed"]] or rows
    behind = sum(r["behind"] for r in rows)
    worst = max(r["lag_us"]["p99"] for r in rows)
    return (
        f"{label}: {disturbed} trials disturbed (others > {DISTURBED:.0%} of CPU 1); of the "
        f"{len(rows)} others: behind in {behind}; median achieved "
        f"{med(lambda r: r['achieved_rate'] / r['rate_intended']) * 100:.2f}% of intended, "
        f"lag p99 median {med(lambda r: r['lag_us']['p99']):.1f} us (worst {worst:.1f}), "
        f"engine CPU median {med(lambda r: r['cpu']['busy_fraction']) * 100:.1f}%, "
        f"latency p99 median {med(lambda r: r['latency_us']['p99']):.1f} us"
    )


def search(server: Server, spec: str, good: float, bad: float, seconds: float) -> float:
    """Bisect the highest rate the engine keeps (not behind) between ``good`` and ``bad``."""
    print(f"\nsearching the rate where it stops keeping its schedule ({seconds:g} s trials)")
    print(HEADER)
    for step in range(6):
        rate = (good + bad) / 2
        r = trial(server, spec, rate, seconds, seed=100 + step)
        for _ in range(3):  # again while it measured other processes too
            if not r["disturbed"]:
                break
            print(line(f"search {step + 1}", r), flush=True)
            r = trial(server, spec, rate, seconds, seed=100 + step)
        print(line(f"search {step + 1}", r), flush=True)
        good, bad = (rate, bad) if not r["behind"] else (good, rate)
    return good


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default="7.0.15")
    parser.add_argument("--build-flags", default="MALLOC=libc", help="as the tests build")
    parser.add_argument("--server", help="a redis-server binary instead of building --version")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--capacity-seconds", type=int, default=10)
    parser.add_argument("--loads", default="0.5,0.8")
    parser.add_argument("--search", action="store_true", help="bisect even if 80%% keeps")
    args = parser.parse_args()
    for tool in (ENGINE, MEMTIER):
        if not tool.is_file():
            raise SystemExit(f"{tool} is missing: run scripts/install.sh")
    binary = args.server or server_binary(args.version, args.build_flags.split())
    loads = [float(x) for x in args.loads.split(",")]
    with tempfile.TemporaryDirectory(prefix="openloop-") as tmp:
        spec = Path(tmp) / "get.json"
        spec.write_text(json.dumps(SPEC))
        server = Server(binary, tmp)
        try:
            engine = subprocess.run([str(ENGINE), "--version"], capture_output=True, text=True)
            print(f"server: redis {server.version} ({binary}) on CPU 0; clients on CPU 1; "
                  f"{engine.stdout.strip()}; {KEYS:,} keys of 32 bytes")  # fmt: skip
            cap, server_busy = capacity(server, args.capacity_seconds)
            print(f"capacity: memtier_benchmark GET pipeline 1, 4 connections, 1 thread, "
                  f"{args.capacity_seconds} s: {cap:,.0f} ops/s "
                  f"(server CPU {server_busy * 100:.0f}%)\n")  # fmt: skip
            print(HEADER)
            rows: dict[float, list[dict]] = {load: [] for load in loads}
            for i in range(args.trials):
                for load in loads if i % 2 == 0 else loads[::-1]:
                    r = trial(server, str(spec), load * cap, args.seconds, seed=i + 1)
                    rows[load].append(r)
                    print(line(f"{load:.0%} #{i + 1}", r), flush=True)
            print()
            for load in loads:
                print(summary(f"{load:.0%} of capacity ({load * cap:,.0f}/s)", rows[load]))
            top = max(loads)
            # it cannot keep a load where most undisturbed trials fell behind: this VM's
            # stalls put a trial or two over the line at every load, 50% as often as 80%
            kept = [not r["behind"] for r in rows[top] if not r["disturbed"]]
            top_behind = sum(kept) <= len(kept) / 2
            if args.search or top_behind:
                # above the top load when it kept, below it when it did not
                low, high = (min(loads), top) if top_behind else (top, 1.6)
                kept = search(server, str(spec), low * cap, high * cap, args.seconds / 2)
                print(f"keeps its schedule up to about {kept:,.0f}/s "
                      f"({kept / cap:.0%} of capacity)")  # fmt: skip
            else:
                print(f"kept its schedule at {top:.0%} of capacity in every undisturbed trial")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
