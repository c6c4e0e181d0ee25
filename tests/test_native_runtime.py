"""A real redis-server, started pinned and stopped for sure."""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from regtrack.bench import seeds, serverstats
from regtrack.bench.runtimes.base import ImpostorError, ServerStartError, check_token
from regtrack.bench.runtimes.native import native_server
from regtrack.core import procs
from tests.conftest import decoy_server


def _affinity(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError("no Cpus_allowed_list")


def test_server_is_pinned_on_loopback_without_persistence_and_stopped(redis_server):
    with native_server(redis_server, (0,)) as server:
        pid, port = server.pid, server.port
        assert _affinity(pid) == "0"
        client = server.client()
        assert client.ping()
        config = client.config_get("*")
        assert config["bind"] == "127.0.0.1"
        assert config["save"] == ""
        assert config["appendonly"] == "no"
        assert config["protected-mode"] == "yes"
        client.close()
        assert server.info["redis_version"]
        assert "redis_build_id" in server.server_identity()
        assert server.alive()
    assert not Path(f"/proc/{pid}").exists()
    assert not procs.port_in_use(port)


def test_the_end_of_a_window_is_seen_without_running_a_command(redis_server):
    """An instruction window waits for the load generator's connections to be freed by
    counting the server's sockets in /proc (no command runs in the server): the count
    rises with each connection and the wait ends once the server has closed them."""
    with native_server(redis_server, (0,)) as server:
        control = server.client()
        assert control.ping()
        pid = server.pid
        before = procs.socket_count(pid)
        assert before is not None and before >= 2, "the listening socket and the control one"
        clients = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(3)]
        for conn in clients:
            conn.sendall(b"PING\r\n")
            assert conn.recv(16) == b"+PONG\r\n"
        assert procs.socket_count(pid) == before + 3
        assert not serverstats.wait_sockets(pid, before, control, timeout=0.2)
        calls = serverstats.command_calls(control, "client|list")
        for conn in clients:
            conn.close()
        assert serverstats.wait_sockets(pid, before, control, timeout=10)
        assert procs.socket_count(pid) == before
        assert serverstats.command_calls(control, "client|list") == calls
        assert serverstats.wait_idle(control, timeout=10)  # the way that runs a command
        assert serverstats.command_calls(control, "client|list") > calls
        control.close()
    assert procs.socket_count(pid) is None, "a process that is gone has no count"


def test_server_is_stopped_when_the_block_fails(redis_server):
    with pytest.raises(RuntimeError), native_server(redis_server, (0,)) as server:
        pid = server.pid
        raise RuntimeError("boom")
    assert not Path(f"/proc/{pid}").exists()


def test_a_binary_that_is_not_redis_fails_clearly(tmp_path):
    fake = tmp_path / "redis-server"
    fake.write_text("#!/bin/sh\necho 'I am not redis' >&2\nexit 7\n")
    fake.chmod(0o755)
    with (
        pytest.raises(ServerStartError, match="exited with code 7: I am not redis"),
        native_server(str(fake), (0,)),
    ):
        pass


def test_a_taken_port_is_skipped(redis_server, monkeypatch):
    """Another program grabs the chosen port before the server binds it (a real race)."""
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    ports = iter([taken])
    real = procs.free_port
    monkeypatch.setattr(procs, "free_port", lambda host="127.0.0.1": next(ports, None) or real())
    try:
        with native_server(redis_server, (0,)) as server:
            assert server.port != taken
            assert server.client().ping()
    finally:
        squatter.close()


def test_a_server_that_hangs_is_killed_after_the_timeout(tmp_path):
    hang = tmp_path / "redis-server"
    hang.write_text("#!/bin/sh\nexec sleep 60\n")
    hang.chmod(0o755)
    with (
        pytest.raises(ServerStartError, match="did not answer PING within 1 s"),
        native_server(str(hang), (0,), timeout=1.0),
    ):
        pass


def _run_id(binary: str, seed: str | None, wrapper: list[str] | None = None) -> str:
    with native_server(binary, (0,), seed=seed, wrapper=wrapper, timeout=60) as server:
        return str(server.info["run_id"])


def test_a_seed_is_what_the_server_reads_from_dev_urandom(redis_server):
    """Redis draws its run_id (like its hash seeds) from /dev/urandom at start-up: with
    regtrack's seed two processes draw the same, with another seed or none they differ."""
    if seeds.native_problem():
        pytest.skip(f"seeds cannot be controlled here: {seeds.native_problem()}")
    first, again = _run_id(redis_server, "aa11"), _run_id(redis_server, "aa11")
    assert first == again
    assert _run_id(redis_server, "bb22") != first
    assert _run_id(redis_server, None) != _run_id(redis_server, None)


def test_a_seed_reaches_a_server_under_callgrind(redis_server):
    from regtrack.bench.callgrind import control

    valgrind, _ = control.require()
    if seeds.native_problem():
        pytest.skip(f"seeds cannot be controlled here: {seeds.native_problem()}")
    with tempfile.TemporaryDirectory() as tmp:
        wrapper = control.wrapper(valgrind, Path(tmp))
        under = _run_id(redis_server, "cc33", wrapper)
    assert under == _run_id(redis_server, "cc33")


def test_seed_bytes_are_fixed_per_repetition_and_differ_between_them():
    assert seeds.for_repetition(3) == seeds.for_repetition(3)
    assert len({seeds.for_repetition(r) for r in range(50)}) == 50
    data = seeds.seed_bytes(seeds.for_repetition(0))
    assert len(data) == seeds.SEED_FILE_BYTES and data == seeds.seed_bytes(seeds.for_repetition(0))


def test_the_server_proves_it_is_the_one_started(redis_server):
    """Each server's `dir` is its own directory, read back before use: a server with
    another `dir` on that port is an impostor, and regtrack never shuts it down."""
    with native_server(redis_server, (0,)) as server:
        client = server.client()
        assert server.token_dir and client.config_get("dir")["dir"] == server.token_dir
        check_token(client, server.port, server.token_dir)
        with pytest.raises(ImpostorError, match="another server"):
            check_token(client, server.port, server.token_dir + "-not-this-one")
        client.close()


def test_a_server_that_took_the_port_is_never_measured_nor_stopped(
    redis_server, tmp_path, monkeypatch
):
    """Drill: another redis-server holds the port regtrack chose. Ours cannot bind it, or
    the other one answers first; either way regtrack starts on another port, reads its
    own token back, and leaves the other server running."""
    with decoy_server(redis_server, tmp_path) as (port, other, decoy):
        ports = iter([port])
        real = procs.free_port
        monkeypatch.setattr(
            procs, "free_port", lambda host="127.0.0.1": next(ports, None) or real()
        )
        with native_server(redis_server, (0,)) as server:
            assert server.port != port
            client = server.client()
            assert client.config_get("dir")["dir"] == server.token_dir
            client.close()
        assert other.ping() and decoy.poll() is None, "the other server was left alone"


# A tracer that attaches (PTRACE_SEIZE) and then never waits for its tracee, as vgdb does
# while it delivers a callgrind command to valgrind.
HOLDING_TRACER = """
import ctypes, sys, time
libc = ctypes.CDLL(None, use_errno=True)
if libc.ptrace(0x4206, int(sys.argv[1]), None, None) != 0:
    sys.exit(f"ptrace: errno {ctypes.get_errno()}")
print("attached", flush=True)
time.sleep(60)
"""


def test_a_server_killed_while_traced_is_seen_dead_at_once():
    """The server killed during a callgrind command (vgdb): its parent is not told while
    the tracer holds it, so liveness must not rest on poll() alone (it once took 120 s)."""
    server = procs.spawn(["sleep", "60"])
    tracer = subprocess.Popen(
        [sys.executable, "-c", HOLDING_TRACER, str(server.pid)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert tracer.stdout.readline().strip() == "attached"
        assert procs.running(server)
        os.kill(server.pid, signal.SIGKILL)
        time.sleep(0.5)
        assert server.poll() is None, "the premise: waitpid does not report it yet"
        assert not procs.running(server)
    finally:
        tracer.kill()
        tracer.wait(5)
        procs.stop(server)


def test_a_descriptor_closed_while_counted_leaves_a_count(monkeypatch):
    """A connection the server frees between the listing of /proc/PID/fd and the reading
    of its link is no longer held: the count goes on (it used to give None, and the window
    then fell back to CLIENT LIST, a command run inside an instruction count)."""
    held = socket.socketpair()
    real, missed = os.readlink, []

    def closing(path: str) -> str:
        if not missed:
            missed.append(path)
            raise FileNotFoundError(path)
        return real(path)

    monkeypatch.setattr(procs.os, "readlink", closing)
    try:
        count = procs.socket_count(os.getpid())
    finally:
        for end in held:
            end.close()
    assert missed and count is not None and count >= 1
