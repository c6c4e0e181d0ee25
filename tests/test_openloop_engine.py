"""regtrack-openloop, the open-loop engine (engine/): its command line, its exit codes and,
against a real redis-server, that it keeps its schedule and times every request from its
intended send, so a server pause shows in the requests the pause delayed (no coordinated
omission), that a stall of the engine itself is detected and the requests it touched are
left out of the latency (a server pause taints nothing), and that given two ports it pairs
them in time. The binary is the one regtrack
runs (regtrack.bench.loadgen.openloop.installed: on PATH, else the one scripts/install.sh
builds into .venv/bin), so PATH can point these tests at a fresh build."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from regtrack.bench.loadgen import openloop
from regtrack.core import procs

ROOT = Path(__file__).resolve().parent.parent
GET_SPEC = {"key_prefix": "key:", "key_min": 0, "key_max": 999}
# Behind when schedule lag p99 is above 30 ms (the engine's default is 1 ms). On the 2-core
# VM of 2026-12, 1 ms was crossed at 2000/s in about one run of five (lag p50 50 us, p99
# 1.15-1.3 ms, max 3.4 ms, the engine 12% busy; most likely the host waking an idle vCPU
# late); on another host of that kind (2026-12-06: 4-6% of the CPU stolen by the
# hypervisor, a sleeping thread woken 2 ms late at p99.9, 15 ms at worst) a full suite saw
# lag p99 of 5.3-26 ms in four engine tests. The engine reports that truly, but it is the
# host, not what these tests test (benchmarks/openloop_schedule.py measures the schedule).
BEHIND = ["--behind-lag-us", "30000"]


@pytest.fixture
def engine() -> Path:
    found = openloop.installed()
    if not found:
        pytest.skip("regtrack-openloop is not installed (scripts/install.sh builds it)")
    return Path(found)


def spec_file(folder: Path, spec: dict) -> str:
    path = folder / "spec.json"
    path.write_text(json.dumps(spec))
    return str(path)


def run_engine(engine: Path, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(engine), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def one_line(proc: subprocess.CompletedProcess, code: int, *words: str) -> None:
    """Exit ``code``, nothing on stdout, one line on stderr holding ``words``."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    assert proc.stderr.startswith("regtrack-openloop: error: "), proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    for word in words:
        assert word in proc.stderr, (word, proc.stderr)


@contextlib.contextmanager
def redis_on_loopback(
    redis_server: str, workdir: Path
) -> Iterator[tuple[int, redis.Redis, subprocess.Popen]]:
    """A real redis-server that takes DEBUG (SLEEP, POPULATE), 1000 keys populated: its
    port, a client of it, its process."""
    port = procs.free_port()
    server = subprocess.Popen(
        [redis_server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--enable-debug-command", "yes", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    client = redis.Redis(port=port, socket_timeout=5)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.02)
        client.execute_command("DEBUG", "POPULATE", 1000, "key", 32)
        yield port, client, server
    finally:
        client.close()
        server.kill()
        server.wait()


def version_in_cargo_toml() -> str:
    text = (ROOT / "engine" / "Cargo.toml").read_text()
    match = re.search(r'^version = "([^"]+)"$', text, re.MULTILINE)
    assert match
    return match.group(1)


def test_version_is_the_crates(engine):
    proc = run_engine(engine, "--version")
    assert proc.returncode == 0
    assert proc.stdout == f"regtrack-openloop {version_in_cargo_toml()}\n"


@pytest.mark.parametrize(
    ("spec", "args", "words"),
    [
        ({"key_min": 1, "key_max": 9, "commands": [{"args": ["BLPOP", "q", "0"]}]}, [],
         ["BLPOP", "open loop"]),
        ({"key_min": 9, "key_max": 1}, [], ["key_min"]),
        (GET_SPEC, ["--rate", "-5"], ["--rate"]),
        (GET_SPEC, ["--arrival", "bursty"], ["--arrival"]),
        (GET_SPEC, ["--bogus", "1"], ["--bogus"]),
        (GET_SPEC, ["--switch-ms", "0"], ["--switch-ms"]),
        (GET_SPEC, ["--port", "1", "--port", "2", "--hgrm", "x"], ["--hgrm", "2 ports"]),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(engine, tmp_path, spec, args, words):
    spec_path = spec_file(tmp_path, spec)
    args = ["--rate", "100", *args] if "--rate" not in args else args
    one_line(run_engine(engine, "--spec", spec_path, *args), 2, *words)


def test_no_server_is_one_line_and_exit_3(engine, tmp_path):
    port = str(procs.free_port())
    proc = run_engine(engine, "--spec", spec_file(tmp_path, GET_SPEC), "--rate", "100",
                      "--port", port)  # fmt: skip
    one_line(proc, 3, f"127.0.0.1:{port}")


def test_a_server_lost_midway_is_one_line_and_exit_3(engine, tmp_path, redis_server):
    with redis_on_loopback(redis_server, tmp_path) as (port, _, server):
        proc = subprocess.Popen(
            [str(engine), "--spec", spec_file(tmp_path, GET_SPEC), "--rate", "1000",
             "--port", str(port), "--duration", "5", "--warmup", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(0.3)
        server.kill()  # at once (SHUTDOWN took 3.7 s here)
        out, err = proc.communicate(timeout=10)
    one_line(subprocess.CompletedProcess([], proc.returncode, out, err), 3, "lost the server")


def check_hdr(report: dict, hgrm: Path) -> None:
    """The histogram in the report decodes to the latencies reported (where the Python
    HdrHistogram package is installed), and the .hgrm file ends at the max and the count."""
    latency = report["latency_us"]
    with contextlib.suppress(ImportError):
        from hdrh.histogram import HdrHistogram

        decoded = HdrHistogram.decode(report["hdr"])  # base64 text, as the report holds it
        assert decoded.get_total_count() == latency["count"]
        assert decoded.get_max_value() / 1000 == pytest.approx(latency["max"], rel=0.002)
        # (not a tail percentile: the libraries round its rank differently, and two
        # neighbouring values in a sparse tail can be far apart)
        assert decoded.get_mean_value() / 1000 == pytest.approx(latency["mean"], rel=0.01)
    assert report["hdr_unit"] == "ns"
    lines = hgrm.read_text().splitlines()
    rows = [line.split() for line in lines if line.strip() and line.strip()[0].isdigit()]
    assert float(rows[-1][1]) == 1.0 and int(rows[-1][2]) == latency["count"]
    assert float(rows[-1][0]) == pytest.approx(latency["max"] / 1000, abs=0.002)  # ms


def test_keeps_its_schedule_against_a_real_server(engine, tmp_path, redis_server):
    """2000 GETs a second for 1 s over 4 connections: every one sent on time and answered."""
    hgrm = tmp_path / "latency.hgrm"
    with redis_on_loopback(redis_server, tmp_path) as (port, client, _):
        proc = run_engine(
            engine, "--spec", spec_file(tmp_path, GET_SPEC), "--port", str(port),
            "--rate", "2000", "--connections", "4", "--duration", "1", "--warmup", "0.2",
            "--arrival", "poisson", "--seed", "3", "--hgrm", str(hgrm), *BEHIND,
        )  # fmt: skip
        hits = client.info("stats")["keyspace_hits"]
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["behind"] is False, (report["behind_reasons"], report["lag_us"], report["cpu"])
    assert report["errors"] == {} and report["timeouts"] == 0
    assert report["completed"] == report["sent"] == report["intended"]
    assert report["completed"] == pytest.approx(2000, rel=0.1)  # Poisson: sd 45 of 2000
    assert hits >= report["completed"]  # warmup GETs hit too: the keys exist
    latency = report["latency_us"]
    assert 0 < latency["p50"] <= latency["p90"] <= latency["p99"] <= latency["p999"]
    assert latency["p999"] <= latency["max"]
    # a stall of the engine (the host) leaves the requests it touched out of the latency
    assert latency["count"] + report["tainted"] == report["completed"]
    assert set(report["stalls"]) == {"count", "total_ms", "max_ms"}
    assert report["tainted"] == 0 or report["stalls"]["count"] > 0
    lag = report["lag_us"]
    assert lag["p50"] <= lag["p99"] <= lag["max"] and lag["p50"] < 1000  # on time, mostly
    assert 0 < report["cpu"]["busy_fraction"] < 1
    check_hdr(report, hgrm)


def apart(server: subprocess.Popen) -> dict:
    """Keep the server off the engine's CPU (where there are two): a server catching up on
    the engine's CPU would preempt it, a true stall of the engine. Popen arguments for the
    engine."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return {}
    os.sched_setaffinity(server.pid, {cpus[1]})
    return {"preexec_fn": lambda: os.sched_setaffinity(0, {cpus[0]})}


def _gets(client) -> int:
    return int(client.info("commandstats").get("cmdstat_get", {}).get("calls", 0))


def test_a_server_pause_shows_in_every_request_it_delayed(engine, tmp_path, redis_server):
    """Coordinated omission: the server sleeps 200 ms; the 10% of the requests that were
    due meanwhile are sent on schedule and each is timed from its intended time, so p99
    is of the order of the pause (a closed loop would show 4 slow requests of 4000). The
    pause is no stall of the engine: it taints none of them. (--stall-us 5000: a true
    stall of this VM's engine CPU over the pause, 0.5 ms about once a second, would taint
    the requests then in flight, rightly; one of 5 ms seldom comes in 0.2 s, and the
    bounds below allow for what it taints when it does.)"""
    with redis_on_loopback(redis_server, tmp_path) as (port, client, server):
        proc = subprocess.Popen(
            [str(engine), "--spec", spec_file(tmp_path, GET_SPEC), "--port", str(port),
             "--rate", "2000", "--connections", "4", "--duration", "2", "--warmup", "0.2",
             "--stall-us", "5000", *BEHIND],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **apart(server),
        )  # fmt: skip
        # About 0.3 s into the measured window, by the engine's own progress (its start-up
        # time varies: a pause timed by the clock fell partly in its warm-up now and then).
        deadline = time.monotonic() + 10
        while _gets(client) < 1000 and time.monotonic() < deadline:
            time.sleep(0.01)
        client.execute_command("DEBUG", "SLEEP", "0.2")
        out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    report = json.loads(out)
    latency, tainted = report["latency_us"], report["tainted"]
    # A host stall of the engine t ms into the pause taints every request then in flight
    # (the 2 per ms sent since the pause began), rightly; those after it still wait
    # 200 - t ms. So the longest wait plus the tainted share holds ~190 ms either way.
    assert latency["max"] / 1000 + tainted / 2 >= 150, (latency, tainted, report["stalls"])
    assert latency["p99"] >= 50_000 or tainted >= 200, (latency, tainted, report["stalls"])
    assert latency["p50"] < 10_000, latency  # the other 90% were not delayed
    assert report["completed"] == report["intended"] == 4000  # constant arrivals: exact
    # the server was behind, not the engine
    assert report["behind"] is False, (report["behind_reasons"], report["lag_us"], report["cpu"])
    # ... so its pause is no stall of the engine and taints nothing: all 400 requests due
    # during it are in the latency, at 10 ms or more (a stall of the host itself could
    # still taint a few, never one of 200 ms)
    stalls = report["stalls"]
    assert stalls["max_ms"] < 100, stalls
    # a stall of the host taints what was due during it (2000/s) and what was in flight:
    # a few, or, if it fell in the pause, up to the 400 sent since the pause began
    due = 2000 * stalls["total_ms"] / 1000
    in_flight = 10 * stalls["count"] + (400 if stalls["count"] else 0)
    assert report["tainted"] <= due + in_flight, (report["tainted"], stalls)
    assert latency["count"] + report["tainted"] == 4000
    from hdrh.histogram import HdrHistogram

    recorded = HdrHistogram.decode(report["hdr"]).get_recorded_iterator()
    slow = sum(i.count_at_value_iterated_to for i in recorded if i.value_iterated_to >= 10**7)
    # each of the ~400 due during the pause is timed slow, or tainted by a host stall that
    # fell in it (one was seen: 5 stalls, 37 ms, 36 tainted)
    assert slow + report["tainted"] >= 370, (slow, report["tainted"], stalls)


def test_a_stall_of_the_engine_taints_the_requests_it_touched(engine, tmp_path, redis_server):
    """The engine stopped for 150 ms (SIGSTOP, SIGCONT) mid-run: a stall of its own, not
    the server's. The requests due or in flight meanwhile (about 300 at 2000/s) are counted
    as tainted and left out of the latency, whose max stays far below the stall; the
    schedule lag still shows it. (150 ms, not 50: a noisy host delays the server by 20 ms
    and more now and then, which is latency; it does not by 75 ms.)"""
    with redis_on_loopback(redis_server, tmp_path) as (port, _, server):
        proc = subprocess.Popen(
            [str(engine), "--spec", spec_file(tmp_path, GET_SPEC), "--port", str(port),
             "--rate", "2000", "--connections", "4", "--duration", "1.5", "--warmup", "0.2",
             *BEHIND],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **apart(server),
        )  # fmt: skip
        time.sleep(0.8)  # about 0.6 s into the measured window
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(0.15)
        os.kill(proc.pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    report = json.loads(out)
    stalls, latency, lag = report["stalls"], report["latency_us"], report["lag_us"]
    info = (stalls, report["tainted"], latency, lag)
    assert report["completed"] == report["intended"] == 3000, info
    assert stalls["count"] >= 1 and stalls["max_ms"] >= 140, info
    assert stalls["total_ms"] >= stalls["max_ms"], info
    assert report["tainted"] >= 280, info  # the ~300 due during the stall, and more
    assert latency["count"] + report["tainted"] == 3000, info
    assert latency["max"] < 75_000, info  # far below the 150 ms the engine was stopped
    assert lag["max"] >= 140_000, info  # the engine's own delay still shows


def test_two_ports_take_turns_of_the_one_stream(engine, tmp_path, redis_server):
    """Pairing in time: 2000 GETs a second, constant spacing, cut into 100 ms windows that
    go A B | B A A B B A A B B A A B (warm-up | measured): each server gets exactly half
    of the stream on connections of its own, and a report of its own over its requests."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        redis_on_loopback(redis_server, tmp_path / "a") as (port_a, client_a, _),
        redis_on_loopback(redis_server, tmp_path / "b") as (port_b, client_b, _),
    ):
        clients = [client_a, client_b]
        for client in clients:
            client.config_resetstat()
        proc = run_engine(
            engine, "--spec", spec_file(tmp_path, GET_SPEC), "--port", str(port_a),
            "--port", str(port_b), "--switch-ms", "100", "--rate", "2000",
            "--connections", "2", "--duration", "1.2", "--warmup", "0.2", *BEHIND,
        )  # fmt: skip
        gets = [c.info("commandstats")["cmdstat_get"]["calls"] for c in clients]
        conns = [c.info("stats")["total_connections_received"] for c in clients]
    assert proc.returncode == 0, proc.stderr
    paired = json.loads(proc.stdout)
    assert set(paired) == {"version", "switch_ms", "cpu", "servers"}
    assert paired["switch_ms"] == 100
    reports = paired["servers"]
    assert [r["port"] for r in reports] == [port_a, port_b]
    # 200 requests a window: 1 warm-up window and 6 measured windows each
    assert [r["windows"] for r in reports] == [6, 6]
    assert [r["measured_s"] for r in reports] == pytest.approx([0.6, 0.6])
    assert gets == [1400, 1400], gets  # both got requests: half of the 2800 each
    assert conns == [2, 2], conns  # --connections 2 each (the clients above connected before)
    sent = sum(r["sent"] for r in reports)
    assert sum(r["completed"] for r in reports) == sent == 2400
    from hdrh.histogram import HdrHistogram

    for r in reports:
        assert r["completed"] == r["sent"] == r["intended"] == 1200
        assert r["errors"] == {} and r["timeouts"] == 0
        assert r["rate_intended"] == 2000 and r["achieved_rate"] == pytest.approx(2000)
        assert r["behind"] is False, (r["behind_reasons"], r["lag_us"], r["cpu"])
        assert r["cpu"] == paired["cpu"]
        latency = r["latency_us"]
        assert 0 < latency["p50"] <= latency["p99"] <= latency["max"]
        decoded = HdrHistogram.decode(r["hdr"])
        assert decoded.get_total_count() == latency["count"] == 1200 - r["tainted"]
        assert r["stalls"] == reports[0]["stalls"]  # the engine's: the same for each
        assert decoded.get_max_value() / 1000 == pytest.approx(latency["max"], rel=0.002)
