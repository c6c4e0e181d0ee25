"""Shared helpers: run the real CLI, find real binaries, prove nothing is left running."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from regtrack.bench.runtimes.base import connect
from regtrack.core import docker_engine, procs
from regtrack.core.errors import CannotMeasure
from regtrack.plan.run_plan import RunPlan
from regtrack.targets.sources import cache_root
from tests import tiers

FIXTURES = Path(__file__).parent / "fixtures"
# One build of each real Redis version per test session: every test that builds real
# sources uses this one flag set, so the build cache serves each version to every test.
# libc's malloc: no jemalloc to configure and compile (a cold 7.0.15 builds in 21 s, not 43).
MAKE_FLAGS = ["MALLOC=libc"]
BUILD_FLAGS = ["--build-flags", " ".join(MAKE_FLAGS)]
ARTIFACTS = Path(__file__).parent / "artifacts"
SHORT_RUN = ["--duration", "1", "--warmup", "0.3", "--keys", "2000"]


PR_SET_CHILD_SUBREAPER = 36
# What regtrack starts: servers (natively, under valgrind, or via the seed wrapper) and
# load generators. Matched on the executable and on comm, never on the command line:
# redis-server rewrites its title (and so its /proc cmdline) once it starts.
SPAWNED = ("redis-server", "redis-benchmark", "memtier_benchmark", "valkey-server")
VALGRIND = ("valgrind", "callgrind-", "memcheck-")


def _become_subreaper() -> None:
    """Orphans of this test process (a server whose regtrack was killed with -9, or that
    daemonized itself) are re-parented here instead of to init, so the guard still sees
    them as ours."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _stat(pid: str) -> tuple[str, str, int] | None:
    """(comm, state, ppid) of a process, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = text[text.index("(") + 1 : text.rindex(")")]
    state, ppid = text[text.rindex(")") + 2 :].split()[:2]
    return comm, state, int(ppid)


def _descendants(root: int) -> list[str]:
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(entry.name)):
            table[int(entry.name)] = stat
    children: dict[int, list[int]] = {}
    for pid, (_, _, ppid) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        if table[pid][1] != "Z":  # a zombie has exited: nothing is left running
            found.append(pid)
    return [str(pid) for pid in found]


def our_processes() -> list[str]:
    """Servers and load generators running below this test process, as
    ``pid: [executable] command line``."""
    found = []
    for pid in _descendants(os.getpid()):
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        except OSError:
            exe = ""
        stat = _stat(pid)
        comm = stat[0] if stat else ""
        if any(name in (exe, comm) for name in SPAWNED) or any(
            exe.startswith(v) or comm.startswith(v) for v in VALGRIND
        ):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                cmdline = ""
            found.append(f"{pid}: [{exe or comm}] {cmdline.strip()}")
    return found


_become_subreaper()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--extended",
        action="store_true",
        help="also run the second tier: tests that repeat coverage the first tier has "
        "(scripts/test.sh --extended)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Say the tier before the test modules are imported: their property tests draw
    tiers.examples(n) examples, n only in the second tier."""
    if config.getoption("--extended"):
        os.environ[tiers.VARIABLE] = "extended"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The second tier (marker "extended") is deselected, not skipped, unless --extended:
    CI runs every first-tier test and never lets a test skip."""
    if config.getoption("--extended"):
        return
    second = [item for item in items if item.get_closest_marker("extended")]
    if second:
        config.hook.pytest_deselected(items=second)
        items[:] = [item for item in items if not item.get_closest_marker("extended")]


@pytest.fixture(scope="session")
def _empty_config_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("xdg-config")


@pytest.fixture(autouse=True)
def no_user_config(monkeypatch, _empty_config_home):
    """A developer's own ~/.config/regtrack/regtrack.toml sets option defaults: no test
    reads it (a test that wants one sets XDG_CONFIG_HOME itself)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(_empty_config_home))


@pytest.fixture(autouse=True)
def nothing_left_running():
    """Every test must leave no server or load generator behind."""
    before = set(our_processes())
    yield
    deadline = time.monotonic() + 2.0  # a process being stopped may take a moment
    while (left := [p for p in our_processes() if p not in before]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"processes left behind: {left}"


@contextlib.contextmanager
def decoy_server(redis_server: str, workdir: Path) -> Iterator[tuple[int, Any, subprocess.Popen]]:
    """Another redis-server, answering on a port regtrack may choose: (port, a client of
    it, its process)."""
    port = procs.free_port()
    decoy = subprocess.Popen(
        [redis_server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    client = connect("127.0.0.1", port, timeout=1.0)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.ConnectionError):
                if client.ping():
                    break
            time.sleep(0.05)
        yield port, client, decoy
    finally:
        client.close()
        decoy.kill()
        decoy.wait()


def quiet_configs(folder: Path, **settings: float) -> dict[str, str]:
    """A settings folder for tests that are not about noise: a busy machine must not make
    their trials invalid. ``settings`` override [run] entries. Returns the CLI's env."""
    run = {"contention_limit_pct": 100, "client_bound_cpu_pct": 100, **settings}
    configs = folder / "configs"
    configs.mkdir()
    lines = "".join(f"{k} = {v}\n" for k, v in run.items())
    (configs / "regtrack.toml").write_text(f"[run]\n{lines}")
    return {"REGTRACK_CONFIG_DIR": str(configs)}


def installed(tool: str, package: str) -> str:
    """The path of ``tool`` on PATH; the test is skipped where it is not installed."""
    path = shutil.which(tool)
    if not path:
        pytest.skip(f"{tool} is not installed (apt-get install {package})")
    return path


def redis_server_path() -> str:
    """The installed redis-server, for helpers and fixtures wider than a test."""
    return installed("redis-server", "redis-server")


@pytest.fixture
def redis_server() -> str:
    return redis_server_path()


MEMTIER_MISSING = "memtier_benchmark is not installed (scripts/install.sh builds it)"


@pytest.fixture
def memtier_bin() -> str:
    """The memtier_benchmark regtrack finds (on PATH or beside it in .venv/bin)."""
    from regtrack.bench.loadgen import memtier

    path = memtier.installed()
    if not path:
        pytest.skip(MEMTIER_MISSING)
    return path


@pytest.fixture
def redis_benchmark_bin() -> str:
    return installed("redis-benchmark", "redis-tools")


@pytest.fixture(scope="module")
def engine() -> Any:
    """The Docker engine (one client a module); the test is skipped where none answers."""
    try:
        return docker_engine.engine()
    except CannotMeasure as exc:
        pytest.skip(f"no Docker engine here: {exc}")


def labelled_containers(label: str) -> list[str]:
    """Names of the containers carrying ``label``, running or not; none can exist where
    no engine answers."""
    try:
        client = docker_engine.engine()
    except CannotMeasure:
        return []
    return [c.name for c in client.containers.list(all=True, filters={"label": label})]


# What a CI job's environment tells regtrack (annotations, the step summary, a database
# inside the checkout refused): a test runs outside CI unless its ``env`` says otherwise,
# whether or not the suite itself runs in a CI job.
CI_VARIABLES = ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "CI", "GITHUB_WORKSPACE")
for _name in CI_VARIABLES:
    os.environ.pop(_name, None)


def run_cli(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess:
    """The real command line, in a subprocess, as a user would run it (outside GitHub
    Actions unless ``env`` says otherwise: its annotations would come first in stdout).

    If the test is stopped meanwhile (``timeout``, pytest-timeout's limit, Ctrl-C), the
    command gets a Ctrl-C of its own first, so it stops its servers and containers as a
    user's interrupted run would, and is killed only if it does not end within 30 s."""
    full_env = {k: v for k, v in os.environ.items() if k not in CI_VARIABLES}
    full_env.update(env or {})
    argv = [sys.executable, "-m", "regtrack", *args]
    proc = subprocess.Popen(
        argv, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except BaseException:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def start_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """The real command line started in the background (this process's environment plus
    ``env``), its output read as text: for tests that stop or kill it midway (``finish``
    reads what it said)."""
    return subprocess.Popen(
        [sys.executable, "-m", "regtrack", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def settings_dir(tmp_path: Path, toml: str) -> Path:
    """A settings directory holding this regtrack.toml (for REGTRACK_CONFIG_DIR or
    --config): a test's own verdict thresholds, limits or seeds."""
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "regtrack.toml").write_text(toml)
    return configs


def cli_in_process(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    measuring: Any = None,
) -> subprocess.CompletedProcess:
    """regtrack's own ``main()`` in this process, isolated by click's CliRunner (stdin,
    stdout, stderr, environment): the exit code and output ``run_cli`` would give, without
    starting Python and importing regtrack again for each one. For commands that stop
    before measuring (bad input, options), that only read the database (compare, explain,
    report, history, versions, baseline, merge) or whose trials are modelled
    (tests/fakebench.py: ``measuring=model``, handed to ``main`` as the command's measuring
    seam); what measures for real runs as users run it (run_cli)."""
    from click.testing import CliRunner

    from regtrack.cli import main

    overrides: dict[str, str | None] = dict.fromkeys(CI_VARIABLES)
    # `regtrack --config` sets these for the command's process; CliRunner restores only
    # the variables it was given, so they are given as they are, not to leak to later tests.
    for name in ("REGTRACK_CONFIG", "REGTRACK_CONFIG_DIR"):
        overrides[name] = os.environ.get(name)
    overrides.update(env or {})
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    hook = sys.unraisablehook
    code: int = 0
    try:
        with (
            contextlib.chdir(cwd or Path.cwd()),
            CliRunner().isolation(env=overrides) as (out, err, _),
        ):
            try:
                main(list(args), measuring)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
            sys.stdout.flush()
            sys.stderr.flush()
            stdout, stderr = out.getvalue().decode(), err.getvalue().decode()
    finally:  # main() installs regtrack's signal handling: give pytest its own back
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        sys.unraisablehook = hook
    return subprocess.CompletedProcess(["regtrack", *args], code, stdout, stderr)


def finish(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """``proc.communicate(timeout)``, but a hang fails with evidence: the processes still
    running below this test, and every thread's stack of a regtrack started with
    ``PYTHONFAULTHANDLER=1`` (SIGABRT makes faulthandler print them)."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        left = our_processes()
        tree = [f"{pid}: {(_stat(pid) or ('?',))[0]}" for pid in _descendants(os.getpid())]
        proc.send_signal(signal.SIGABRT)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        pytest.fail(
            f"still running after {timeout:.0f} s; below the test: {tree}; ours: {left}\n"
            f"stdout:\n{out}\nstderr (with stacks):\n{err}"
        )


def wait_for_trials(db: Path, count: int, timeout: float = 120) -> int:
    """Poll a run's database until it holds ``count`` trials (or the timeout passes)."""
    deadline = time.monotonic() + timeout
    measured = 0
    while time.monotonic() < deadline and measured < count:
        time.sleep(0.2)
        if not db.exists():
            continue
        try:
            conn = sqlite3.connect(db)
            measured = conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
            conn.close()
        except sqlite3.OperationalError:
            pass  # the schema is being created
    return measured


# --- real Redis sources -------------------------------------------------------------------
# The offline source repositories and the builds are cached between sessions in regtrack's
# own cache (~/.cache/regtrack, or $REGTRACK_TEST_CACHE), shared with scripts/quickstart.sh:
# a fresh machine builds everything once (several minutes), later sessions reuse it.

ROOT = Path(__file__).resolve().parent.parent
TEST_CACHE = Path(os.environ.get("REGTRACK_TEST_CACHE") or cache_root())


def _offline_repo(product: str) -> Path:
    dest = TEST_CACHE / f"offline-{product}"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "regtrack",
            "sources",
            "offline",
            product,
            str(dest),
            "--work",
            str(TEST_CACHE / "offline-sources"),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert proc.returncode == 0, f"offline source repository for {product}: {proc.stderr[-2000:]}"
    return dest


@pytest.fixture(scope="session")
def offline_redis() -> Path:
    return _offline_repo("redis")


@pytest.fixture(scope="session")
def offline_valkey() -> Path:
    return _offline_repo("valkey")


@pytest.fixture
def env() -> dict[str, str]:
    """Environment for CLI runs that should reuse the shared build cache."""
    return {"REGTRACK_CACHE": str(TEST_CACHE)}


@pytest.fixture(scope="session")
def slow_repo(offline_redis) -> tuple[Path, str]:
    """A clone of the offline repository with a known GET slowdown on top of 7.0.15."""
    from tests.slowdown import make_slow_branch

    dest = TEST_CACHE / "slow-redis"
    return dest, make_slow_branch(offline_redis, dest, "7.0.15", 25)


@pytest.fixture
def servers_started(monkeypatch) -> list[tuple]:
    """Every server start of the command, refused and recorded: a bad value must stop it
    before the first."""
    from regtrack.bench import servers
    from regtrack.bench.runtimes import docker

    started: list[tuple] = []

    def refuse(*args, **kwargs):
        started.append(args)
        raise RuntimeError("a server was started")

    monkeypatch.setattr(servers, "native_server", refuse)
    monkeypatch.setattr(docker, "docker_server", refuse)
    return started


def one_error_line(proc: subprocess.CompletedProcess, *words: str) -> str:
    """A command's bad input as one line (exit 2) holding ``words``: its stderr."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.startswith("regtrack: error: ") and proc.stderr.count("\n") == 1, proc.stderr
    for word in words:
        assert word in proc.stderr, (word, proc.stderr)
    return proc.stderr


def stored_plan(**fields: Any) -> RunPlan:
    """A run's plan as a test stores it: the stored JSON ``fields`` over a GET sweep's
    smallest plan, read as any stored plan is (RunPlan.from_json)."""
    return RunPlan.from_json(
        {"workload": {"name": "get-pipeline", "kind": "get-pipeline"}, **fields}
    )
