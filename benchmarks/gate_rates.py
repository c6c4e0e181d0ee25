#!/usr/bin/env python3
"""How often does a default `regtrack ci` gate decide, and decide right, on this machine?

Runs real gates, one after another, each a fresh `regtrack ci` at its default settings
(both metrics, sequential blocks, 10 minute budget) in a database of its own:

  aa     the same build on both sides: it must never report a regression
  slow5  a build with a spin loop in getGenericCommand adding about +5% instructions/GET
  slow2  the same with about +2%
  stall  a memory-stall build: every GET touches --stall-lines pseudo-random cache lines
         of a 256 MiB buffer (instructions per GET up ~0.5% a line, throughput down),
         chained with --stall-chained (each miss waits for the one before); a throughput
         regression must be reported
         With `-- --metric cycles` (simulated cycles, no throughput) simulated cycles per
         op must report the regression while instructions per op stay under threshold.
  pause  an event loop that stalls: serverCron busy-waits --pause-us (2 ms) each of its
         10 runs a second; with `-- --latency-load 0.5` the p99 gate must report a
         regression while throughput and instructions say no change
  pop    a list queue's consumer command made slower: BRPOP spins --pop-spins loop
         iterations when it finds a task; with `-- --workload celery` the lifecycle's
         capacity or server CPU per task must report a regression
  syscall one cheap system call more per GET (syscall(SYS_getppid) in getCommand,
         --syscalls of them): syscalls per op must report a regression and name getppid
  stall3 the same with --stall3-lines (and --stall-mib, --stall-every: only every Nth
         GET), chosen to cost about 3% of throughput on the host; or, with
         --stall3-delay TICKS, a timed delay (a spin on the time-stamp counter: time, not
         instructions), where every memory stall costs more than 3% (an EPYC VM)

A slowdown below the gate's threshold is not a regression by definition (a 3% slower
build at the default 5% gives `no change` or `inconclusive`): stall3 gates pass
`-- --threshold 2`, the low end of the regressions Redis developers hunt. Options after
`--` are recorded with each gate and its rates are kept apart by them.

It appends one JSON line per gate to --results (so the gates can run in parts), then
prints every gate and the rates over all gates in the results file. Asserts nothing.

    benchmarks/gate_rates.py --kind aa --gates 10 --source-repo /tmp/slowrepo
    benchmarks/gate_rates.py --summary-only

The slow builds come from tests/slowdown.py (branches slow-<spins> on top of --base).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from regtrack.core.settings import load_thresholds  # noqa: E402
from tests.slowdown import (  # noqa: E402
    make_delay_branch,
    make_pause_branch,
    make_pop_branch,
    make_slow_branch,
    make_stall_branch,
    make_syscall_branch,
)

REGTRACK = str(ROOT / ".venv" / "bin" / "regtrack")
# Gates since throughput is paired in time; gate_rates.jsonl holds the earlier ones.
DEFAULT_RESULTS = ROOT / "benchmarks" / "results" / "gate_rates_paired.jsonl"
EXPECTED = {
    "aa": "no regression",
    "slow5": "regression",
    "slow2": "regression",
    "stall": "regression",
    "stall3": "regression",
    "pause": "regression",
    "pop": "regression",
    "syscall": "regression",
}


def gate(kind: str, base: str, candidate: str, source: str, extra: list[str]) -> dict:
    """One real `regtrack ci`; its outcome, answers, repetitions and wall time."""
    with tempfile.TemporaryDirectory(prefix="gate-") as tmp:
        out = Path(tmp) / "gate.json"
        argv = [
            REGTRACK, "ci", "--baseline-version", f"base={base}",
            "--candidate-version", f"cand={candidate}",
            "--source-repo", source, "--db", str(Path(tmp) / "gate.db"), "--json", str(out),
            "--no-report", *extra,
        ]  # fmt: skip
        t0 = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, env=os.environ)
        wall = time.monotonic() - t0
        row = {
            "kind": kind,
            "candidate": candidate,
            "host": host(),
            "options": extra,
            # the p99 threshold in effect ([verdict] open_loop_p99_pct): "no change" depends on it
            "p99_threshold_pct": load_thresholds().open_loop_p99,
            "exit": proc.returncode,
            "wall_s": round(wall, 1),
        }
        if not out.exists():
            row["error"] = proc.stderr.strip().splitlines()[-1:] or ["no output"]
            return row
        data = json.loads(out.read_text())
        row["pair_spread_pct"] = pair_spreads(Path(tmp) / "gate.db")
        row["latency_trials"] = latency_trials(Path(tmp) / "gate.db")
    row.update(
        outcome=data["outcome"],
        decided=data["decided"],
        repetitions=data["repetitions"],
        stopped=data["stopped"],
        headline=data["headline"],
        syscalls=data.get("syscalls", []),
        gate={
            g["metric"]: {
                k: g[k] for k in ("change_pct", "ci_low_pct", "ci_high_pct", "mde_pct", "verdict")
            }
            for g in data["gate"]
        },
    )
    return row


def pair_spreads(db: Path) -> dict[str, float]:
    """The largest difference between the two sides of one seed-matched block (the same
    repetition, point and seed), in percent of their mean, per counted metric: in an A/A
    gate, how far two processes with one seed count apart."""
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT t.repetition, t.point, g.label, t.instructions_per_op,"
        " CAST(c.cycles AS REAL) / t.server_calls FROM trials t"
        " JOIN targets g ON g.id = t.target_id"
        " LEFT JOIN trial_cache_sim c ON c.trial_id = t.id"
        " WHERE t.valid = 1 AND t.mode = 'instructions'"
    ).fetchall()
    conn.close()
    sides: dict[tuple, dict[str, tuple]] = {}
    for rep, point, label, instr, cyc in rows:
        sides.setdefault((rep, point), {})[label] = (instr, cyc)
    out: dict[str, float] = {}
    for pair in sides.values():
        if len(pair) != 2:
            continue
        a, b = pair.values()
        for i, metric in enumerate(("instructions_per_op", "cycles_per_op")):
            if a[i] is None or b[i] is None:
                continue
            pct = 200.0 * abs(a[i] - b[i]) / (a[i] + b[i])
            out[metric] = max(out.get(metric, 0.0), round(pct, 4))
    return out


def latency_trials(db: Path) -> dict[str, object]:
    """The open-loop trials of the gate: how many were valid, how many were left out for
    each reason (a block counts only when both its trials are valid), and each block's
    p99 per side in us (repetition order), the spread a p99 threshold must live with."""
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT t.repetition, g.label, t.valid, t.lat_p99_ms, r.code FROM trials t"
        " JOIN targets g ON g.id = t.target_id"
        " LEFT JOIN trial_reasons r ON r.trial_id = t.id AND r.position = 0"
        " WHERE t.mode = 'latency' ORDER BY t.repetition, g.label"
    ).fetchall()
    conn.close()
    out: dict[str, object] = {}
    blocks: dict[int, dict[str, float]] = {}
    for rep, label, valid, p99, code in rows:
        key = "valid" if valid else (code or "invalid")
        out[key] = int(out.get(key, 0)) + 1  # type: ignore[call-overload]
        if valid and p99 is not None:
            blocks.setdefault(rep, {})[label] = round(1000.0 * p99, 1)
    out["p99_us"] = [b for _, b in sorted(blocks.items())]
    return out


def host() -> str:
    """The CPU model: what a memory stall costs depends on it (a row without one ran on
    the machine of the earlier sessions)."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return " ".join(line.split(":", 1)[1].split())
    return "unknown"


def _group(row: dict) -> tuple[str, str]:
    """A gate's kind, candidate, host and options: their rates are counted apart."""
    where = row.get("host", "earlier host")
    threshold = (
        f" (p99 threshold {row['p99_threshold_pct']:g}%)" if "p99_threshold_pct" in row else ""
    )
    options = " ".join(row.get("options", []))
    return row["kind"], f"{row.get('candidate', '')} on {where} {options}{threshold}"


def show(rows: list[dict]) -> None:
    print(
        f"{'kind':<6} {'outcome':<14} {'reps':>4} {'min':>5}  "
        "instructions / cycles / throughput / p99"
    )
    for r in rows:
        if "error" in r:
            print(f"{r['kind']:<6} error: {r['error']}")
            continue
        parts = []
        for metric in (
            "instructions_per_op",
            "cycles_per_op",
            "throughput",
            "open_loop_p99",
            "syscalls_per_op",
        ):
            g = r["gate"].get(metric)
            if g and g["change_pct"] is not None:
                lo = "-inf" if g["ci_low_pct"] is None else f"{g['ci_low_pct']:+.2f}"
                hi = "inf" if g["ci_high_pct"] is None else f"{g['ci_high_pct']:+.2f}"
                parts.append(f"{g['change_pct']:+.2f}% [{lo}, {hi}] {g['verdict']}")
        print(
            f"{r['kind']:<6} {r['outcome']:<14} {r['repetitions']:>4} {r['wall_s'] / 60:>5.1f}  "
            + " | ".join(parts)
        )
    print()
    for kind, options in sorted({_group(r) for r in rows}):
        sel = [r for r in rows if _group(r) == (kind, options) and "error" not in r]
        if not sel:
            continue
        right = sum(r["outcome"] == EXPECTED[kind] for r in sel)
        regress = sum(r["outcome"] == "regression" for r in sel)
        decided = sum(r["decided"] for r in sel)
        improved = sum(g["verdict"] == "improvement" for r in sel for g in r["gate"].values())
        p99_same = sum(
            r["gate"].get("open_loop_p99", {}).get("verdict") == "no change" for r in sel
        )
        walls = sorted(r["wall_s"] for r in sel)
        median = statistics.median(walls)
        label = f"{kind} ({options})" if options else kind
        print(
            f"{label:<6} gates {len(sel):>2}: expected '{EXPECTED[kind]}' {right}/{len(sel)}, "
            f"regression {regress}, decided {decided}, improvement calls {improved}, "
            f"median wall {median / 60:.1f} min, max {walls[-1] / 60:.1f} min"
            + (
                f", p99 'no change' {p99_same}"
                if any("open_loop_p99" in r["gate"] for r in sel)
                else ""
            )
        )
        for metric in ("instructions_per_op", "cycles_per_op"):
            regressed = sum(r["gate"].get(metric, {}).get("verdict") == "regression" for r in sel)
            spreads = [r["pair_spread_pct"][metric] for r in sel if metric in r.get(
                "pair_spread_pct", {})]  # fmt: skip
            if any(metric in r["gate"] for r in sel):
                spread = (
                    f"; seed-matched pairs at most {max(spreads):.3f}% apart "
                    f"(median of gates {statistics.median(spreads):.3f}%)"
                    if spreads and kind == "aa"
                    else ""
                )
                print(f"         {metric}: regression in {regressed}/{len(sel)}{spread}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kind", choices=sorted(EXPECTED))
    parser.add_argument("--gates", type=int, default=10)
    parser.add_argument("--source-repo", default=str(Path.home() / ".cache/regtrack/offline-redis"))
    parser.add_argument("--slow-repo", default="/tmp/regtrack-slow-repo")
    parser.add_argument("--base", default="7.0.15")
    parser.add_argument("--spins5", type=int, default=40, help="spins adding ~5%% Ir/GET")
    parser.add_argument("--spins2", type=int, default=16, help="spins adding ~2%% Ir/GET")
    parser.add_argument("--stall-lines", type=int, default=1, help="cache lines per GET")
    parser.add_argument("--stall-chained", action="store_true", help="stall: chained misses")
    parser.add_argument("--stall3-lines", type=int, default=1, help="lines for ~3%% slower")
    parser.add_argument("--stall-mib", type=int, default=256, help="the stall's buffer (MiB)")
    parser.add_argument("--stall-every", type=int, default=1, help="stall every Nth GET only")
    parser.add_argument("--stall3-delay", type=int, help="stall3: a delay of TICKS instead")
    parser.add_argument("--pause-us", type=int, default=2000, help="pause: serverCron's wait")
    parser.add_argument("--pop-spins", type=int, default=3000, help="pop: spins per BRPOP")
    parser.add_argument("--syscalls", type=int, default=1, help="syscall: getppid per GET")
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    parser.add_argument("--summary-only", action="store_true")
    parser.add_argument("extra", nargs="*", help="more regtrack ci options, after --")
    args = parser.parse_args()
    args.results.parent.mkdir(parents=True, exist_ok=True)
    if not args.summary_only:
        if not args.kind:
            parser.error("give --kind (or --summary-only)")
        slow = Path(args.slow_repo)
        candidate = args.base
        if args.kind == "pause":
            candidate = make_pause_branch(Path(args.source_repo), slow, args.base, args.pause_us)
        elif args.kind == "syscall":
            candidate = make_syscall_branch(Path(args.source_repo), slow, args.base, args.syscalls)
        elif args.kind == "pop":
            candidate = make_pop_branch(Path(args.source_repo), slow, args.base, args.pop_spins)
        elif args.kind == "stall3" and args.stall3_delay:
            candidate = make_delay_branch(
                Path(args.source_repo), slow, args.base, args.stall3_delay
            )
        elif args.kind.startswith("stall"):
            lines = args.stall_lines if args.kind == "stall" else args.stall3_lines
            chained = args.stall_chained and args.kind == "stall"
            candidate = make_stall_branch(
                Path(args.source_repo), slow, args.base, lines, args.stall_mib,
                chained=chained, every=args.stall_every,
            )  # fmt: skip
        elif args.kind != "aa":
            spins = args.spins5 if args.kind == "slow5" else args.spins2
            candidate = make_slow_branch(Path(args.source_repo), slow, args.base, spins)
        source = str(slow) if args.kind != "aa" else args.source_repo
        for i in range(args.gates):
            row = gate(args.kind, args.base, candidate, source, args.extra)
            with args.results.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(f"gate {i + 1}/{args.gates}: {row.get('headline') or row}", flush=True)
    rows = [json.loads(line) for line in args.results.read_text().splitlines() if line]
    show(rows)


if __name__ == "__main__":
    main()
