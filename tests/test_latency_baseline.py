"""`ci --baseline-name` against a stored run with open-loop (latency) trials. In process,
on modelled trials (tests/fakebench.py); a real latency run is test_latency_real.py."""

from __future__ import annotations

import json
import sqlite3

from tests import fakebench
from tests.conftest import cli_in_process

FAST = ["--pipelines", "10", "--repetitions", "4", "--no-report", "--pairing", "separate"]


def _saved(tmp_path, redis_server, model, *latency: str) -> str:
    """A run of `shipped` alone (with ``latency``'s open-loop options), saved as 'prod'."""
    db = str(tmp_path / "r.db")
    first = cli_in_process("run", "--versions", f"shipped=bin:{redis_server}", *FAST,
                           *latency, "--db", db, measuring=model)  # fmt: skip
    assert first.returncode == 0, first.stderr
    saved = cli_in_process("baseline", "save", "prod", "--run", "1", "--db", db)
    assert saved.returncode == 0, saved.stderr
    return db


def _gate(db: str, redis_server: str, model, *extra: str):
    return cli_in_process(
        "ci", "--baseline-name", "prod", "--candidate-version", f"new=bin:{redis_server}",
        "--pipelines", "10", "--metric", "throughput", "--no-report", "--db", db, *extra,
        measuring=model,
    )  # fmt: skip


def _rates(db: str, run_id: int) -> dict[str, set[float]]:
    rows = sqlite3.connect(db).execute(
        "SELECT t.point, o.offered_rate FROM trial_open_loop o JOIN trials t ON t.id = "
        "o.trial_id WHERE t.run_id = ?",
        (run_id,),
    )
    found: dict[str, set[float]] = {}
    for point, rate in rows:
        found.setdefault(point, set()).add(rate)
    return found


def test_a_gate_without_latency_leaves_the_stored_open_loop_trials_out(tmp_path, redis_server):
    """Points the gate does not measure (the stored run's loads) have nothing to pair with:
    they are not compared, so they cannot keep the gate undecided."""
    model = fakebench.Model()
    db = _saved(tmp_path, redis_server, model, "--load", "0.5")
    out = tmp_path / "gate.json"
    gate = _gate(db, redis_server, model, "--json", str(out))
    assert gate.returncode == 0, gate.stdout + gate.stderr
    data = json.loads(out.read_text())
    assert [g["metric"] for g in data["gate"]] == ["throughput"]
    assert "load=0.5" not in gate.stdout and _rates(db, 2) == {}
