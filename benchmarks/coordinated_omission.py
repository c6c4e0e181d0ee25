#!/usr/bin/env python3
"""Coordinated omission, measured: one server pause seen by memtier_benchmark --rate-limiting
and by the open-loop engine (regtrack-openloop), side by side.

One redis-server (the installed one, or --server) pinned to CPU 0 holds 1,000 keys; each load
generator, pinned to CPU 1, sends GETs at --rate over --connections for --duration seconds,
and --pause-at seconds into its run a side connection sends `DEBUG SLEEP --pause`. Requests
were due at a steady rate throughout, so a fraction pause/duration of them fell in the pause
and each of those waited up to the pause: a tool that times requests from their intended send
reports p99 near pause * (1 - 0.01 / fraction); one that sends only when a reply frees a slot,
timing from the actual send, sees a handful of slow requests and a p99 of microseconds.
issue 47 asks for this comparison; docs/openloop-engine.md quotes its output. It asserts
nothing (tests/ test the engine); run it under the benchmark lock:

    flock /tmp/regtrack-tests.lock .venv/bin/python benchmarks/coordinated_omission.py

Exit 2: bad usage; exit 3: could not measure (a binary missing, a tool failed), one line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import redis

KEYS = 1000
VALUE_BYTES = 32
SERVER_CPU, CLIENT_CPU = "0", "1"
ENGINE_BUILD = "/work/wt-engine/engine/target/release/regtrack-openloop"


@dataclass(frozen=True)
class Result:
    """One tool's view of the scenario: request count and latencies in ms."""

    tool: str
    requests: int
    rate: float
    p50: float | None
    p99: float | None
    p999: float | None
    max: float | None


@dataclass(frozen=True)
class Pause:
    """When the side connection's DEBUG SLEEP started and how long it held the server."""

    started_s: float
    held_s: float


def fail(message: str) -> NoReturn:
    """Could not measure: one line, exit 3 (regtrack's code for it)."""
    print(f"coordinated_omission: {message}", file=sys.stderr)
    sys.exit(3)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(binary: str, port: int, workdir: Path) -> subprocess.Popen[bytes]:
    """redis-server on CPU 0 without persistence, DEBUG allowed (7.0 refuses it by default)."""
    argv = ["taskset", "-c", SERVER_CPU, binary, "--port", str(port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", str(workdir)]  # fmt: skip
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True)
    major = int(version.stdout.split("v=")[1].split(".")[0])
    if major >= 7:
        argv += ["--enable-debug-command", "yes"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    else:
        proc.kill()
        proc.wait()
        fail(f"redis-server on port {port} did not answer PING")
    try:
        client.execute_command("DEBUG", "POPULATE", KEYS, "key", VALUE_BYTES)
    except redis.RedisError as error:
        proc.kill()
        proc.wait()
        fail(f"DEBUG POPULATE refused: {error}")
    return proc


def pause_later(port: int, at_s: float, pause_s: float, out: list[Pause]) -> threading.Thread:
    """A thread that sends DEBUG SLEEP pause_s at at_s from now, from its own connection."""
    client = redis.Redis(port=port)
    client.ping()
    t0 = time.monotonic()

    def run() -> None:
        time.sleep(max(0.0, at_s - (time.monotonic() - t0)))
        started = time.monotonic()
        client.execute_command("DEBUG", "SLEEP", f"{pause_s}")
        out.append(Pause(started - t0, time.monotonic() - started))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def run_with_pause(argv: list[str], port: int, args: argparse.Namespace) -> tuple[str, Pause]:
    """Run one load generator on CPU 1 while the side connection pauses the server."""
    pauses: list[Pause] = []
    side = pause_later(port, args.pause_at, args.pause, pauses)
    try:
        proc = subprocess.run(["taskset", "-c", CLIENT_CPU, *argv], capture_output=True,
                              text=True, timeout=args.duration + 60, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        fail(f"{argv[0]} ran past {args.duration + 60:g} s")
    side.join(timeout=args.pause + 5)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        fail(f"{argv[0]} exited {proc.returncode}: {last}")
    if not pauses:
        fail("the side connection's DEBUG SLEEP did not return")
    return proc.stdout, pauses[0]


def memtier(path: str, port: int, args: argparse.Namespace, tmp: Path) -> tuple[Result, Pause]:
    """memtier_benchmark with --rate-limiting: one thread, the rate split over the connections."""
    out = tmp / "memtier.json"
    argv = [path, "-s", "127.0.0.1", "-p", str(port), "--protocol=redis", "-t", "1",
            "-c", str(args.connections), "--pipeline=1",
            f"--rate-limiting={round(args.rate / args.connections)}",
            f"--test-time={round(args.duration)}", "--ratio=0:1", "--key-prefix=key:",
            "--key-minimum=1", f"--key-maximum={KEYS - 1}", "--key-pattern=R:R",
            "--distinct-client-seed", "--hide-histogram",
            "--print-percentiles", "50,99,99.9", f"--json-out-file={out}"]  # fmt: skip
    _, pause = run_with_pause(argv, port, args)
    totals = json.loads(out.read_text())["ALL STATS"]["Totals"]
    pct = totals["Percentile Latencies"]
    result = Result("memtier --rate-limiting", int(totals["Count"]), float(totals["Ops/sec"]),
                    pct["p50.00"], pct["p99.00"], pct["p99.90"], totals["Max Latency"])  # fmt: skip
    return result, pause


def engine(path: str, port: int, args: argparse.Namespace, tmp: Path) -> tuple[Result, Pause]:
    """regtrack-openloop: the same GETs scheduled at intended times, timed from them."""
    spec = tmp / "get.json"
    spec.write_text(json.dumps({"key_prefix": "key:", "key_min": 1, "key_max": KEYS - 1}))
    argv = [path, "--spec", str(spec), "--host", "127.0.0.1", "--port", str(port),
            "--rate", str(args.rate), "--connections", str(args.connections),
            "--arrival", args.arrival, "--duration", str(args.duration), "--warmup", "0",
            "--seed", "1"]  # fmt: skip
    stdout, pause = run_with_pause(argv, port, args)
    report = json.loads(stdout)
    lat = report["latency_us"]
    result = Result(f"regtrack-openloop ({args.arrival})", int(lat["count"]),
                    float(report["achieved_rate"]), lat["p50"] / 1000, lat["p99"] / 1000,
                    lat["p999"] / 1000, lat["max"] / 1000)  # fmt: skip
    return result, pause


def resp_benchmark(path: str, port: int, args: argparse.Namespace) -> tuple[Result, Pause]:
    """resp-benchmark -t: its summary line (0.2.5) has count, qps, avg and p99 only.

    Its keys (key_0000000000...) are not the populated ones: every GET is a miss, which
    costs the server about what a hit does and does not change what a pause does.
    """
    # --cores indexes the CPUs this process may use: under taskset -c 1, "0" is CPU 1.
    argv = [path, "-h", "127.0.0.1", "-p", str(port), "--cores", "0",
            "-c", str(args.connections), "-t", str(round(args.rate)),
            "-s", str(round(args.duration)), f"GET {{key uniform {KEYS}}}"]  # fmt: skip
    stdout, pause = run_with_pause(argv, port, args)
    plain = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", stdout)  # its progress lines redraw
    summaries = [line for line in plain.splitlines() if "cnt:" in line]
    found = dict(re.findall(r"(\w+): ([^,]+)", summaries[-1])) if summaries else {}
    if not {"cnt", "qps", "p99"} <= found.keys():
        fail(f"{path}: no summary line with cnt, qps and p99 in its output")

    def ms(text: str) -> float:
        number = float(text.strip("<>ms"))
        return number * 1000 if text.endswith("s") and not text.endswith("ms") else number

    qps = float(re.findall(r"[\d.]+", found["qps"])[0])
    result = Result("resp-benchmark -t", int(found["cnt"]), qps, None,
                    ms(found["p99"]), None, None)  # fmt: skip
    return result, pause


def expected(args: argparse.Namespace) -> list[str]:
    """What an open-loop measurement must show: the pause spread over the requests due in it."""
    fraction = args.pause / args.duration
    pause_ms = args.pause * 1000

    def at(q: float) -> str:
        tail = 1 - q
        return f"{pause_ms * (1 - tail / fraction):.0f} ms" if tail < fraction else "baseline"

    return [
        f"expected: {fraction:.1%} of requests ({args.rate * args.pause:.0f} of "
        f"{args.rate * args.duration:.0f}) were due during the {pause_ms:.0f} ms pause, each "
        f"delayed by up to {pause_ms:.0f} ms",
        f"          so p50 stays at baseline, p99 ~ {at(0.99)}, p99.9 ~ {at(0.999)}, "
        f"max ~ {pause_ms:.0f} ms",
    ]


def engine_path(given: str | None) -> str:
    """--engine, $REGTRACK_OPENLOOP, .venv/bin/regtrack-openloop, then the engine build."""
    if given and not os.access(given, os.X_OK):
        fail(f"--engine: {given} is not an executable")
    venv = Path(__file__).resolve().parent.parent / ".venv" / "bin" / "regtrack-openloop"
    for candidate in (given, os.environ.get("REGTRACK_OPENLOOP"), str(venv), ENGINE_BUILD):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    fail("no regtrack-openloop: pass --engine PATH or set REGTRACK_OPENLOOP")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=2000.0, help="GETs per second in all")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per tool")
    parser.add_argument("--pause", type=float, default=0.2, help="DEBUG SLEEP seconds")
    parser.add_argument("--pause-at", type=float, default=1.0, help="seconds into each run")
    parser.add_argument("--arrival", choices=("constant", "poisson"), default="constant")
    parser.add_argument("--server", default=shutil.which("redis-server"))
    parser.add_argument("--memtier", default=str(Path(sys.prefix) / "bin" / "memtier_benchmark"))
    parser.add_argument("--engine", help="regtrack-openloop binary")
    parser.add_argument("--resp-benchmark", help="resp-benchmark (PyPI) CLI: a third row")
    args = parser.parse_args()
    if args.rate <= 0 or args.connections < 1 or args.pause <= 0:
        parser.error("--rate, --connections and --pause must be positive")
    if args.pause_at < 0 or args.pause_at + args.pause >= args.duration:
        parser.error("the pause must start and end inside --duration")
    engine_bin = engine_path(args.engine)
    for name, binary in (("--server", args.server), ("--memtier", args.memtier),
                         ("--resp-benchmark", args.resp_benchmark or sys.executable)):  # fmt: skip
        if not binary or not os.access(binary, os.X_OK):
            fail(f"{name}: {binary or 'redis-server is not on PATH'} is not an executable")
    with tempfile.TemporaryDirectory(prefix="co-") as tmp_name:
        tmp = Path(tmp_name)
        port = free_port()
        server: subprocess.Popen[bytes] | None = None
        try:
            server = start_server(args.server, port, tmp)
            runs = [memtier(args.memtier, port, args, tmp), engine(engine_bin, port, args, tmp)]
            if args.resp_benchmark:
                runs.append(resp_benchmark(args.resp_benchmark, port, args))
        finally:
            if server is not None:
                server.terminate()
                server.wait(timeout=10)
    print(f"GET at {args.rate:.0f}/s over {args.connections} connections for "
          f"{args.duration:g} s; DEBUG SLEEP {args.pause:g} at {args.pause_at:g} s; server "
          f"{args.server} on CPU {SERVER_CPU}, load generator on CPU {CLIENT_CPU}")  # fmt: skip
    version = subprocess.run([engine_bin, "--version"], capture_output=True, text=True)
    print(f"engine: {engine_bin} ({version.stdout.strip() or 'no --version'})")
    header = f"{'tool':<30} {'requests':>8} {'ops/s':>7} {'p50':>8} {'p99':>8} {'p99.9':>8}"
    print(header + f" {'max':>8}  (ms)  pause held")
    for result, pause in runs:
        figures = " ".join(
            f"{x:>8.3f}" if x is not None else f"{'n/a':>8}"
            for x in (result.p50, result.p99, result.p999, result.max)
        )
        print(f"{result.tool:<30} {result.requests:>8} {result.rate:>7.0f} {figures}        "
              f"{pause.held_s * 1000:.0f} ms at {pause.started_s:.2f} s")  # fmt: skip
    print("\n".join(expected(args)))


if __name__ == "__main__":
    main()
