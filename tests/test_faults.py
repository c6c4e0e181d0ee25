"""Fault drills against real runs: killed servers and load generators, resumes, CPU locks,
a locked database, a read-only directory, a full disk. After each: what was measured
before the fault is stored, nothing is left running, the message says what happened."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from regtrack.core.records import InvalidReason, reasons_text
from tests.conftest import (
    SHORT_RUN,
    cli_in_process,
    our_processes,
    run_cli,
    settings_dir,
    start_cli,
    wait_for_trials,
)
from tests.reasons import has_code, stored_reasons

pytestmark = pytest.mark.usefixtures("redis_benchmark_bin")
# Half-second trials: these drills are about what a fault leaves behind, not about figures.
# redis-benchmark named: under the quiet rules below a memtier probe would pass for
# saturating (nothing is client-bound), and these tests kill or watch redis-benchmark.
FAST = [*SHORT_RUN, "--duration", "0.5", "--warmup", "0.1", "--loadgen", "redis-benchmark"]


@pytest.fixture(autouse=True)
def quiet_machine_rules(tmp_path, monkeypatch):
    """About faults, not noise: trials on a busy machine must stay valid; own CPU locks."""
    configs = settings_dir(
        tmp_path,
        "[run]\ncontention_limit_pct = 100\nclient_bound_cpu_pct = 100\nserver_bound_cpu_pct = 0\n",
    )
    monkeypatch.setenv("REGTRACK_CONFIG_DIR", str(configs))
    monkeypatch.setenv("REGTRACK_LOCK_DIR", str(tmp_path / "locks"))


def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return start_cli("run", *args, "--no-report", env=env)


def children(parent: int, name: str) -> list[int]:
    """Processes called ``name`` whose parent is ``parent`` (redis-server renames its
    command line, so the process tree is what finds it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if ppid == parent and comm.startswith(name):
            found.append(int(entry.name))
    return found


def status(db: Path, run_id: int = 1) -> tuple[str, str | None]:
    row = sqlite3.connect(db).execute(
        "SELECT status, status_detail FROM runs WHERE id = ?", (run_id,)
    )
    return row.fetchone()


def count(db: Path, where: str = "1") -> int:
    return sqlite3.connect(db).execute(f"SELECT COUNT(*) FROM trials WHERE {where}").fetchone()[0]


def test_a_killed_server_ends_its_visit_the_run_goes_on_and_resume_completes(
    tmp_path, redis_server
):
    """Both servers paired in time (the default): the point's other trial cannot be paired
    and is invalid too, for a reason of its own. (A server killed in a visit of its own:
    test_instructions' server killed under callgrind.)"""
    db = tmp_path / "r.db"
    proc = start(
        "--versions", f"a=bin:{redis_server},b=bin:{redis_server}", "--pipelines", "1,5,10",
        "--repetitions", "2", *FAST, "--db", str(db),
    )  # fmt: skip
    assert wait_for_trials(db, 1, timeout=60) >= 1
    victim = children(proc.pid, "redis-server")[0]
    os.kill(victim, signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    assert "exited during" in err and "the run goes on" in err and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("regtrack: error: run 1 is incomplete:")
    state, detail = status(db)
    assert state == "incomplete" and "--resume 1" in detail
    assert count(db, has_code(InvalidReason.SERVER_DIED)) == 1
    measured = count(db)
    assert 3 < measured < 12, "later visits ran, the dead visit's rest did not"
    assert not our_processes()

    resumed = run_cli("run", "--resume", "1", "--db", str(db), "--no-report")
    assert resumed.returncode == 0, resumed.stderr
    assert f"{12 - measured} trials to run" in resumed.stderr
    assert status(db)[0] == "complete"
    seqs = [r[0] for r in sqlite3.connect(db).execute("SELECT seq FROM trials ORDER BY seq")]
    assert seqs == list(range(12)), "every planned trial exactly once"


def test_a_killed_load_generator_makes_one_trial_invalid(tmp_path, redis_server):
    db = tmp_path / "r.db"
    proc = start(
        "--versions", f"bin:{redis_server}", "--pipelines", "1,10", "--repetitions", "1",
        "--duration", "4", "--warmup", "0.3", "--keys", "2000", "--loadgen", "redis-benchmark",
        "--db", str(db),
    )  # fmt: skip
    deadline = time.monotonic() + 60
    killed = False
    while time.monotonic() < deadline and not killed:
        for line in our_processes():
            if "redis-benchmark" in line and "-t get" in line:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(line.split(":")[0]), signal.SIGKILL)
                    killed = True
                    break
        time.sleep(0.05)
    assert killed, "never saw the measured redis-benchmark"
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert status(db)[0] == "complete"
    (reasons,) = stored_reasons(db, "t.valid = 0")
    reason = reasons_text(reasons)
    assert "exit" in reason or "killed" in reason or "signal" in reason, reason
    assert count(db) == 2 and not our_processes()


def test_resume_refuses_a_binary_that_changed(tmp_path, redis_server):
    binary = tmp_path / "redis-server"
    shutil.copy(redis_server, binary)
    db = tmp_path / "r.db"
    proc = start(
        "--versions", f"bin:{binary}", "--pipelines", "1,5,10", "--repetitions", "2",
        *FAST, "--db", str(db),
    )  # fmt: skip
    assert wait_for_trials(db, 1, timeout=60) >= 1
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130 and status(db)[0] == "interrupted"
    original = binary.read_bytes()
    binary.write_bytes(original + b"\0")
    refused = run_cli("run", "--resume", "1", "--db", str(db))
    assert refused.returncode == 2
    assert refused.stderr.startswith("regtrack: error: cannot resume run 1: ")
    assert "changed since the run started" in refused.stderr
    assert refused.stderr.count("\n") == 1
    binary.write_bytes(original)
    resumed = run_cli("run", "--resume", "1", "--db", str(db), "--no-report")
    assert resumed.returncode == 0, resumed.stderr
    assert count(db) == 6 and status(db)[0] == "complete"
    again = run_cli("run", "--resume", "1", "--db", str(db))
    assert again.returncode == 2 and "nothing is missing" in again.stderr


def test_two_runs_never_benchmark_the_same_cpus_at_once(tmp_path, redis_server):
    first_db, second_db = tmp_path / "a.db", tmp_path / "b.db"
    first = start(
        "--versions", f"bin:{redis_server}", "--pipelines", "1,5,10", "--repetitions", "4",
        *FAST, "--db", str(first_db),
    )  # fmt: skip
    assert wait_for_trials(first_db, 1, timeout=60) >= 1
    # Both start while the first one measures (one after the other, their start-ups on
    # this busy 2-CPU machine could outlast its 12 short trials).
    queued = start(
        "--versions", f"bin:{redis_server}", "--pipelines", "10", "--repetitions", "1",
        *FAST, "--db", str(second_db),
    )  # fmt: skip
    refused = run_cli(
        "run", "--versions", f"bin:{redis_server}", "--no-wait", *FAST,
        "--db", str(tmp_path / "c.db"),
    )  # fmt: skip
    assert refused.returncode == 3, refused.stderr
    holders = (f"is being benchmarked by pid {first.pid}", f"benchmarked by pid {queued.pid}")
    assert any(text in refused.stderr for text in holders), refused.stderr
    first.communicate(timeout=120)
    _, queued_err = queued.communicate(timeout=120)
    assert first.returncode == 0 and queued.returncode == 0, queued_err
    assert "waiting for it" in queued_err
    first_end = sqlite3.connect(first_db).execute("SELECT finished_at FROM runs").fetchone()[0]
    second_start = sqlite3.connect(second_db).execute("SELECT created_at FROM runs").fetchone()[0]
    assert second_start >= first_end, "the second run started measuring after the first ended"


def test_a_database_locked_by_another_process(tmp_path, redis_server):
    db = tmp_path / "r.db"
    args = ["--versions", f"bin:{redis_server}", "--pipelines", "1,5,10", "--repetitions", "2",
            *FAST, "--db", str(db)]  # fmt: skip
    # A short lock: the run waits for it and loses nothing.
    proc = start(*args)
    assert wait_for_trials(db, 1, timeout=60) >= 1
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    time.sleep(2.5)
    holder.execute("ROLLBACK")
    proc.communicate(timeout=120)
    assert proc.returncode == 0 and count(db) == 6

    # A lock held past the timeout: a clean stop, trials kept, then resume.
    proc = start(*args, env={"REGTRACK_DB_TIMEOUT_S": "1"})
    assert wait_for_trials(db, 7, timeout=60) >= 7
    holder.execute("BEGIN EXCLUSIVE")
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        holder.execute("ROLLBACK")
    assert proc.returncode == 3, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("regtrack: error: database") and "stayed locked" in last
    assert "Traceback" not in err and not our_processes()
    kept = count(db, "run_id = 2")
    assert kept >= 1
    resumed = run_cli("run", "--resume", "2", "--db", str(db), "--no-report")
    assert resumed.returncode == 0, resumed.stderr
    assert count(db, "run_id = 2") == 6


@contextlib.contextmanager
def tmpfs(path: Path, options: str):
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_read_only_database_directory_is_one_line_and_exit_2(tmp_path, redis_server):
    with tmpfs(tmp_path / "ro", "ro,size=1m") as ro:
        proc = cli_in_process("run", "--versions", f"bin:{redis_server}", "--db", str(ro / "r.db"))
    assert proc.returncode == 2
    assert proc.stderr.startswith("regtrack: error: cannot write the database")
    assert "read-only" in proc.stderr and proc.stderr.count("\n") == 1


def test_a_full_disk_stops_cleanly_and_keeps_what_was_stored(tmp_path, redis_server):
    with tmpfs(tmp_path / "small", "size=400k") as small:
        db = small / "r.db"
        proc = start(
            "--versions", f"a=bin:{redis_server},b=bin:{redis_server}", "--pipelines",
            "1,5,10,15,20,25,30", "--repetitions", "6", *FAST, "--db", str(db),
        )  # fmt: skip
        assert wait_for_trials(db, 1, timeout=60) >= 1
        # Fill the rest of the disk while the run goes on.
        with contextlib.suppress(OSError), open(small / "filler", "wb") as filler:
            while True:
                filler.write(b"\0" * 4096)
                filler.flush()
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 3, err
        assert "is full" in err.strip().splitlines()[-1] and "Traceback" not in err
        kept = count(db)
        (small / "filler").unlink()
        assert kept >= 1
        assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert not our_processes()


def test_a_server_that_refuses_connections_invalidates_trials_and_the_run_goes_on(
    tmp_path, redis_server
):
    import resource
    import socket

    import redis

    db = tmp_path / "r.db"
    # An outsider may not CONFIG SET (the server's access rules), so the fault is every
    # connection slot taken: the run starts with 128 files, which leaves its servers 96
    # clients (Redis keeps 32 back), and the outsider holds them all.
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "regtrack", "run", "--no-report",
            "--versions", f"a=bin:{redis_server},b=bin:{redis_server}", "--pipelines", "1,5,10",
            "--repetitions", "1", *FAST, "--pairing", "separate", "--db", str(db),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128)),
    )  # fmt: skip
    assert wait_for_trials(db, 1, timeout=60) >= 1
    (pid,) = children(proc.pid, "redis-server")
    title = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    port = int(re.search(r":(\d+)", title).group(1))
    held: list[socket.socket] = []
    try:
        # Slots a running trial holds come free when it ends: take them as they do, all
        # but a few (regtrack's own connection), until the run stops this server.
        with redis.Redis(port=port) as outsider:
            slots = int(outsider.config_get("maxclients")["maxclients"])
        assert slots <= 100, slots
        deadline = time.monotonic() + 30
        while len(held) < slots - 4 and time.monotonic() < deadline:
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=5)
            except (ConnectionRefusedError, ConnectionResetError):
                break  # the run stopped this server (a reset: while it was closing)
            try:
                conn.sendall(b"PING\r\n")
                refused = b"max number of clients" in conn.recv(200)
            except (ConnectionResetError, BrokenPipeError):
                conn.close()
                break
            if refused:
                conn.close()
                time.sleep(0.02)
            else:
                held.append(conn)
        _, err = proc.communicate(timeout=120)
    finally:
        for conn in held:
            conn.close()
    assert proc.returncode == 0, err
    assert status(db)[0] == "complete" and "Traceback" not in err
    reasons = stored_reasons(db, "g.label = 'a' AND t.valid = 0")
    # Refused while warming up (the load generator says why), or mid-trial (the server
    # counted the refusals: ERR replies), whichever the slots ran out in.
    assert reasons and all(
        "max number of clients" in reasons_text(r)
        or any(e.code is InvalidReason.ERROR_REPLIES and "(ERR" in e.detail for e in r)
        for r in reasons
    ), reasons
    assert count(db, "target_id = (SELECT id FROM targets WHERE label = 'b') AND valid = 1") == 3
