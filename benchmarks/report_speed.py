#!/usr/bin/env python3
"""How long reports of 10,000 trials take to write and to draw, and how big the pages are.

Fills a database with synthetic trials (the figures do not matter here, only their number;
nothing is measured), writes the report, then opens the index, the largest run page and a
history page in headless Chromium and times them until every chart has drawn. Two shapes:
one run of 10,000 trials (4 versions x 7 points x 357 repetitions) and 50 runs of 200;
then tracking: 1,000 runs of 196, and the report at the end of each of three more runs.
Prints the figures docs/reports.md quotes; it asserts nothing.

    .venv/bin/python benchmarks/report_speed.py
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from regtrack.core.records import InvalidReason, TrialRecord
from regtrack.flows.report import gather
from regtrack.output.report import write_report
from regtrack.plan.run_plan import RunPlan
from regtrack.results.store import Store, now
from regtrack.targets.versions import Target

POINTS = (1, 5, 10, 15, 20, 25, 30)
PLAN = RunPlan.from_json(
    {"metric": "throughput", "workload": {"name": "get-pipeline", "kind": "get-pipeline"}}
)


def fill(store: Store, runs: int, labels: list[str], repetitions: int) -> int:
    rng = random.Random(7)
    env = {"fingerprint": "synthetic0000000", "cpu_model": "synthetic", "kernel": "x"}
    count = 0
    for r in range(runs):
        run_id = store.create_run(["regtrack", "run"], PLAN, env, {"name": "redis-benchmark"})
        ids = {
            label: store.add_target(
                run_id,
                i,
                Target(label=label, spec=f"{label}=bin:/opt/{label}/redis-server", kind="bin"),
                {"redis_version": f"7.{i}.0"},
            )
            for i, label in enumerate(labels)
        }
        seq = 0
        for rep in range(repetitions):
            for label in labels:
                for p in POINTS:
                    base = 80_000 * p**0.6 * (1.0 + 0.02 * labels.index(label))
                    ops = base * rng.gauss(1.0, 0.05) * (0.95 if r > runs // 2 else 1.0)
                    valid = rng.random() > 0.05
                    record = TrialRecord(
                        seq=seq,
                        repetition=rep,
                        target_label=label,
                        workload="get-pipeline",
                        point=f"pipeline={p}",
                        params={"pipeline": p},
                        started_at=now(),
                        ops_per_sec=ops,
                        latency_ms={"p50": 0.3 * p, "p99": 0.9 * p},
                        server_calls=int(ops),
                        syscalls_read=int(ops / p),
                        syscalls_write=int(ops / p),
                        valid=valid,
                    )
                    if not valid:
                        record.mark_invalid(InvalidReason.CLIENT_BOUND, "synthetic")
                    store.add_trial(run_id, ids[label], record)
                    seq += 1
                    count += 1
        store.finish_run(run_id, "complete")
    return count


def draw_times(folder: Path, pages: list[Path]) -> None:
    chromium = shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        chromium = None
    if not chromium:
        print("  (chromium or playwright missing: no drawing times)")
        return
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for path in pages:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            started = time.perf_counter()
            page.goto(path.as_uri())
            page.wait_for_function(
                "() => [...document.querySelectorAll('.chart')]"
                ".every(c => c.dataset.drawn === '1')",
                timeout=60_000,
            )
            took = time.perf_counter() - started
            size = path.stat().st_size / 1e6
            print(f"  {path.name}: drawn in {took:.2f} s, {size:.2f} MB")
            page.close()
        browser.close()


def scenario(name: str, runs: int, labels: list[str], repetitions: int) -> None:
    with tempfile.TemporaryDirectory(prefix="regtrack-report-speed-") as tmp:
        folder = Path(tmp)
        store = Store.open(folder / "r.db")
        trials = fill(store, runs, labels, repetitions)
        started = time.perf_counter()
        files = write_report(gather(store), folder)
        took = time.perf_counter() - started
        print(
            f"{name}: {trials} trials in {runs} runs; report written in {took:.2f} s "
            f"({len(files.runs)} run pages, {len(files.histories)} history pages)"
        )
        biggest = max(files.runs.values(), key=lambda p: p.stat().st_size)
        started = time.perf_counter()
        write_report(gather(store, [int(biggest.stem.split("-")[1])]), folder)
        print(f"  one run page (as at the end of a run): {time.perf_counter() - started:.2f} s")
        draw_times(folder, [files.index, biggest, files.histories[0]])
        store.close()


def tracking(runs: int, keep: Path | None) -> None:
    """A branch tracked run after run: the report written at the end of one more run, when
    ``runs`` runs are stored already (their derived data cached by earlier reports).
    ``keep``: a folder to fill once and reuse (for profiling one end-of-run report)."""
    with tempfile.TemporaryDirectory(prefix="regtrack-report-speed-") as tmp:
        folder = keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        store = Store.open(folder / "r.db")
        if store.conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] < runs:
            started = time.perf_counter()
            trials = fill(store, runs, ["a", "b"], 14)
            took = time.perf_counter() - started
            print(f"tracking: {trials} trials in {runs} runs stored in {took:.0f} s")
            started = time.perf_counter()
            files = write_report(gather(store, [store.latest_run_id()]), folder)
            print(
                f"  the end of the last of them, nothing cached yet (as after an upgrade of "
                f"regtrack): {time.perf_counter() - started:.1f} s, {len(files.histories)} "
                "history pages"
            )
        for _ in range(3):
            fill(store, 1, ["a", "b"], 14)
            newest = store.latest_run_id()
            started = time.perf_counter()
            write_report(gather(store, [newest]), folder)
            took = time.perf_counter() - started
            print(f"  end of run {newest} ({newest} stored): report in {took:.2f} s")
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tracking-runs", type=int, default=1000)
    parser.add_argument("--only", choices=["big", "many", "tracking"])
    parser.add_argument("--keep", type=Path, help="tracking: fill this folder once, reuse it")
    args = parser.parse_args()
    if args.only in (None, "big"):
        scenario("one big run", 1, ["a", "b", "c", "d"], 357)
    if args.only in (None, "many"):
        scenario("many runs", 50, ["a", "b"], 14)
    if args.only in (None, "tracking"):
        tracking(args.tracking_runs, args.keep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
