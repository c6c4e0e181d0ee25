"""redis-benchmark: argv in, measurement out.

redis-benchmark runs a request count (``-n``), not a duration. A fixed-duration trial is
made by calibrating: the warm-up runs measure the rate, and the trial asks for
``rate x duration`` requests. The actual wall time is recorded with every trial.
"""

from __future__ import annotations

import csv
import io
import shutil
from dataclasses import dataclass
from pathlib import Path

from regtrack.bench.loadgen import base
from regtrack.bench.runtimes.native import taskset_path
from regtrack.core.cpus import format_cpu_list
from regtrack.core.digests import sha256_of
from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.core.records import LoadSpec

NAME = "redis-benchmark"
CSV_LATENCY_COLUMNS = {
    "avg_latency_ms": "avg",
    "min_latency_ms": "min",
    "p50_latency_ms": "p50",
    "p95_latency_ms": "p95",
    "p99_latency_ms": "p99",
    "max_latency_ms": "max",
}
PROBE_REQUESTS_PER_DEPTH = 2000


def locate(path: str | None = None, built: list[str] | None = None) -> base.LoadgenBinary:
    """Choose the one redis-benchmark for the whole run and fingerprint it.

    An explicit path wins; then the one on PATH (the same from run to run, so runs stay
    comparable); then one built with the targets (the newest version's, as given).
    """
    if path:
        if not Path(path).is_file():
            raise BadInput(f"load generator {path} does not exist")
        found = str(Path(path).absolute())
    else:
        candidates = [shutil.which(NAME), *(built or [])]
        found = next((str(Path(c).absolute()) for c in candidates if c), "")
        if not found:
            raise CannotMeasure(
                "redis-benchmark is not installed: install redis-tools "
                "(apt-get install redis-tools) or pass --loadgen-bin PATH"
            )
    return base.LoadgenBinary(
        name=NAME, path=found, version=_version(found), sha256=sha256_of(Path(found).resolve())
    )


def _version(path: str) -> str:
    # redis-benchmark before 7.0 has no --version; it still works for measuring.
    return base.tool_version(path, NAME) or "unknown"


def argv(aim: base.Aim, spec: LoadSpec, requests: int) -> list[str]:
    """The exact command line of one run, pinned to the client CPUs (GET sweeps only:
    redis-benchmark sends one command per run, so it cannot replay a mix)."""
    if spec.is_mix:
        raise BadInput(
            "redis-benchmark cannot replay a command mix (one command per run): "
            "use --loadgen memtier or --loadgen builtin"
        )
    args = [
        taskset_path(),
        "-c",
        format_cpu_list(aim.cpus),
        aim.binary.path,
        "-h",
        aim.host,
        "-p",
        str(aim.port),
        "-c",
        str(spec.clients),
        "-n",
        str(requests),
        "-P",
        str(spec.pipeline),
        "-d",
        str(spec.data_size),
        "-r",
        str(spec.key_max - spec.key_min + 1),
        "-t",
        "get",
        "--csv",
    ]
    if spec.threads > 1:
        args += ["--threads", str(spec.threads)]
    return args


def parse_csv(text: str) -> dict[str, dict[str, float]]:
    """Rows of ``--csv`` output by test name: {"GET": {"rps": ..., "p50": ...}}.

    Every field is quoted, numbers included; there is no request or error count.
    """
    rows: dict[str, dict[str, float]] = {}
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None or "rps" not in reader.fieldnames:
        return rows
    for row in reader:
        test = row.get("test")
        if not test or row.get("rps") in (None, ""):
            continue
        try:
            figures = {"rps": float(row["rps"])}
            for column, key in CSV_LATENCY_COLUMNS.items():
                if row.get(column) not in (None, ""):
                    figures[key] = float(row[column])
        except ValueError:
            continue
        rows[test] = figures
    return rows


def run_once(aim: base.Aim, spec: LoadSpec, requests: int, timeout: float) -> base.LoadgenResult:
    """Run redis-benchmark once; its output goes to files so a chatty run cannot block.

    Stopped early (and reported) if the server dies: redis-benchmark would wait forever.
    """
    command = argv(aim, spec, requests)
    done = base.run_tool(NAME, command, timeout, aim)
    stdout, stderr, exit_code, problem = done.stdout, done.stderr, done.exit_code, done.problem
    result = base.result_of(done, command, requests, stderr)
    rows = parse_csv(stdout)
    test = "GET"
    row = rows.get(test)
    if problem is None and exit_code != 0:
        tail = (stderr.strip() or stdout.strip()).splitlines()[-1:] or [""]
        problem = f"redis-benchmark exited with code {exit_code}: {tail[0][:200]}"
    if problem is None and row is None:
        problem = f"redis-benchmark printed no {test} result"
    result.problem = problem
    if row is not None:
        result.ops_per_sec = row["rps"]
        result.latency_ms = {k: v for k, v in row.items() if k != "rps"}
    return result


@dataclass(frozen=True)
class WarmUp:
    """What the warm-up learnt: the rate that sizes the trial, or the run that failed."""

    seconds: float
    rate: float | None
    failure: base.LoadgenResult | None = None


def warm_up(aim: base.Aim, spec: LoadSpec, seconds: float) -> WarmUp:
    """Run for about ``seconds`` (at least one short probe) and measure the rate."""
    probe = PROBE_REQUESTS_PER_DEPTH * max(1, spec.pipeline)
    requests = probe
    spent = 0.0
    while True:
        result = run_once(aim, spec, requests, timeout=60 + 10 * seconds)
        if result.problem or not result.ops_per_sec:
            return WarmUp(seconds=spent, rate=None, failure=result)
        spent += result.wall_s
        if spent >= seconds:
            return WarmUp(seconds=spent, rate=result.ops_per_sec)
        requests = max(probe, int(result.ops_per_sec * (seconds - spent)))


def requests_for(duration: float, rate: float) -> int:
    """``rate x duration`` requests: a trial of about ``duration`` seconds."""
    return max(PROBE_REQUESTS_PER_DEPTH, int(rate * duration))
