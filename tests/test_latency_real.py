"""One real open-loop run end to end: a real redis-server, the real engine
(regtrack-openloop, built by scripts/install.sh), the real store. The flow's decisions
on modelled trials are test_latency_flow.py; the engine's own tests test_openloop_engine.py."""

from __future__ import annotations

import base64
import contextlib
import sqlite3
import zlib

from regtrack.bench import paired, paired_latency, servers
from regtrack.bench.plan import PlannedTrial
from regtrack.bench.prepare import prepare_job
from regtrack.core.options import Options
from regtrack.targets import versions
from tests.conftest import run_cli

RATE = 3000


def test_a_run_at_a_rate_stores_latency_from_intended_times(tmp_path, redis_server):
    """A run with --rate measures its throughput trials, then an open-loop trial at the
    rate: at the rate offered (valid unless the engine fell behind), with its percentiles,
    the engine's lag and CPU, and a compressed HDR histogram kept with the trial."""
    db = tmp_path / "r.db"
    proc = run_cli(
        "run", "--versions", f"a=bin:{redis_server}", "--pipelines", "10", "--rate", str(RATE),
        "--duration", "1.5", "--warmup", "0.5", "--repetitions", "1", "--db", str(db),
        "--no-report",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT g.label, t.valid, t.ops_per_sec, t.lat_p50_ms, t.lat_p99_ms, t.lat_max_ms,"
        " t.point, t.requests, o.offered_rate, o.lag_p99_us, o.engine_busy_pct, o.hdr_unit, o.hdr"
        " FROM trials t JOIN trial_open_loop o ON o.trial_id = t.id"
        " JOIN targets g ON g.id = t.target_id WHERE t.mode = 'latency' ORDER BY g.label"
    ).fetchall()
    assert [r[0] for r in rows] == ["a"]
    # This VM delays the engine's wake-ups by milliseconds now and then: a trial whose lag
    # crossed the engine's limit is invalid for that reason, and only for a reason like it.
    reasons = {
        r[0]
        for r in conn.execute(
            "SELECT r.code FROM trial_reasons r JOIN trials t ON t.id = r.trial_id"
            " WHERE t.mode = 'latency'"
        )
    }
    for _, valid, achieved, p50, p99, worst, point, requests, offered, lag, busy, unit, hdr in rows:
        assert point == f"rate={RATE}" and offered == RATE
        assert valid == 1 or reasons <= {"behind-schedule", "contended"}, reasons
        assert 0.9 * RATE < achieved < 1.1 * RATE
        assert 0.8 * 1.5 * RATE < requests < 1.2 * 1.5 * RATE
        if valid:  # a refused trial keeps only the percentiles its untainted requests resolve
            assert 0 < p50 <= p99 <= worst
            assert "open_loop_p99" in proc.stdout
        else:
            assert "behind its schedule" in proc.stdout or "contended" in proc.stdout
        assert lag is not None and 0 <= busy < 100
        # HDR V2 compressed: a 4-byte cookie, a length, then zlib data that inflates.
        raw = base64.b64decode(hdr)
        length = int.from_bytes(raw[4:8], "big")
        assert unit == "ns" and zlib.decompress(raw[8 : 8 + length])


def test_paired_latency_gives_each_server_its_own_windows(tmp_path, redis_server, monkeypatch):
    """bench/paired_latency.py on two real servers, called directly: a run pairs open-loop
    trials only in a duet (a CPU per server), which this 2-CPU host cannot make. One
    engine run moves the arrivals between the servers; each trial is its own server's
    windows at the full rate, with that server's own counters."""
    monkeypatch.setenv("REGTRACK_CACHE", str(tmp_path / "cache"))
    specs = versions.parse_specs(f"a=bin:{redis_server},b=bin:{redis_server}")
    options = Options(pipelines=[10], keys=2000, rate=str(RATE), duration=1.5, warmup=0.5)
    job = prepare_job(specs, options)
    assert job.engine is not None and job.latency is not None
    (point,) = job.latency_points()
    planned = [PlannedTrial(n, 0, t.label, point) for n, t in enumerate(job.targets)]
    with contextlib.ExitStack() as stack:
        sides = []
        for target in job.targets:
            server = stack.enter_context(servers.plain_server(job, target, 0, job.seed(0)))
            saved = servers.set_up(job, server, target.label, job.engine.name)
            sides.append(paired.Side(target, server, saved))
        records = paired_latency.measure_point(job, sides, planned)
    assert [r.target_label for r in records] == ["a", "b"]
    for record in records:
        reasons = {r.code.value for r in record.reasons}
        assert record.valid or reasons <= {"behind-schedule", "contended"}, record.reasons
        assert record.mode == "latency" and record.open_loop is not None
        assert record.open_loop.offered_rate == RATE
        assert 0.9 * RATE < (record.ops_per_sec or 0) < 1.1 * RATE
        # each had the stream half the measured time; its GETs (warm-up too) are its own
        assert 0.8 * 0.5 * 1.5 * RATE < record.requests < 1.2 * 0.5 * 1.5 * RATE
        assert record.requests <= (record.server_calls or 0) < 1.5 * record.requests
        # its own server's syscalls by name (the kernel counts them on this machine kind)
        assert (record.syscalls_by_name or {}).get("epoll_wait", 0) > 0, record.syscalls_by_name
        # (an invalid trial keeps only the percentiles its untainted requests resolve)
        if record.valid:
            assert 0 < record.latency_ms["p50"] <= record.latency_ms["p99"]
