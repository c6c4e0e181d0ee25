"""The shape of a load generator's answer, whichever tool produced it."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from regtrack.core import child_env, procs
from regtrack.core.errors import BadInput


@dataclass
class LoadgenResult:
    """One timed run of a load generator: what it reported and what it cost the client CPU."""

    argv: list[str]
    exit_code: int
    wall_s: float
    client_cpu_s: float
    requests: int
    ops_per_sec: float | None = None
    latency_ms: dict[str, float] = field(default_factory=dict)
    raw_output: str = ""
    problem: str | None = None  # why the tool's output cannot be used, if it cannot
    # Per command row of the tool's report, e.g. {"Xadds": {"ops_per_sec": .., "p50": ..}}
    per_command: dict[str, dict[str, float]] = field(default_factory=dict)
    # The results of load generator processes that ran side by side, when there were several.
    parts: list[LoadgenResult] = field(default_factory=list)
    # (time, load generator CPU s, server CPU s) while it ran (one process only; ToolRun)
    samples: list[tuple[float, float | None, float | None]] = field(default_factory=list)

    @property
    def measured_s(self) -> float | None:
        """The length of the tool's own measured window: its requests over its rate."""
        if self.requests and self.ops_per_sec:
            return self.requests / self.ops_per_sec
        return None

    @property
    def requests_per_process(self) -> list[int]:
        return [p.requests for p in self.parts] if self.parts else [self.requests]

    @property
    def client_cpu_pct(self) -> float:
        return 100.0 * self.client_cpu_s / self.wall_s if self.wall_s > 0 else 0.0


@dataclass(frozen=True)
class LoadgenBinary:
    """The one load generator binary used for every target of a run."""

    name: str
    path: str
    version: str
    sha256: str

    def as_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Aim:
    """One load generator binary aimed at one running server, from the client CPUs."""

    binary: LoadgenBinary
    host: str
    port: int
    cpus: tuple[int, ...]
    server_alive: Callable[[], bool] = lambda: True
    server_pid: int | None = None  # to sample the server's CPU time while the load runs
    # --rtt: no reply comes sooner than this after its request is written (the delay
    # proxy's round trip), so the engine's stalls inside that wait time nothing late
    reply_floor_us: int = 0


def installed(name: str) -> str | None:
    """``name`` on PATH, else the one scripts/install.sh built beside regtrack (the
    environment's own bin folder, on PATH only while it is activated)."""
    on_path = shutil.which(name)
    if on_path:
        return on_path
    beside = Path(sysconfig.get_path("scripts")) / name
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


def tool_version(path: str, name: str) -> str | None:
    """The first line ``path --version`` prints if it names ``name``, else None.

    A path that cannot run, or hangs, is not a load generator: one clear line (exit 2).
    """
    try:
        out = subprocess.run(
            [path, "--version"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
            env=child_env.load_generator(),
        )
    except OSError as exc:
        raise BadInput(f"load generator {path} cannot be run: {exc.strerror}") from None
    except subprocess.TimeoutExpired:
        raise BadInput(f"load generator {path} hangs on --version: is it {name}?") from None
    text = (out.stdout or out.stderr).strip()
    if out.returncode != 0 or name not in text:
        return None
    return text.splitlines()[0]


@dataclass
class ToolRun:
    """What one load generator process did: how it ended, what it cost, what it printed."""

    exit_code: int
    client_cpu_s: float
    wall_s: float
    stdout: str
    stderr: Any  # what ``read_stderr`` made of it
    problem: str | None  # set when it was abandoned (the server died, the timeout passed)
    # (time, its CPU seconds, the server's CPU seconds) every 0.1 s while it ran
    samples: list[tuple[float, float | None, float | None]] = field(default_factory=list)


def _text(stream: IO[bytes]) -> str:
    return stream.read().decode(errors="replace")


def run_tool(
    name: str,
    command: Sequence[str],
    timeout: float,
    aim: Aim,
    read_stderr: Callable[[IO[bytes]], Any] = _text,
    env: dict[str, str] | None = None,
) -> ToolRun:
    """Run one load generator process to its end, for every tool alike.

    Its output goes to files, so a chatty run cannot block on a full pipe; it is stopped
    early (and the reason kept) if the server dies, and stopped for sure if regtrack is
    interrupted meanwhile. Its CPU time and the server's are sampled while it runs, so
    that their busy shares can be taken over its measured window (procs.busiest_window).
    ``env``: a user's --driver program's (child_env.driver), else a load generator's.
    """
    samples: list[tuple[float, float | None, float | None]] = []
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        env = child_env.load_generator() if env is None else env
        proc = procs.spawn(command, stdout=out, stderr=err, env=env)

        def sample() -> None:
            server = procs.process_cpu_seconds(aim.server_pid) if aim.server_pid else None
            samples.append((time.monotonic(), procs.process_cpu_seconds(proc.pid), server))

        try:
            exit_code, cpu_s = procs.wait_with_rusage(proc, timeout, aim.server_alive, sample)
            server = procs.process_cpu_seconds(aim.server_pid) if aim.server_pid else None
            samples.append((time.monotonic(), cpu_s, server))  # at exit: the exact total
            problem = None
        except procs.Abandoned as exc:
            exit_code, cpu_s = -9, 0.0
            problem = f"{name} {exc}"
        except BaseException:
            procs.stop(proc, grace=1.0)
            raise
        wall = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        return ToolRun(exit_code, cpu_s, wall, _text(out), read_stderr(err), problem, samples)


def result_of(done: ToolRun, command: Sequence[str], requests: int, stderr: str) -> LoadgenResult:
    """A tool's run as a LoadgenResult, before its own report is parsed into it."""
    return LoadgenResult(
        argv=list(command),
        exit_code=done.exit_code,
        wall_s=done.wall_s,
        client_cpu_s=done.client_cpu_s,
        requests=requests,
        raw_output=done.stdout + (f"\n[stderr]\n{stderr}" if stderr.strip() else ""),
        samples=done.samples,
    )
