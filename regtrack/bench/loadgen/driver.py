"""A user's own producer/worker program (--driver): found, fingerprinted, run pinned with
the server's address in REDIS_URL, and its JSON lines read (docs/drivers.md).

The protocol, one JSON object per line on standard output (other lines are ignored):
``{"event": "task", "latency_ms": 1.5}`` or ``{"event": "task", "enqueued_at": T0,
"done_at": T1}`` (unix seconds) per finished task, and once at the end ``{"event":
"done", "tasks": N, "seconds": S}`` (``seconds``: the span the tasks took, optional).
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from regtrack.bench.loadgen.base import Aim, LoadgenBinary, LoadgenResult, result_of, run_tool
from regtrack.bench.runtimes.native import taskset_path
from regtrack.core import child_env
from regtrack.core.cpus import format_cpu_list
from regtrack.core.digests import sha256_of
from regtrack.core.errors import BadInput

NAME = "driver"
# A program's lines past this are not read (a chatty program cannot fill regtrack's memory).
MAX_LINES = 5_000_000


def locate(command: list[str]) -> LoadgenBinary:
    """The program's executable (on PATH or a path), fingerprinted by its SHA-256."""
    found = shutil.which(command[0])
    if found is None:
        raise BadInput(
            f"--driver: {command[0]!r} is not a program on PATH or an executable path; "
            "give the command that runs your producer and worker"
        )
    path = Path(found).absolute()
    return LoadgenBinary(name=NAME, path=str(path), version=path.name, sha256=sha256_of(path))


@dataclass
class DriverReport:
    """What the program said of its tasks."""

    tasks: int = 0
    seconds: float | None = None
    latencies_ms: list[float] = field(default_factory=list)
    span_s: float | None = None  # first enqueue to last done, where it gave the times
    done_line: bool = False


def read_lines(stdout: str) -> DriverReport:
    """The protocol's lines of ``stdout``; anything else is the program's own output."""
    report = DriverReport()
    first, last = math.inf, -math.inf
    for n, line in enumerate(stdout.splitlines()):
        if n >= MAX_LINES:
            break
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        if event.get("event") == "task":
            report.tasks += 1
            latency = _number(event.get("latency_ms"))
            start, end = _number(event.get("enqueued_at")), _number(event.get("done_at"))
            if latency is None and start is not None and end is not None:
                latency = 1000.0 * (end - start)
            if latency is not None and latency >= 0:
                report.latencies_ms.append(latency)
            if start is not None and end is not None:
                first, last = min(first, start), max(last, end)
        elif event.get("event") == "done":
            report.done_line = True
            tasks, seconds = _number(event.get("tasks")), _number(event.get("seconds"))
            if tasks is not None and tasks >= 0:
                report.tasks = max(report.tasks, int(tasks))
            report.seconds = seconds if seconds is not None and seconds > 0 else None
    if last > first:
        report.span_s = last - first
    return report


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


@dataclass
class DriverResult(LoadgenResult):
    report: DriverReport | None = None


def run(binary: LoadgenBinary, command: list[str], aim: Aim, timeout: float) -> DriverResult:
    """Run the program once against ``aim``'s server, pinned to the client CPUs."""
    argv = [taskset_path(), "-c", format_cpu_list(aim.cpus), binary.path, *command[1:]]
    url = f"redis://{aim.host}:{aim.port}/0"
    done = run_tool(NAME, argv, timeout, aim, env=child_env.driver(url))
    stderr = str(done.stderr).strip()
    base = result_of(done, argv, 0, stderr)
    result = DriverResult(**{f: getattr(base, f) for f in base.__dataclass_fields__})
    problem = done.problem
    if problem is None and done.exit_code != 0:
        line = stderr.splitlines()[-1] if stderr else "no message"
        problem = f"the driver exited with code {done.exit_code}: {line[:200]}"
    report = read_lines(done.stdout)
    result.report = report
    result.requests = report.tasks
    span = report.seconds or report.span_s or done.wall_s
    result.ops_per_sec = report.tasks / span if span > 0 and report.tasks else None
    if problem is None and report.tasks == 0:
        problem = (
            'the driver reported no task: print {"event": "task"} per task or '
            '{"event": "done", "tasks": N} at the end (docs/drivers.md)'
        )
    result.problem = problem
    return result
