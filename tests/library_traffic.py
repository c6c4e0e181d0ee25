"""What a real task-queue library sends to Redis per task: its driver (examples/drivers/) runs
against a fresh redis-server, and the server's command counts (INFO commandstats) and CPU
(INFO cpu) over the run are read.

Per-task figures leave out start-up and shut-down traffic (connections, script loads,
worker registration, polls while idle) by difference: one run of ``small`` tasks and one of
``large``, (count(large) - count(small)) / (large - small). Traffic that follows time rather
than tasks (polling, heartbeats) is left in that difference as far as the larger run takes
longer; ``monitor`` captures the commands themselves to tell them apart.

The server runs on CPU 0 and the driver (with every process it starts) on CPU 1, both
pinned with taskset. Used by tests/test_library_traffic.py and
benchmarks/library_traffic.py."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

import redis

from regtrack.bench.loadgen import driver
from regtrack.core import procs

REDIS_SERVER = "/usr/bin/redis-server"
DRIVERS = Path(__file__).resolve().parent.parent / "examples" / "drivers"
# library -> the distribution whose version is the library's
LIBRARIES = {
    "celery": "celery",
    "rq": "rq",
    "taskiq": "taskiq-redis",
    "arq": "arq",
    "dramatiq": "dramatiq",
}
SERVER_CPU = "0"
DRIVER_CPU = "1"
# Commands that wait on the server for data, and where their timeout is (an index into the
# arguments after the name, or the argument following a keyword).
BLOCKING = {
    "blpop": -1, "brpop": -1, "brpoplpush": -1, "blmove": -1, "bzpopmin": -1,
    "bzpopmax": -1, "blmpop": 0, "bzmpop": 0, "xread": "block", "xreadgroup": "block",
    "wait": -1, "waitaof": -1,
}  # fmt: skip


@dataclass(frozen=True)
class Server:
    port: int
    pid: int
    client: redis.Redis

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


@dataclass(frozen=True)
class DriverRun:
    """One driver run against a fresh server."""

    library: str
    tasks: int
    exit_code: int
    seconds: float
    commands: dict[str, int]  # commandstats name (cmdstat_client|setname) -> calls
    server_cpu_us: float
    connections: int  # connections the server accepted
    task_lines: int  # {"event": "task"} lines the driver printed
    done_line: bool  # it printed {"event": "done"}
    stderr: str
    span_s: float | None = None  # first enqueue to last done, from its task lines


@dataclass(frozen=True)
class LibraryTraffic:
    """Per-task figures of one library: the difference of a small and a large run."""

    library: str
    version: str
    commands_per_task: dict[str, float]  # commandstats name -> calls per task
    server_cpu_us_per_task: float
    tasks: int  # large - small: the tasks the per-task figures are over
    connections_per_task: float
    runs: tuple[DriverRun, DriverRun] = field(repr=False)

    @property
    def total_per_task(self) -> float:
        return sum(self.commands_per_task.values())


def library_version(library: str) -> str:
    return version(LIBRARIES[library])


def driver_path(library: str) -> Path:
    return DRIVERS / f"{library}_driver.py"


@contextlib.contextmanager
def server(workdir: Path | None = None) -> Iterator[Server]:
    """A fresh redis-server on a free port, pinned to CPU 0, without persistence; stopped
    (and waited for) on exit."""
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        port = procs.free_port()
        proc = subprocess.Popen(
            ["taskset", "-c", SERVER_CPU, REDIS_SERVER, "--port", str(port),
             "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(workdir), "--logfile", str(workdir / "redis.log")],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(port=port, socket_timeout=10)
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"redis-server on port {port} did not start") from None
                    time.sleep(0.02)
            yield Server(port, proc.pid, client)
        finally:
            client.close()
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _cpu_us(client: redis.Redis) -> float:
    cpu = client.info("cpu")
    return (float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])) * 1e6


def _commands(client: redis.Redis) -> dict[str, int]:
    return {name: int(stats["calls"]) for name, stats in client.info("commandstats").items()}


def driver_argv(library: str, tasks: int, rate: float | None = None) -> list[str]:
    """``library``'s driver for ``tasks`` tasks (at ``rate`` a second), pinned to CPU 1."""
    argv = ["taskset", "-c", DRIVER_CPU, sys.executable, str(driver_path(library)),
            "--tasks", str(tasks)]  # fmt: skip
    return argv + (["--rate", str(rate)] if rate else [])


def start_driver(library: str, tasks: int, srv: Server, rate: float) -> subprocess.Popen:
    """``library``'s driver running against ``srv`` in the background (traffic to sample
    or check while it flows), its stdout dropped, its stderr kept; in a session of its own,
    so that stop_driver ends its worker child (Celery's) with it."""
    return subprocess.Popen(
        driver_argv(library, tasks, rate), env={**os.environ, "REDIS_URL": srv.url},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip


def stop_driver(proc: subprocess.Popen) -> str:
    """A background driver stopped with every process of its session (killing the driver
    alone left Celery's worker running, reparented to init); its stderr."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    return proc.communicate(timeout=60)[1] or ""


def run_driver(
    library: str, tasks: int, srv: Server, rate: float | None = None, timeout: float = 120.0
) -> DriverRun:
    """Run ``library``'s driver for ``tasks`` tasks against ``srv``, pinned to CPU 1; the
    counts are those since CONFIG RESETSTAT just before it starts."""
    argv = driver_argv(library, tasks, rate)
    env = {**os.environ, "REDIS_URL": srv.url}
    srv.client.config_resetstat()
    cpu_before = _cpu_us(srv.client)
    started = time.monotonic()
    # A session of its own: on a timeout its whole group (Celery's worker child) is killed.
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        err += f"\n(killed after {timeout} s)"
    seconds = time.monotonic() - started
    cpu_after = _cpu_us(srv.client)
    commands = _commands(srv.client)
    connections = int(srv.client.info("stats")["total_connections_received"])
    lines = out.splitlines()
    return DriverRun(
        library=library,
        tasks=tasks,
        exit_code=proc.returncode,
        seconds=seconds,
        commands=commands,
        server_cpu_us=cpu_after - cpu_before,
        connections=connections,
        task_lines=sum(line.startswith('{"event": "task"') for line in lines),
        done_line=any(line.startswith('{"event": "done"') for line in lines),
        stderr=err,
        span_s=driver.read_lines(out).span_s,
    )


def measure(
    library: str, small: int = 100, large: int = 600, rate: float | None = None
) -> LibraryTraffic:
    """Per-task traffic of ``library``: a run of ``small`` and one of ``large`` tasks, each
    on a fresh server, and their difference."""
    runs = []
    for tasks in (small, large):
        with server() as srv:
            runs.append(run_driver(library, tasks, srv, rate))
    a, b = runs
    n = large - small
    names = set(a.commands) | set(b.commands)
    per_task = {name: (b.commands.get(name, 0) - a.commands.get(name, 0)) / n for name in names}
    return LibraryTraffic(
        library=library,
        version=library_version(library),
        commands_per_task={k: v for k, v in per_task.items() if v},
        server_cpu_us_per_task=(b.server_cpu_us - a.server_cpu_us) / n,
        tasks=n,
        connections_per_task=(b.connections - a.connections) / n,
        runs=(a, b),
    )


@contextlib.contextmanager
def monitor(srv: Server) -> Iterator[list[str]]:
    """MONITOR's lines while the block runs (the list fills until the block ends). MONITOR
    costs the server work: measure with run_driver alone, capture with this."""
    lines: list[str] = []
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    sock.sendall(b"MONITOR\r\n")
    buffer = b""
    while b"\r\n" not in buffer:  # +OK: MONITOR is in effect
        buffer += sock.recv(65536)
    buffer = buffer.split(b"\r\n", 1)[1]
    sock.settimeout(0.1)
    stop = threading.Event()

    def read() -> None:
        nonlocal buffer
        while not stop.is_set():
            try:
                chunk = sock.recv(1 << 20)
            except TimeoutError:
                continue
            if not chunk:
                return
            buffer += chunk
            *complete, buffer = buffer.split(b"\r\n")
            lines.extend(line[1:].decode(errors="replace") for line in complete)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield lines
    finally:
        time.sleep(0.3)  # the last commands reach the monitor
        stop.set()
        reader.join(5)
        sock.close()


def blocking_calls(lines: list[str]) -> dict[str, set[str]]:
    """Blocking commands seen in MONITOR lines, with the timeouts they carried (seconds,
    or milliseconds for XREAD/XREADGROUP BLOCK, as the client sent them)."""
    found: dict[str, set[str]] = {}
    for line in lines:
        words = _words(line)
        if not words:
            continue
        name, args = words[0].lower(), words[1:]
        where = BLOCKING.get(name)
        if where is None or not args:
            continue
        if isinstance(where, int):
            timeout = args[where]
        else:
            upper = [a.lower() for a in args]
            if where not in upper:
                continue  # XREADGROUP without BLOCK does not block
            timeout = args[upper.index(where) + 1] + " ms"
        found.setdefault(name.upper(), set()).add(timeout)
    return found


def _words(line: str) -> list[str]:
    """The command and arguments of a MONITOR line: `<time> [db addr] "cmd" "arg" ...`."""
    start = line.find('"')
    if start < 0:
        return []
    words, word, quoted, escape = [], [], False, False
    for ch in line[start:]:
        if escape:
            word.append(ch)
            escape = False
        elif ch == "\\" and quoted:
            word.append(ch)
            escape = True
        elif ch == '"':
            if quoted:
                words.append("".join(word))
                word = []
            quoted = not quoted
        elif quoted:
            word.append(ch)
    return words
