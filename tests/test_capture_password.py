"""`regtrack mix capture` against a server with a password: the password can reach regtrack
without its command line (which every local user reads), from a file or the environment,
and is shown nowhere."""

from __future__ import annotations

import threading
from pathlib import Path

import redis

from regtrack.bench.runtimes.native import native_server
from tests.conftest import cli_in_process, run_cli

SECRET = "capture-Pa55-91c3"


def _busy(port: int, stop: threading.Event) -> None:
    """An application logged in with the password, sending SET and GET until told."""
    client = redis.Redis(port=port, password=SECRET)
    try:
        while not stop.is_set():
            client.set("k", "v")
            client.get("k")
    finally:
        client.close()


def test_capture_takes_the_password_from_a_file_or_the_environment(tmp_path, redis_server):
    password_file = tmp_path / "password"
    password_file.write_text(SECRET + "\n")
    password_file.chmod(0o600)
    out = {name: tmp_path / f"{name}.toml" for name in ("none", "file", "env", "wrong")}
    stop = threading.Event()
    with native_server(redis_server, (0,)) as server:
        control = server.client()
        control.config_set("requirepass", SECRET)
        control.close()
        load = threading.Thread(target=_busy, args=(server.port, stop), daemon=True)
        load.start()
        try:
            url = f"redis://127.0.0.1:{server.port}/0"

            def capture(name: str, *extra: str, env: dict[str, str] | None = None):
                return run_cli("mix", "capture", "--url", url, "--seconds", "0.3",
                               "--out", str(out[name]), *extra, env=env)  # fmt: skip

            without = capture("none")
            by_file = capture("file", "--password-file", str(password_file))
            by_env = capture("env", env={"REGTRACK_REDIS_PASSWORD": SECRET})
            wrong = capture("wrong", env={"REGTRACK_REDIS_PASSWORD": SECRET + "x"})
        finally:
            stop.set()
            load.join(10)
    assert without.returncode == 2 and "REGTRACK_REDIS_PASSWORD" in without.stderr, without
    assert wrong.returncode == 2 and wrong.stderr.startswith("regtrack: error:"), wrong.stderr
    for proc in (by_file, by_env):
        assert proc.returncode == 0, proc.stderr
    for proc in (without, by_file, by_env, wrong):
        assert SECRET not in " ".join(proc.args) + proc.stdout + proc.stderr
    for name in ("file", "env"):
        text = out[name].read_text()
        assert '"SET"' in text and '"GET"' in text, text
        assert SECRET not in text
    assert not out["none"].exists() and not out["wrong"].exists()


def test_the_help_names_both_ways_and_an_unreadable_file_is_one_line(tmp_path: Path):
    helped = cli_in_process("mix", "capture", "--help")
    assert "--password-file" in helped.stdout and "REGTRACK_REDIS_PASSWORD" in helped.stdout
    missing = cli_in_process("mix", "capture", "--url", "redis://127.0.0.1:1",
                             "--password-file", str(tmp_path / "absent"),
                             "--out", str(tmp_path / "w.toml"))  # fmt: skip
    assert missing.returncode == 2 and "--password-file" in missing.stderr, missing.stderr
