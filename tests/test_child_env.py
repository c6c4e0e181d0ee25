"""No child of regtrack inherits its whole environment: servers, load generators, builds
and git get the variables their kind needs (core/child_env.py), so a CI job's tokens stay
in regtrack's own /proc/PID/environ, which only its owner reads. Fast checks of each
allowlist, then one real short run watched from outside."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

from regtrack.core import child_env, procs
from regtrack.targets import build, git_command, make_flags
from tests import fakerepo
from tests.conftest import _descendants, finish, quiet_configs, start_cli

SECRET = "sekrit-5d0c9a"
# What a CI job's environment holds, by the names that carry credentials, and one that
# says nothing about itself: an allowlist drops it too.
HOSTILE = {
    "GITHUB_TOKEN": SECRET,
    "ACTIONS_RUNTIME_TOKEN": SECRET,
    "ACTIONS_ID_TOKEN_REQUEST_URL": SECRET,
    "AWS_SECRET_ACCESS_KEY": SECRET,
    "NPM_AUTH": SECRET,
    "DATABASE_PASSWORD": SECRET,
    "UNRELATED_SETTING": SECRET,
    "LC_TOKEN": SECRET,  # a locale prefix does not let a secret's name through
    "CCACHE_SECRET": SECRET,
    "GIT_CONFIG_TOKEN": SECRET,
}
BASICS = {"PATH": "/usr/bin:/bin", "HOME": "/root", "LANG": "C.UTF-8", "LC_ALL": "C",
          "TZ": "UTC", "TMPDIR": "/tmp"}  # fmt: skip
KINDS = {
    "basic": child_env.basic,
    "server": child_env.server,
    "load generator": child_env.load_generator,
    "build": lambda environ: child_env.build(make_flags.MAKE_ENVIRONMENT, environ),
    "git": child_env.git,
}


def test_every_kind_keeps_the_basics_and_drops_every_token():
    environ = {**BASICS, **HOSTILE}
    for kind, of in KINDS.items():
        env = of(environ)
        assert env == BASICS, kind


def test_each_kind_keeps_what_it_needs_and_nothing_of_the_others():
    environ = {
        **BASICS,
        "LD_LIBRARY_PATH": "/opt/lib",
        "VALGRIND_LIB": "/opt/valgrind",
        "CFLAGS": "-O1",
        "MALLOC": "libc",
        "CC": "gcc-12",
        "CCACHE_DISABLE": "1",
        "SSH_AUTH_SOCK": "/run/agent",
        "GIT_SSH_COMMAND": "ssh -i key",
        "https_proxy": "http://proxy:3128",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "safe.directory",
        "GIT_CONFIG_VALUE_0": "*",
        "GIT_AUTHOR_NAME": "someone",
    }
    extra = lambda env: set(env) - set(BASICS)  # noqa: E731
    assert extra(child_env.basic(environ)) == {"LD_LIBRARY_PATH"}
    assert extra(child_env.server(environ)) == {"LD_LIBRARY_PATH", "VALGRIND_LIB"}
    assert extra(child_env.load_generator(environ)) == {"LD_LIBRARY_PATH"}
    assert extra(child_env.build(make_flags.MAKE_ENVIRONMENT, environ)) == {
        "LD_LIBRARY_PATH", "CFLAGS", "MALLOC", "CC", "CCACHE_DISABLE"}  # fmt: skip
    git = {"LD_LIBRARY_PATH", "SSH_AUTH_SOCK", "GIT_SSH_COMMAND", "https_proxy",
           "GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_0"}  # fmt: skip
    assert extra(child_env.git(environ)) == git
    assert extra(child_env.git(environ, isolated=True)) == {
        "LD_LIBRARY_PATH", "SSH_AUTH_SOCK", "https_proxy"}  # fmt: skip


def test_a_build_sees_exactly_the_make_variables_recorded_with_it(monkeypatch):
    """The build cache is keyed by the make variables taken from the environment
    (make_flags.make_environment): make must see those, and no others of that list."""
    for name, value in {"CFLAGS": "-O1", "OPTIMIZATION": "-O2", **HOSTILE}.items():
        monkeypatch.setenv(name, value)
    recorded = make_flags.make_environment(["OPTIMIZATION=-O3"])
    env = build.make_env(["OPTIMIZATION=-O3"])
    assert recorded == {"CFLAGS": "-O1"}
    # OPTIMIZATION is in make's environment too; its command line wins, as recorded.
    seen = {k: v for k, v in env.items() if k in make_flags.MAKE_ENVIRONMENT}
    assert seen == {"CFLAGS": "-O1", "OPTIMIZATION": "-O2"}
    assert SECRET not in "".join(env.values())


def test_git_and_a_spawned_child_get_no_token(monkeypatch):
    for name, value in HOSTILE.items():
        monkeypatch.setenv(name, value)
    assert SECRET not in "".join(git_command.git_env().values())
    assert SECRET not in "".join(git_command.git_env(isolated=True).values())
    child = procs.spawn(["env"], stderr=subprocess.DEVNULL)
    out, _ = child.communicate(timeout=10)
    assert b"PATH=" in out and SECRET.encode() not in out


def _shim(folder: Path, tool: str, log: Path) -> None:
    """``tool`` on PATH as a script that keeps its environment in ``log``, then runs the
    real one: short-lived children a watcher of /proc could miss."""
    real = shutil.which(tool)
    script = folder / tool
    script.write_text(f'#!/bin/sh\nenv > "{log}/{tool}.$$"\nexec {real} "$@"\n')
    script.chmod(0o755)


def test_no_child_of_a_real_run_holds_a_token(tmp_path, redis_server, redis_benchmark_bin):
    """A run of an installed binary against a built commit (git clone, make, servers,
    redis-benchmark) with a CI job's tokens in regtrack's environment: every process below
    regtrack is read while it runs, and git and make keep their environment in a file."""
    repo = tmp_path / "repo"
    fakerepo.make_repo(repo)
    shims, logs = tmp_path / "shims", tmp_path / "logs"
    shims.mkdir()
    logs.mkdir()
    for tool in ("git", "make"):
        _shim(shims, tool, logs)
    env = {
        **quiet_configs(tmp_path),
        **HOSTILE,
        "PATH": f"{shims}:{os.environ['PATH']}",
        "REGTRACK_CACHE": str(tmp_path / "cache"),
    }
    proc = start_cli(
        "run", "--versions", f"a=bin:{redis_server},b=1.0.0", "--source-repo", str(repo),
        "--duration", "1", "--warmup", "0.3", "--keys", "2000", "--repetitions", "1",
        "--pipelines", "1", "--loadgen", "redis-benchmark", "--loadgen-bin", redis_benchmark_bin,
        "--db", str(tmp_path / "r.db"), "--no-report", env=env,
    )  # fmt: skip
    seen: dict[str, int] = {}
    leaked: list[str] = []
    done = threading.Event()

    # A child forked but not yet exec'd is regtrack itself, with regtrack's environment and
    # command line: what it runs is read once it has exec'd.
    own = Path(f"/proc/{proc.pid}/cmdline").read_bytes()

    def watch() -> None:
        while not done.is_set():
            for pid in _descendants(proc.pid):
                try:
                    environ = Path(f"/proc/{pid}/environ").read_bytes()
                    name = Path(f"/proc/{pid}/comm").read_text().strip()
                    if Path(f"/proc/{pid}/cmdline").read_bytes() == own:
                        continue
                except OSError:
                    continue
                seen[name] = seen.get(name, 0) + 1
                if SECRET.encode() in environ:
                    leaked.append(f"{pid} {name}")
            time.sleep(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        _, err = finish(proc, 240)
    finally:
        done.set()
        watcher.join(10)
    assert proc.returncode == 0, err
    assert {"redis-server", "redis-benchmark"} <= set(seen), seen  # the watcher sees them
    assert not leaked, leaked
    dumps = {path.name: path.read_text() for path in logs.iterdir()}
    assert {name.split(".")[0] for name in dumps} == {"git", "make"}, "both ran, and told"
    for name, text in dumps.items():
        assert "PATH=" in text and SECRET not in text, name
