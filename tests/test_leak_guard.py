"""The guards that prove nothing is left running must be able to see a leak.

The leak-guard fixture (tests/conftest.py) finds servers by process tree and executable,
because redis-server rewrites its command line; these tests leak one on purpose. The
drills kill regtrack itself with -9 and check that what it started dies with it
(PR_SET_PDEATHSIG) or is removed by the next run (containers).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import redis

from regtrack.bench.runtimes.base import connect
from regtrack.core import procs
from tests.conftest import our_processes, start_cli, wait_for_trials


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_the_guard_sees_a_leaked_daemonized_server(redis_server, tmp_path):
    """A server that outlived its parent (here: it daemonized, so its parent exited),
    with a command line rewritten to `redis-server 127.0.0.1:PORT`."""
    workdir = tmp_path / "regtrack-server-leak"
    workdir.mkdir()
    port = procs.free_port()
    subprocess.run(
        [redis_server, "--port", str(port), "--bind", "127.0.0.1", "--daemonize", "yes",
         "--save", "", "--dir", str(workdir), "--pidfile", str(workdir / "pid")],
        check=True,
    )  # fmt: skip
    client = connect("127.0.0.1", port, timeout=1.0)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # up, with its pid written and its title set
        with contextlib.suppress(redis.ConnectionError, ValueError, OSError):
            pid = int((workdir / "pid").read_text())
            if client.ping():
                break
        time.sleep(0.05)
    client.close()
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        assert b"regtrack-server-" not in cmdline, "the title was rewritten"
        assert any(line.startswith(f"{pid}:") for line in our_processes()), our_processes()
    finally:
        os.kill(pid, signal.SIGKILL)
        while not _gone(pid):
            time.sleep(0.02)
    assert not any(line.startswith(f"{pid}:") for line in our_processes())


def _start_run(db: Path, *extra: str) -> subprocess.Popen:
    return start_cli("run", *extra, "--db", str(db), "--no-report")


def test_what_regtrack_started_dies_with_it_on_kill_9(tmp_path, redis_server):
    """Drill: SIGKILL regtrack while a trial runs. PR_SET_PDEATHSIG kills its server and
    load generator (orphans would be re-parented to this process, and seen), and the
    trials already stored stay in the database."""
    db = tmp_path / "r.db"
    proc = _start_run(
        db, "--versions", f"bin:{redis_server}", "--pipelines", "1,10", "--repetitions", "3",
        "--duration", "3", "--warmup", "0.3", "--keys", "2000",
    )  # fmt: skip
    try:
        assert wait_for_trials(db, 1, timeout=90) >= 1
        deadline = time.monotonic() + 30
        running: list[str] = []
        while time.monotonic() < deadline:
            running = our_processes()
            if any("redis-benchmark" in p for p in running) and any(
                "redis-server" in p for p in running
            ):
                break
            time.sleep(0.05)
        assert any("redis-benchmark" in p for p in running), running
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 10
    while our_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not our_processes()
    kept = sqlite3.connect(db).execute("SELECT COUNT(*) FROM trials").fetchone()[0]
    assert kept >= 1
