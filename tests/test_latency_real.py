"""One real open-loop run end to end: a real redis-server, the real engine
(regtrack-openloop, built by scripts/install.sh), the real store. The flow's decisions
on modelled trials are test_latency_flow.py; the engine's own tests test_openloop_engine.py."""

from __future__ import annotations

import base64
import sqlite3
import zlib

import pytest

from tests.conftest import run_cli

RATE = 3000


@pytest.mark.parametrize("labels", [("a", "b"), ("a",)])
def test_a_run_at_a_rate_stores_latency_from_intended_times(tmp_path, redis_server, labels):
    """A run with --rate measures its throughput trials, then its open-loop trials at the
    rate: two versions paired in time (one engine run, the arrivals moving between their
    servers), one alone: each at the rate offered (valid unless the engine fell behind),
    with its percentiles, the engine's lag and CPU, and a compressed HDR histogram kept
    with the trial."""
    db = tmp_path / "r.db"
    paired = len(labels) > 1
    proc = run_cli(
        "run", "--versions", ",".join(f"{x}=bin:{redis_server}" for x in labels),
        "--pipelines", "10", "--rate", str(RATE), "--duration", "1.5", "--warmup", "0.5",
        "--repetitions", "1", "--db", str(db), "--no-report",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "open_loop_p99" in proc.stdout
    assert ("open-loop latency: paired in time" in proc.stderr) == paired
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT g.label, t.valid, t.ops_per_sec, t.lat_p50_ms, t.lat_p99_ms, t.lat_max_ms,"
        " t.point, t.requests, o.offered_rate, o.lag_p99_us, o.engine_busy_pct, o.hdr_unit, o.hdr"
        " FROM trials t JOIN trial_open_loop o ON o.trial_id = t.id"
        " JOIN targets g ON g.id = t.target_id WHERE t.mode = 'latency' ORDER BY g.label"
    ).fetchall()
    assert tuple(r[0] for r in rows) == labels
    # This VM delays the engine's wake-ups by milliseconds now and then: a trial whose lag
    # crossed the engine's limit is invalid for that reason, and only for a reason like it.
    reasons = {
        r[0]
        for r in conn.execute(
            "SELECT r.code FROM trial_reasons r JOIN trials t ON t.id = r.trial_id"
            " WHERE t.mode = 'latency'"
        )
    }
    # Paired, each server had the stream for half the measured time, at the full rate.
    share = 0.5 if paired else 1.0
    for _, valid, achieved, p50, p99, worst, point, requests, offered, lag, busy, unit, hdr in rows:
        assert point == f"rate={RATE}" and offered == RATE
        assert valid == 1 or reasons <= {"behind-schedule", "contended"}, reasons
        assert 0.9 * RATE < achieved < 1.1 * RATE
        assert 0.8 * share * 1.5 * RATE < requests < 1.2 * share * 1.5 * RATE
        assert 0 < p50 <= p99 <= worst
        assert lag is not None and 0 <= busy < 100
        # HDR V2 compressed: a 4-byte cookie, a length, then zlib data that inflates.
        raw = base64.b64decode(hdr)
        length = int.from_bytes(raw[4:8], "big")
        assert unit == "ns" and zlib.decompress(raw[8 : 8 + length])
