"""regtrack-openloop: the open-loop engine (engine/, built by scripts/install.sh).

Requests go out at intended times (constant spacing or Poisson arrivals) whatever the
replies do, and each is timed from its intended time, so a server stall shows in every
request it delayed (no coordinated omission: memtier's --rate-limiting sends only when a
pipeline slot is free and times from the actual send). This adapter finds and
fingerprints the binary, writes the workload's LoadSpec as the engine's spec file, runs it
pinned, and reads its one JSON report into a typed record.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import pydantic

from regtrack.bench.loadgen import base
from regtrack.bench.loadgen.base import (
    Aim,
    LoadgenBinary,
    LoadgenResult,
    result_of,
    run_tool,
    tool_version,
)
from regtrack.bench.runtimes.native import taskset_path
from regtrack.core.cpus import format_cpu_list
from regtrack.core.digests import sha256_of
from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.core.records import LoadSpec

NAME = "regtrack-openloop"
# The engine's exit codes (engine/src/main.rs).
BAD_INPUT, SERVER_LOST = 2, 3


@dataclass(frozen=True)
class Offered:
    """The load an open-loop trial offers: requests per second over ``connections``,
    spaced evenly or as Poisson arrivals drawn from ``seed`` (the same seed, the same
    arrival times for every version)."""

    rate: float
    arrival: Literal["poisson", "constant"] = "poisson"
    connections: int = 4
    seed: int = 1


class _Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(frozen=True, extra="ignore")


class Percentiles(_Strict):
    """Latency from the intended send time, in microseconds."""

    p50: float
    p90: float
    p99: float
    p999: float
    max: float
    mean: float
    count: int


class Lag(_Strict):
    """How late requests were written after their intended time, in microseconds: the
    engine's own delay, which a kept schedule holds far below the latencies it reports."""

    p50: float
    p99: float
    max: float


class Stalls(_Strict):
    """The engine's own stalls in the measured window: times it was due to run and did not
    (its CPU's other work, an interrupt, the hypervisor). A request whose intended time to
    reply overlapped one is left out of the latencies (``tainted``): the delay was the
    client's; behind --rtt, not for a stall wholly inside its wait for the round trip. A
    server that stops answering never makes one (engine/README.md)."""

    count: int = 0
    total_ms: float = 0.0
    max_ms: float = 0.0


class EngineCpu(_Strict):
    user_s: float
    sys_s: float
    busy_fraction: float


class OpenLoopReport(_Strict):
    """What one engine run printed (engine/src/report.rs)."""

    version: str
    arrival: str
    rate_intended: float
    duration_s: float
    sent: int
    completed: int
    errors: dict[str, int]
    timeouts: int
    achieved_rate: float
    latency_us: Percentiles
    lag_us: Lag
    cpu: EngineCpu
    behind: bool
    behind_reasons: list[str] = []
    hdr_unit: str = "ns"
    hdr: str
    stalls: Stalls = Stalls()  # engines before 0.3.0 detected none
    tainted: int = 0  # requests left out of the latencies for the engine's stalls

    @property
    def latency_ms(self) -> dict[str, float]:
        """The percentiles as the trial record keeps them (milliseconds)."""
        lat = self.latency_us
        return {
            "p50": lat.p50 / 1e3,
            "p99": lat.p99 / 1e3,
            "p999": lat.p999 / 1e3,
            "max": lat.max / 1e3,
            "avg": lat.mean / 1e3,
        }


class PairedReport(_Strict):
    """What one engine run over several servers printed: each server's report over its
    own windows (engine/README.md, "paired in time"), and the engine's CPU."""

    version: str
    switch_ms: float
    cpu: EngineCpu
    servers: list[OpenLoopReport]


@dataclass
class OpenLoopResult(LoadgenResult):
    """A LoadgenResult with the engine's own report (None when it printed none)."""

    report: OpenLoopReport | None = None


def installed() -> str | None:
    """The engine on PATH, else the one scripts/install.sh built beside regtrack."""
    return base.installed(NAME)


def locate() -> LoadgenBinary:
    """The installed engine, fingerprinted (its version and the binary's SHA-256)."""
    found = installed()
    if not found:
        raise CannotMeasure(
            f"{NAME} is not installed: scripts/install.sh builds it from engine/ (it needs "
            "cargo, and crates.io or a vendored copy of the crates)"
        )
    version = tool_version(found, NAME)
    if version is None:
        raise BadInput(f"{found} is not {NAME} (see its --version)")
    path = Path(found).absolute()
    return LoadgenBinary(name=NAME, path=str(path), version=version, sha256=sha256_of(path))


def spec_document(spec: LoadSpec) -> dict[str, Any]:
    """``spec`` as the engine's spec file (engine/src/spec.rs): its key range and payload,
    and the rotation of commands (empty: GETs of the key range)."""
    return {
        "key_prefix": spec.key_prefix,
        "key_min": spec.key_min,
        "key_max": spec.key_max,
        "data_size": spec.data_size,
        "commands": [
            {"args": list(c.args), "ratio": c.ratio, "key_pattern": c.key_pattern}
            for c in spec.commands
        ],
    }


def argv(
    binary: LoadgenBinary, aims: Sequence[Aim], offered: Offered, spec_file: Path,
    seconds: float, warmup: float, pipeline: int, switch_ms: float | None = None,
) -> list[str]:  # fmt: skip
    """The engine's command line, pinned to the client CPUs: one server, or several
    (on one host) sharing one arrival stream in windows of ``switch_ms``."""
    command = [
        taskset_path(), "-c", format_cpu_list(aims[0].cpus), binary.path,
        "--host", aims[0].host,
        *(arg for aim in aims for arg in ("--port", str(aim.port))),
        "--connections", str(offered.connections), "--rate", repr(float(offered.rate)),
        "--arrival", offered.arrival, "--seed", str(offered.seed),
        "--duration", repr(float(seconds)), "--warmup", repr(float(warmup)),
        "--pipeline", str(pipeline), "--spec", str(spec_file),
    ]  # fmt: skip
    if len(aims) > 1 and switch_ms is not None:
        command += ["--switch-ms", repr(float(switch_ms))]
    if aims[0].reply_floor_us:
        command += ["--reply-floor-us", str(aims[0].reply_floor_us)]
    return command


def run_once(
    binary: LoadgenBinary,
    aim: Aim,
    spec: LoadSpec,
    offered: Offered,
    *,
    seconds: float,
    warmup: float,
    timeout: float,
) -> OpenLoopResult:
    """Run the engine once against one server; ``problem`` says why its figures cannot be
    used, if they cannot (the server lost, a refused spec, an unreadable report)."""
    return run_paired(
        binary, [aim], spec, offered, seconds=seconds, warmup=warmup, timeout=timeout
    )[0]


def run_paired(
    binary: LoadgenBinary,
    aims: Sequence[Aim],
    spec: LoadSpec,
    offered: Offered,
    *,
    seconds: float,
    warmup: float,
    timeout: float,
    switch_ms: float = 100.0,
) -> list[OpenLoopResult]:
    """Run the engine once over ``aims`` (one server, or several paired in time: the same
    arrivals moving between them every ``switch_ms``); a result per aim, in order, each
    with its own server's report, or all with the one ``problem`` that spoiled the run."""
    ran = run_engine(
        aims, spec_document(spec), timeout, OpenLoopReport, PairedReport,
        lambda path: argv(binary, aims, offered, path, seconds, warmup, spec.pipeline, switch_ms),
    )  # fmt: skip
    return ran.per_aim(len(aims), OpenLoopResult, lambda r: r.achieved_rate, "requests")


ReportT = TypeVar("ReportT", bound=pydantic.BaseModel)
ResultT = TypeVar("ResultT", bound=LoadgenResult)


@dataclass(frozen=True)
class EngineRun(Generic[ReportT]):
    """One engine run over several aims: the tool's run (a LoadgenResult's fields) and a
    report per server, in --port order, or the one ``problem`` that spoiled them all."""

    fields: dict[str, Any]
    reports: list[ReportT]
    problem: str | None

    def per_aim(
        self, aims: int, kind: type[ResultT], rate: Callable[[Any], float | None], unit: str
    ) -> list[ResultT]:
        """A ``kind`` result per aim, in order: its own server's report (its completed
        ``unit`` the requests, ``rate`` of it the ops/s), or the run's one problem."""
        results = []
        for n in range(aims):
            result = kind(**self.fields)
            result.problem = self.problem
            if self.problem is None:
                report: Any = self.reports[n]
                result.report = report  # type: ignore[attr-defined]
                result.requests = report.completed
                result.ops_per_sec = rate(report)
                result.latency_ms = report.latency_ms
                if report.completed == 0:
                    result.problem = f"{NAME} completed no {unit}"
            results.append(result)
        return results


def run_engine(
    aims: Sequence[Aim],
    document: dict[str, Any],
    timeout: float,
    one: type[ReportT],
    paired: type[pydantic.BaseModel],
    command_of: Callable[[Path], list[str]],
) -> EngineRun[ReportT]:
    """Run the engine once with ``document`` as its file (``command_of`` its path), over
    one server or several paired in time, and read its report: ``one`` for one server,
    ``paired`` (whose ``servers`` are ``one``) for several. Shared by the latency mode and
    the lifecycle mode (loadgen/lifecycle.py)."""
    together = dataclasses.replace(
        aims[0],
        server_alive=lambda: all(a.server_alive() for a in aims),
        server_pid=aims[0].server_pid if len(aims) == 1 else None,
    )
    with tempfile.TemporaryDirectory(prefix="regtrack-openloop-") as tmp:
        path = Path(tmp) / "engine.json"
        path.write_text(json.dumps(document))
        command = command_of(path)
        done = run_tool(NAME, command, timeout, together)
    stderr = str(done.stderr).strip()
    ran = result_of(done, command, 0, stderr)
    fields = {f: getattr(ran, f) for f in ran.__dataclass_fields__}
    problem = done.problem
    if problem is None and done.exit_code != 0:
        line = stderr.splitlines()[-1] if stderr else "no message"
        problem = f"{NAME} exited with code {done.exit_code}: {line}"
    reports: list[ReportT] = []
    if problem is None:
        try:
            if len(aims) == 1:
                reports = [one.model_validate_json(done.stdout)]
            else:
                reports = list(paired.model_validate_json(done.stdout).servers)  # type: ignore[attr-defined]
        except pydantic.ValidationError as exc:
            problem = f"{NAME} printed no report regtrack can read ({exc.error_count()} errors)"
        else:
            if len(reports) != len(aims):
                problem = f"{NAME} reported {len(reports)} servers of {len(aims)}"
    return EngineRun(fields, reports, problem)
