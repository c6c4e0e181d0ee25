"""The one real traffic sample: `regtrack mix capture --sample` against a real redis-server
with a password, a client that logs in during the sample and stores a token under a
personal key name. Nothing of them reaches the file, the output or the server's data; the
sample stops at its bounds and sends nothing that changes the server's data."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import redis

from regtrack.bench.runtimes.native import native_server
from regtrack.workloads import capture
from regtrack.workloads.model import MixWorkload
from regtrack.workloads.traffic import sampled
from tests.conftest import run_cli

PASSWORD = "sample-Pa55-c0ffee"
TOKEN = "tok9f8A7b6C5d4E3f2A1b0C9d8E7f6A5"
PERSON = "user:alice@example.com:session"
WRITES = {"set", "hset", "rpush", "lpush", "del", "expire", "multi", "exec", "blmove", "lmove"}


def _monitors(client: redis.Redis) -> list[dict]:
    """The MONITOR clients connected (flag O; 7.0's CLIENT LIST has no TYPE monitor)."""
    return [c for c in client.client_list() if "O" in c.get("flags", "")]


def _app(port: int, stop: threading.Event) -> None:
    """An application logging in (AUTH, then HELLO with AUTH) on fresh connections while
    the sample runs, storing a token under a personal key, and a small queue."""
    n = 0
    while not stop.is_set():
        client = redis.Redis(port=port, password=PASSWORD, protocol=3 if n % 2 else 2)
        try:
            client.set(PERSON, TOKEN)
            pipe = client.pipeline(transaction=True)
            pipe.hset(f"job:{n:08x}-aaaa-bbbb-cccc-0123456789ab", mapping={"data": "d" * 300})
            pipe.rpush("queue", f"{n:08x}-aaaa-bbbb-cccc-0123456789ab")
            pipe.execute()
            client.blmove("queue", "wip", 1, "LEFT", "RIGHT")
        finally:
            client.close()
        n += 1


def test_a_sample_with_a_password_keeps_nothing_secret_and_stops_at_its_bounds(
    tmp_path, redis_server
):
    password_file = tmp_path / "password"
    password_file.write_text(PASSWORD + "\n")
    out = tmp_path / "sampled.toml"
    counted = tmp_path / "counted.toml"
    stop = threading.Event()
    with native_server(redis_server, (0,)) as server:
        control = server.client()
        control.config_set("requirepass", PASSWORD)  # the application's (default user)
        # The capture's user may MONITOR (the default user of a benchmark server may not).
        control.execute_command("ACL", "SETUSER", "watcher", "on", f">{PASSWORD}", "+@all", "~*")
        url = f"redis://watcher@127.0.0.1:{server.port}/0"
        app = threading.Thread(target=_app, args=(server.port, stop), daemon=True)
        app.start()
        try:
            time.sleep(0.2)
            by_time = run_cli("mix", "capture", "--url", url, "--sample", "1",
                              "--password-file", str(password_file), "--out", str(out))  # fmt: skip
            started = time.monotonic()
            by_count = run_cli("mix", "capture", "--url", url, "--sample", "30",
                               "--sample-commands", "50", "--out", str(counted),
                               env={"REGTRACK_REDIS_PASSWORD": PASSWORD})  # fmt: skip
            count_s = time.monotonic() - started
        finally:
            stop.set()
            app.join(10)
        # Read only: what the sample itself sends changes no data (its own commands only).
        before = control.info("commandstats")
        observed = sampled.take(url, PASSWORD, 0.3)
        after = control.info("commandstats")
        monitors = _monitors(control)
        control.close()
        log = (Path(server.token_dir) / "server.log").read_bytes()
    assert by_time.returncode == 0, by_time.stderr
    assert "stopped by time" in by_time.stdout, by_time.stdout
    assert by_count.returncode == 0 and "sampled 50 commands" in by_count.stdout, by_count
    assert "stopped by count" in by_count.stdout and count_s < 20
    text = out.read_text()
    everything = text + counted.read_text() + log.decode(errors="replace")
    for proc in (by_time, by_count):
        everything += " ".join(proc.args) + proc.stdout + proc.stderr
    for secret in (PASSWORD, TOKEN, "alice", "example.com"):
        assert secret not in everything, secret
    mix = MixWorkload(**tomllib.loads(text))
    commands = [c.args for c in mix.all_commands]
    keyed = [re.sub("0*__key__", "__key__", " ".join(a)).split(" ") for a in commands]
    assert ["SET", "user:__key__:session", "x" * len(TOKEN)] in keyed, commands
    assert ["MULTI"] in commands and ["EXEC"] in commands
    assert any(a[0] == "BLMOVE" and a[-1] == "1" for a in commands)
    assert any(a[0] == "HSET" and a[1] == "job:__key__" and len(a[3]) == 300 for a in keyed)
    assert "Redacted: every value" in text and "AUTH/HELLO" in text
    changed = {
        name for name in after if after[name]["calls"] != before.get(name, {}).get("calls", 0)
    }
    # Its logins (AUTH), two INFO readings, CONFIG GET of the list, COMMAND and MONITOR.
    read_only = {"cmdstat_auth", "cmdstat_info", "cmdstat_config|get", "cmdstat_command"}
    assert changed <= read_only | {"cmdstat_monitor"}
    assert "cmdstat_monitor" in changed and not changed & {f"cmdstat_{w}" for w in WRITES}
    assert observed.sample.stopped_by == "time" and observed.sample.seconds < 1.5
    assert not monitors  # the MONITOR connection is closed when the sample ends


def test_a_monitor_refused_is_one_line(redis_server):
    with native_server(redis_server, (0,)) as server:
        control = server.client()
        control.execute_command("ACL", "SETUSER", "watcher", "on", ">pw-watch", "+@all",
                                "-monitor", "~*")  # fmt: skip
        control.close()
        url = f"redis://watcher@127.0.0.1:{server.port}/0"
        proc = run_cli("mix", "capture", "--url", url, "--sample", "0.2", "--out", "/dev/null",
                       env={capture.PASSWORD_VARIABLE: "pw-watch"})  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.count("\n") == 1 and "MONITOR refused" in proc.stderr, proc.stderr


def test_ctrl_c_ends_the_sample_and_closes_its_monitor(tmp_path, redis_server):
    with native_server(redis_server, (0,)) as server:
        control = server.client()
        control.execute_command("ACL", "SETUSER", "watcher", "on", ">pw-watch", "+@all", "~*")
        url = f"redis://watcher@127.0.0.1:{server.port}/0"
        env = {**os.environ, capture.PASSWORD_VARIABLE: "pw-watch"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "regtrack", "mix", "capture", "--url", url, "--sample",
             "60", "--out", str(tmp_path / "w.toml")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        deadline = time.monotonic() + 20
        while not _monitors(control):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
        stopped_s = time.monotonic() - started
        monitors = _monitors(control)
        control.close()
    assert proc.returncode == 130, err
    assert stopped_s < 5 and not monitors, (stopped_s, monitors)
    assert "Traceback" not in err and not (tmp_path / "w.toml").exists()
