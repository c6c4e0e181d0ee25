"""Throughput paired in time (bench/paired.py), for real: both servers up, the load moved
between them in windows, each window counted by the server that had the load."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from regtrack.bench.loadgen_choice import SATURATION_REASONS
from tests.conftest import run_cli
from tests.reasons import stored_reasons


def test_two_versions_are_measured_in_alternating_windows(tmp_path, redis_server):
    """An A/A pair of one binary: every repetition's trials hold the same windows, A B B A
    in every group, each about --window long; the run records its method, no latency."""
    db = tmp_path / "r.db"
    proc = run_cli(
        "run", "--versions", f"a=bin:{redis_server},b=bin:{redis_server}", "--pipelines", "30",
        "--duration", "1", "--warmup", "0.3", "--repetitions", "2", "--keys", "20000",
        "--loadgen", "redis-benchmark", "--window", "0.1", "--db", str(db), "--no-report",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "paired in time" in proc.stdout + proc.stderr
    conn = sqlite3.connect(db)
    config = json.loads(conn.execute("SELECT config FROM runs").fetchone()[0])
    assert config["throughput_method"] == "paired in time"
    rows = conn.execute(
        "SELECT t.label, tr.repetition, tr.valid, tr.ops_per_sec, "
        "tr.lat_p50_ms, tr.raw_output, tr.wall_s FROM trials tr JOIN targets t ON "
        "t.id = tr.target_id ORDER BY tr.seq"
    ).fetchall()
    reasons = stored_reasons(db)
    assert sorted((r[0], r[1]) for r in rows) == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    for (label, rep, valid, ops, latency, raw, wall), why in zip(rows, reasons, strict=True):
        # Validity is the machine's to give: through a slow phase of this VM neither the
        # server nor the load generator is saturated, and the trial says so (the windows'
        # mechanics below hold either way).
        assert valid or (why and {r.code for r in why} <= SATURATION_REASONS), why
        assert ops > 0 and latency is None, "no latency: a paused client would count its pause"
        lines = raw.splitlines()[2:]  # a caption, a header, then one line per window
        order = [line.split()[2] for line in lines]
        first = "a" if rep == 0 else "b"
        other = "b" if first == "a" else "a"
        assert order == [first, other, other, first] * 5, order  # 1 s / (2 x 0.1 s)
        seconds = [float(line.split()[4]) for line in lines]
        assert all(0.09 < s < 0.13 for s in seconds), seconds
        mine = sum(s for line, s in zip(lines, seconds, strict=True) if line.split()[2] == label)
        assert abs(wall - mine) < 1e-3
    for rep in (0, 1):
        tables = {r[5] for r in rows if r[1] == rep}
        assert len(tables) == 1, "both trials of a repetition keep the point's one table"


def test_a_duet_on_a_host_without_cpus_for_it_is_refused_before_anything_runs(
    tmp_path, redis_server
):
    """--pairing duet needs a server CPU and a load CPU per version; on 2 CPUs it says
    so in one line (exit 2), before any server starts or any run is recorded."""
    if len(os.sched_getaffinity(0)) >= 4:
        pytest.skip("this host has the CPUs for a duet")
    db = tmp_path / "r.db"
    proc = run_cli(
        "run", "--versions", f"a=bin:{redis_server},b=bin:{redis_server}", "--pairing", "duet",
        "--db", str(db), "--no-report",
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "--pairing duet runs 2 servers at once" in proc.stderr
    assert "Traceback" not in proc.stderr and not db.exists()
