#!/usr/bin/env python3
"""Does polling before each due time (the engine's --spin-us) keep low-rate open-loop
trials valid on a VM whose halted vCPU wakes late?

At a few hundred requests/s the engine sleeps between sends; this VM wakes a halted vCPU
0.2-0.5 ms after its timer in a fifth to a third of the wakes, so the request due then is
written late, is left out of the latencies as the engine's stall, and the trial (over 5%
left out) is invalid. With --spin-us the engine wakes that long before each due time and
polls until it (at most a quarter of the mean gap between arrivals).

redis-server (the system's, or --server) is pinned to CPU 0 (bench/runtimes/native.py, as
a run starts it), the engine to CPU 1. For each
rate, --trials trials alternate --spin-us 0 and the default, so the VM's drift hits both
alike. Per trial: the engine's stalls, the share of requests left out (`tainted`), the
schedule lag p99, the engine's CPU and the latency p50/p99 of the requests kept. A GET
sweep of the same rates as a lifecycle (Sidekiq's preset, tasks/s) with --lifecycle.

    flock /tmp/regtrack-tests.lock .venv/bin/python benchmarks/engine_spin.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from regtrack.bench.runtimes.native import native_server  # noqa: E402

ENGINE = ROOT / ".venv" / "bin" / "regtrack-openloop"
SPEC = {"key_prefix": "key:", "key_min": 0, "key_max": 999}


def trial(
    args: argparse.Namespace, port: int, spec: Path, rate: float, spin: float, seed: int
) -> dict:
    command = [
        "taskset", "-c", "1", str(ENGINE), "--port", str(port), "--rate", str(rate),
        "--duration", str(args.duration), "--warmup", "0.5", "--seed", str(seed),
        "--spin-us", str(spin),
    ]  # fmt: skip
    command += ["--lifecycle", str(spec)] if args.lifecycle else ["--spec", str(spec)]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    report = json.loads(out)
    r = report.get("servers", [report])[0] if "servers" in report else report
    completed = r.get("completed") or 1
    cpu = report.get("cpu", r.get("cpu", {}))
    return {
        "stalls": r["stalls"]["count"],
        "left_out": r["tainted"] / completed,
        "lag_p99_us": r["lag_us"]["p99"],
        "engine_cpu": cpu.get("busy_fraction", 0.0),
        "p50_us": r["latency_us"]["p50"],
        "p99_us": r["latency_us"]["p99"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", default="/usr/bin/redis-server")
    parser.add_argument("--rates", default="50,200,1000,5000")
    parser.add_argument("--trials", type=int, default=6, help="per rate, half of each")
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--spin-us", type=float, default=1000.0)
    parser.add_argument("--lifecycle", action="store_true", help="Sidekiq's preset")
    args = parser.parse_args()
    with native_server(args.server, (0,)) as server, tempfile.TemporaryDirectory() as tmp:
        client = server.client()
        for k in range(1000):
            client.set(f"key:{k}", "x" * 32)
        spec = Path(tmp) / "spec.json"
        if args.lifecycle:
            from regtrack.workloads.files import load_workload

            document = load_workload("sidekiq").engine_document()
            spec.write_text(json.dumps(document))
        else:
            spec.write_text(json.dumps({**SPEC, "commands": []}))
        print(f"{'rate':>6} {'spin':>5} {'stalls':>7} {'left out':>9} {'lag p99':>8} "
              f"{'engine CPU':>10} {'p50 us':>7} {'p99 us':>7}  (medians of "
              f"{args.trials // 2} trials each, alternating)")  # fmt: skip
        for rate in (float(r) for r in args.rates.split(",")):
            rows: dict[float, list[dict]] = {0.0: [], args.spin_us: []}
            for k in range(args.trials):
                spin = 0.0 if k % 2 == 0 else args.spin_us
                rows[spin].append(trial(args, server.port, spec, rate, spin, seed=1 + k // 2))
            for spin, got in rows.items():
                med = {key: statistics.median(g[key] for g in got) for key in got[0]}
                shares = ", ".join(f"{100 * g['left_out']:.1f}%" for g in got)
                print(f"{rate:>6.0f} {spin:>5.0f} {med['stalls']:>7.0f} "
                      f"{100 * med['left_out']:>8.1f}% {med['lag_p99_us']:>8.0f} "
                      f"{100 * med['engine_cpu']:>9.1f}% {med['p50_us']:>7.0f} "
                      f"{med['p99_us']:>7.0f}  left out per trial: {shares}",
                      flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
