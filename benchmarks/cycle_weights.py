#!/usr/bin/env python3
"""What one simulated miss costs on this machine: the weights of --metric cycles, measured.

Builds candidates of --base (7.0.15) that add known work to every GET (tests/slowdown.py):

  spin     a busy loop (instructions only: what an instruction costs here)
  branchy  --branches unpredictable branches (about half of them mispredicted)
  l1       --l1-lines chained cache lines of a 1 MiB buffer (L1 misses, no LL misses:
           the buffer fits the simulated 32 MiB last level and this host's L2)
  ll       one random cache line of a 256 MiB buffer (an LL miss, as the acceptance's
           memory-stall candidate)
  ll2c     two chained lines of 256 MiB (two LL misses, one after the other)

then measures, in two regtrack runs of all of them with the base:

  1. real throughput at pipeline 10, paired in time (every server up together, the load
     moving between them), --repetitions blocks: each candidate's cost per GET in real
     cycles, (1/throughput - 1/base throughput) x the TSC frequency;
  2. the simulated counts per GET (--metric cycles): instructions, L1 misses, LL misses,
     mispredicted branches, each candidate's difference from the base.

and fits  real extra cycles = extra Ir + w_l1 x extra L1 misses + w_ll x extra LL misses
+ w_branch x extra mispredictions  by least squares (the instruction's weight fixed at 1, as
kcachegrind's CEst does; then with it free too), and prints each candidate's measured and
predicted cost under the fit and under CEst (10, 100, 10). Asserts nothing.

    flock /tmp/regtrack-tests.lock benchmarks/cycle_weights.py --repetitions 6
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.slowdown import make_branchy_branch, make_slow_branch, make_stall_branch  # noqa: E402

REGTRACK = str(ROOT / ".venv" / "bin" / "regtrack")
EVENTS = ("instructions_per_op", "l1_misses_per_op", "ll_misses_per_op", "branch_misses_per_op")
CEST = (10.0, 100.0, 10.0)


def regtrack(*args: str) -> str:
    proc = subprocess.run([REGTRACK, *args], capture_output=True, text=True, env=os.environ)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"regtrack {args[0]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.stdout


def records(db: Path, metric: str) -> dict[str, dict]:
    """compare's point records of ``metric`` at pipeline=10, by candidate."""
    out = json.loads(regtrack("compare", "--db", str(db), "--format", "json", "--show", metric))
    return {r["candidate"]: r for r in out["records"] if r["point"] == "pipeline=10"}


def tsc_hz() -> float:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name") and "@" in line:
            return float(line.rsplit("@", 1)[1].strip().removesuffix("GHz")) * 1e9
    raise SystemExit("no nominal frequency in /proc/cpuinfo's model name")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source-repo", default=str(Path.home() / ".cache/regtrack/offline-redis"))
    parser.add_argument("--slow-repo", default="/tmp/regtrack-slow-repo")
    parser.add_argument("--base", default="7.0.15")
    parser.add_argument("--spins", type=int, default=40)
    parser.add_argument("--branches", type=int, default=64)
    parser.add_argument("--l1-lines", type=int, default=16)
    parser.add_argument("--repetitions", type=int, default=6, help="throughput blocks")
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--requests", type=int, default=40_000, help="per instruction trial")
    args = parser.parse_args()
    source, slow = Path(args.source_repo), Path(args.slow_repo)
    candidates = {
        "spin": make_slow_branch(source, slow, args.base, args.spins),
        "branchy": make_branchy_branch(source, slow, args.base, args.branches),
        "l1": make_stall_branch(source, slow, args.base, args.l1_lines, 1, chained=True),
        "ll": make_stall_branch(source, slow, args.base, 1, 256),
        "ll2c": make_stall_branch(source, slow, args.base, 2, 256, chained=True),
    }
    versions = ",".join([f"base={args.base}", *(f"{k}={v}" for k, v in candidates.items())])
    common = [
        "--versions",
        versions,
        "--source-repo",
        str(slow),
        "--pipelines",
        "10",
        "--no-report",
    ]
    hz = tsc_hz()
    with tempfile.TemporaryDirectory(prefix="cycle-weights-") as tmp:
        t0 = time.monotonic()
        tput_db, sim_db = Path(tmp) / "tput.db", Path(tmp) / "sim.db"
        regtrack(
            "run",
            *common,
            "--metric",
            "throughput",
            "--repetitions",
            str(args.repetitions),
            "--duration",
            str(args.duration),
            "--db",
            str(tput_db),
        )
        t1 = time.monotonic()
        regtrack(
            "run",
            *common,
            "--metric",
            "cycles",
            "--repetitions",
            "2",
            "--instruction-requests",
            str(args.requests),
            "--db",
            str(sim_db),
        )
        t2 = time.monotonic()
        tput = records(tput_db, "throughput")
        sim = {e: records(sim_db, e) for e in (*EVENTS, "cycles_per_op")}
    print(f"host: {cpu_model()}, TSC {hz / 1e9:.2f} GHz; base {args.base}, pipeline 10")
    print(
        f"throughput run: {args.repetitions} paired blocks of {args.duration:g} s "
        f"({t1 - t0:.0f} s); simulated run: 2 repetitions of {args.requests} requests "
        f"({t2 - t1:.0f} s)\n"
    )
    base_tput = next(iter(tput.values()))["baseline_value"]
    print(
        f"base: {base_tput:,.0f} GET/s = {hz / base_tput:,.0f} real cycles per GET; "
        f"simulated {next(iter(sim['instructions_per_op'].values()))['baseline_value']:,.1f} "
        "Ir/GET\n"
    )
    header = (
        f"{'candidate':<9} {'tput change [95%]':>24} {'real Δcyc/GET':>18} "
        f"{'ΔIr':>8} {'ΔL1m':>7} {'ΔLLm':>7} {'ΔBrm':>7}"
    )
    print(header)
    rows = []
    for name in candidates:
        t = tput[name]
        real = hz * (1 / t["candidate_value"] - 1 / t["baseline_value"])
        lo, hi = t["ci_low_pct"], t["ci_high_pct"]
        # a throughput change of c% is a time change of 1/(1+c) - 1: the interval maps over
        span = [hz / base_tput * (1 / (1 + c / 100) - 1) for c in (hi, lo) if c is not None]
        deltas = [sim[e][name]["candidate_value"] - sim[e][name]["baseline_value"] for e in EVENTS]
        rows.append((name, real, span, deltas))
        interval = f"[{lo:+.1f}, {hi:+.1f}]" if lo is not None and hi is not None else "[n/a]"
        spans = f"{span[0]:+.0f}..{span[1]:+.0f}" if len(span) == 2 else "n/a"
        print(
            f"{name:<9} {t['change_pct']:>+7.2f}% {interval:>16} {real:>+7.0f} ({spans:>10}) "
            + " ".join(f"{d:>+7.2f}" if i else f"{d:>+8.1f}" for i, d in enumerate(deltas))
        )
    x = np.array([r[3] for r in rows])
    y = np.array([r[1] for r in rows])
    fixed, *_ = np.linalg.lstsq(x[:, 1:], y - x[:, 0], rcond=None)
    free, *_ = np.linalg.lstsq(x, y, rcond=None)
    print(
        "\nfit, instruction weight 1: "
        f"w_l1 {fixed[0]:.1f}, w_ll {fixed[1]:.1f}, w_branch {fixed[2]:.1f}"
    )
    print(
        f"fit, instruction weight free: Ir {free[0]:.2f}, w_l1 {free[1]:.1f}, "
        f"w_ll {free[2]:.1f}, w_branch {free[3]:.1f}\n"
    )
    print(f"{'candidate':<9} {'measured':>9} {'fit':>9} {'CEst':>9}   (extra real cycles per GET)")
    for name, real, _, d in rows:
        fit = d[0] + float(np.dot(fixed, d[1:]))
        cest = d[0] + float(np.dot(CEST, d[1:]))
        print(f"{name:<9} {real:>+9.0f} {fit:>+9.0f} {cest:>+9.0f}")
    print("\nsimulated cycles per GET (the run's weights, compare's medians):")
    for name in candidates:
        r = sim["cycles_per_op"][name]
        print(
            f"  {name:<9} {r['baseline_value']:,.1f} -> {r['candidate_value']:,.1f} "
            f"({r['change_pct']:+.2f}%)"
            if r["change_pct"] is not None
            else f"  {name}: n/a"
        )


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return " ".join(line.split(":", 1)[1].split())
    return "unknown"


if __name__ == "__main__":
    main()
