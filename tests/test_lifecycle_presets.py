"""Every lifecycle preset runs clean on a real server: its scripts load, no reply is an
error, every task enqueued is done, and the queue holds nothing at the end (what a preset
checked only from its library's source, BullMQ's and Sidekiq's, can be shown to do here)."""

from __future__ import annotations

import json
import subprocess

import pytest

from regtrack.bench.loadgen import openloop
from regtrack.workloads.files import load_workload
from tests import library_traffic as lt
from tests.test_lifecycle_workload import LIFECYCLE_PRESETS

pytestmark = [pytest.mark.slow]


@pytest.mark.parametrize("name", LIFECYCLE_PRESETS)
def test_every_preset_runs_clean_on_a_real_server(tmp_path, name):
    workload = load_workload(name)
    # The engine's commands per task are those sent in the window over the tasks completed
    # in it: a steady state. arq polls every 0.5 s and works through what it read in a
    # burst, so a 0.6 s window could end with a burst half done (2x the count, seen).
    seconds = "2" if workload.dequeue.empty_wait_ms >= 200 else "0.6"
    doc = tmp_path / "lifecycle.json"
    doc.write_text(json.dumps(workload.engine_document()))
    with lt.server() as srv:
        for command in workload.setup_commands():
            srv.client.execute_command(*command)
        srv.client.config_resetstat()  # redis-py's own CLIENT SETINFO fails on 7.0
        out = subprocess.run(
            ["taskset", "-c", lt.DRIVER_CPU, openloop.locate().path, "--lifecycle", str(doc),
             "--port", str(srv.port), "--rate", "500", "--duration", seconds, "--warmup", "0"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        report = json.loads(out.stdout)
        errors = srv.client.info("errorstats")
        calls = {k: v["calls"] for k, v in srv.client.info("commandstats").items()}
    assert report["errors"] == {} and errors == {}, (report["error_commands"], errors)
    assert report["left"] == 0 and report["completed"] == report["enqueued"] > 100
    assert report["foreign"] == 0
    # every task's enqueue and process commands reached the server (a script's own calls
    # and a transaction's MULTI/EXEC are counted by the server as the file writes them)
    per_task = sum(len(s.commands) for s in (*workload.enqueue, *workload.process))
    assert sum(calls.values()) >= per_task * report["completed"], (per_task, calls)
    # ... and the engine's windowed count agrees, where its window is a steady state: a
    # poller works through each poll's tasks in a burst, and a window that ends mid-burst
    # counts that burst's commands over fewer tasks (arq: 26.4 against the server's 23.0)
    if workload.dequeue.empty_wait_ms < 200:
        assert sum(calls.values()) / report["completed"] >= report["commands_per_task"] * 0.9
