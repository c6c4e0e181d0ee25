#!/usr/bin/env python3
"""Where a cold `.ci/run` spends its time, from what one run left behind.

Reads the run's output with a wall-clock time before each line (HH:MM:SS, as a CI log
or `ts` gives it), the fixture set-up times (`pytest --fixture-times FILE`), the test
build cache (each build records its seconds) and the databases the tests wrote under
pytest's base temp folder (each trial its start; a trial's time runs until the next one
starts, server start and set-up included). Prints the table docs/testing.md quotes.

    .venv/bin/python benchmarks/ci_breakdown.py --log ci.log --fixtures fixtures.json \\
        --cache $REGTRACK_TEST_CACHE --basetemp /tmp/pytest-of-root/pytest-N
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
from collections import Counter
from datetime import datetime
from pathlib import Path

MAX_TRIAL_S = 120.0  # no measured trial of the suite takes longer, set-up included
STAMP = re.compile(r"^(\d\d):(\d\d):(\d\d) (.*)$")
SUMMARY = re.compile(r"\b(\d+) passed.* in ([0-9.]+)s")
# Fixtures worth a row of their own (the rest of the set-ups are summed).
NAMED = {
    "offline_redis": "offline source repository, Redis (archives, git)",
    "offline_valkey": "offline source repository, Valkey",
    "builder_image": "docker builder image (host packages, docker import)",
    "server_image": "docker image of the installed redis-server",
    "browser": "Chromium start (playwright)",
    "slow_repo": "history with a known slowdown (git)",
    "one_step": "bisect history (git)",
}


def phases(log: Path) -> dict[str, float]:
    """Seconds of install, lint and pytest from the time-stamped log."""
    stamps: list[tuple[int, str]] = []
    for line in log.read_text(errors="replace").splitlines():
        if m := STAMP.match(line):
            h, mi, s, text = m.groups()
            stamps.append((int(h) * 3600 + int(mi) * 60 + int(s), text))
    if not stamps:
        raise SystemExit(f"{log}: no line starts with a time (HH:MM:SS): stamp the log, e.g. ts")
    start = stamps[0][0]

    def at(predicate) -> int:
        times = [t for t, text in stamps if predicate(text)]
        return (times[0] - start) % 86400 if times else 0

    installed = at(lambda t: t.startswith("regtrack install: done"))
    lint_done = at(lambda t: t.startswith("Contracts:"))
    summary = [SUMMARY.search(text) for _, text in stamps]
    pytest_s = next((float(m.group(2)) for m in summary if m), 0.0)
    end = (stamps[-1][0] - start) % 86400
    return {"install": installed, "lint": lint_done - installed, "pytest": pytest_s, "wall": end}


def builds(cache: Path) -> tuple[int, float]:
    seconds = [
        json.loads(record.read_text())["seconds"] for record in cache.glob("builds/*/build.json")
    ]
    return len(seconds), sum(seconds)


def trials(basetemp: Path) -> tuple[Counter, Counter]:
    """Seconds and counts of trials by mode, from every test database (symlinks skipped)."""
    seconds: Counter = Counter()
    counts: Counter = Counter()
    for db in basetemp.rglob("*.db"):
        if any(part.endswith("current") for part in db.relative_to(basetemp).parts):
            continue
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            runs = conn.execute("SELECT id, finished_at, config FROM runs").fetchall()
        except sqlite3.Error:
            conn.close()
            continue
        for run_id, finished, config in runs:
            if (json.loads(config or "{}")).get("merged"):
                continue  # copies of the shards' trials
            rows = conn.execute(
                "SELECT started_at, mode FROM trials WHERE run_id = ? ORDER BY seq", (run_id,)
            ).fetchall()
            times = [datetime.fromisoformat(r[0]) for r in rows]
            if finished:
                times.append(datetime.fromisoformat(finished))
            for i, (_, mode) in enumerate(rows):
                spent = (times[i + 1] - times[i]).total_seconds() if i + 1 < len(times) else 0
                if not 0 <= spent <= MAX_TRIAL_S:
                    break  # a database a test made up (dates of its own), not a measured run
                seconds[mode] += spent
                counts[mode] += 1
        conn.close()
    return seconds, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--fixtures", type=Path, required=True)
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--basetemp", type=Path, required=True)
    args = parser.parse_args()
    phase = phases(args.log)
    fixtures: dict[str, float] = json.loads(args.fixtures.read_text())
    n_builds, build_s = builds(args.cache)
    seconds, counts = trials(args.basetemp)
    named = {NAMED[k]: v for k, v in fixtures.items() if k in NAMED}
    other_setup = sum(v for k, v in fixtures.items() if k not in NAMED)
    rows = [
        ("install: apt packages, uv sync (uv.lock), memtier_benchmark build", phase["install"]),
        ("lint: ruff check, ruff format, import layering", phase["lint"]),
        ("pytest, of which:", phase["pytest"]),
        (f"  Redis builds from source ({n_builds}, ccache cold)", build_s),
        *[(f"  {name}", v) for name, v in sorted(named.items(), key=lambda kv: -kv[1])],
        ("  other fixture set-ups", other_setup),
        (f"  callgrind trials ({counts['instructions']}, server start included)",
         seconds["instructions"]),
        (f"  throughput trials ({counts['throughput']}, server start included)",
         seconds["throughput"]),
    ]  # fmt: skip
    accounted = build_s + sum(named.values()) + other_setup + sum(seconds.values())
    rows.append(
        ("  the rest: CLI start-up, analysis, reports, git, docker, browser checks",
         phase["pytest"] - accounted)
    )  # fmt: skip
    rows.append(("wall time of .ci/run", phase["wall"]))
    print("| where | minutes | seconds |\n| --- | ---: | ---: |")
    for name, value in rows:
        print(f"| {name} | {value / 60:.1f} | {value:.0f} |")


if __name__ == "__main__":
    main()
