"""A real redis-server, started pinned and stopped for sure."""

import socket
from pathlib import Path

import pytest

from regtrack import procs
from regtrack.runtimes.base import ServerStartError
from regtrack.runtimes.native import native_server


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
