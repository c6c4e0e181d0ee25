"""`regtrack mix capture --check`: a captured mix replayed against a fresh server and
compared with the live traffic it came from.

The real side is the live server at --url now: its commandstats and CPU over --seconds,
read with INFO alone (as the capture reads it: nothing is sent that changes its data).
The file's ratios are rounded, its rare commands left out and its processes run flat
out, so the live counters, not the file, are the reference; the value sizes the capture
saw come from the file's header (traffic/value_sizes.py), the live server cannot show
them without MONITOR. The replay side: the file run for the same --seconds by memtier
(or the built-in driver) against a fresh redis-server pinned to the server CPUs, with
the file's [server] settings, counted by the same INFO deltas.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import redis

from regtrack.analysis.capture_check import Reading, Replayed, compare
from regtrack.bench import loadgen, serverstats, setup
from regtrack.bench.loadgen import builtin, memtier
from regtrack.bench.loadgen.base import Aim, LoadgenBinary
from regtrack.bench.runtimes.base import RunningServer, ServerStartError
from regtrack.bench.runtimes.native import native_server
from regtrack.core import cpulock, procs, redact
from regtrack.core.cpus import CpuPlan, plan_cpus
from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.core.records import LoadSpec, ServerDelta
from regtrack.core.redis_options import QUIET_CONNECT
from regtrack.workloads import capture, commands, points, server_config
from regtrack.workloads.files import load_workload
from regtrack.workloads.model import MixWorkload
from regtrack.workloads.traffic import sampler, shapes, value_sizes

SETUP_TIMEOUT_S = 60.0  # beyond --seconds, for the load generator to end
SIZES_S = 1.0  # the replay's value sizes: a MONITOR sample this long (memtier: whole s)
SIZES_COMMANDS = 20_000  # or this many commands


@dataclass(frozen=True)
class Request:
    """What --check was asked: the file, the live server, how long, how to replay."""

    file: str
    url: str
    secret: str | None
    seconds: float
    loadgen: str | None = None  # memtier, builtin; None: memtier if installed
    server_bin: str | None = None  # None: redis-server on PATH
    server_cpus: str | None = None
    client_cpus: str | None = None
    task: str | None = None  # a commandstats name: server CPU per call of it


def run(request: Request, say: Callable[[str], None] = lambda text: None) -> Replayed:
    """Read the live traffic, replay the file, compare. Everything the user can get wrong
    (the file, the task, the tools, the CPUs) is refused before the live server is read."""
    if request.seconds <= 0:
        raise BadInput("--seconds must be positive")
    workload, text = _mix(request.file)
    task = _task(workload, request.task)
    binary = _server_binary(request.server_bin)
    tool = _loadgen(request.loadgen)
    cpus = plan_cpus(request.server_cpus, request.client_cpus)
    real = live(request.url, request.secret, request.seconds)
    say(
        f"read {redact.url(request.url)} for {request.seconds:g} s; replaying {request.file} "
        f"for {request.seconds:g} s on a fresh server"
    )
    depth = int(points.points(workload)[0].params["pipeline"])
    recorded = value_sizes.recorded(text)
    replay, errors, seen = _replay(
        workload, binary, tool, cpus, request.seconds, say, sizes=bool(recorded)
    )
    sizes = [(r.command, r.position, (r.low, r.median, r.high),
              seen.get((r.command, r.position))) for r in recorded]  # fmt: skip
    check = compare(real, replay, sizes, task, errors)
    return Replayed(
        check, redact.url(request.url), tool.name, cpus.server_list, cpus.client_list, depth
    )


def _mix(file: str) -> tuple[MixWorkload, str]:
    path = Path(file)
    if not path.is_file():
        raise BadInput(f"--check {file}: no such file")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"--check {file}: {getattr(exc, 'strerror', None) or 'not text'}") from None
    workload = load_workload(file if "/" in file else f"./{file}")  # a path, never a name
    if not isinstance(workload, MixWorkload):
        raise BadInput(
            f"--check {file}: a {getattr(workload, 'kind', 'driver')} workload; --check "
            "replays a mix (what mix capture writes)"
        )
    return workload, text


def _task(workload: MixWorkload, task: str | None) -> str | None:
    """``--task`` as commandstats names it, checked against the file's commands."""
    if task is None:
        return None
    name = task.strip().lower()
    sent = sorted({n for c in workload.all_commands for n in commands.stat_names(c.args)})
    if name not in sent:
        raise BadInput(f"--task {task}: the file sends no {task}; give one of {', '.join(sent)}")
    return name


def _server_binary(given: str | None) -> str:
    found = given or shutil.which("redis-server")
    if not found:
        raise CannotMeasure("no redis-server on PATH to replay against: give --replay-server")
    if not Path(found).is_file():
        raise BadInput(f"--replay-server {found}: no such file")
    return found


def _loadgen(name: str | None) -> LoadgenBinary:
    if name == builtin.NAME or (name is None and not memtier.installed()):
        return builtin.locate()
    return memtier.locate()


def live(url: str, secret: str | None, seconds: float) -> Reading:
    """The live server's commands and CPU over ``seconds`` (INFO only, twice)."""
    with capture.reading(url, secret) as client:
        before = serverstats.snapshot(client)
        time.sleep(seconds)
        after = serverstats.snapshot(client)
        version = str(client.info("server").get("redis_version", "unknown"))
    return _reading(serverstats.delta(before, after), version)


def _reading(delta: ServerDelta, version: str) -> Reading:
    return Reading(
        seconds=delta.wall_s,
        calls={name: int(c.calls) for name, c in delta.commands.items()},
        usec={name: c.usec for name, c in delta.commands.items()},
        cpu_s=delta.server_cpu_s,
        version=version,
    )


def _settings(binary: str, cpus: CpuPlan, workload: MixWorkload) -> list[str]:
    """The file's [server] settings this binary knows (optional ones it does not are left
    out, as a run leaves them out), as redis-server arguments."""
    wanted = server_config.from_table(workload.server, f"workload {workload.name}")
    if not wanted:
        return []
    with native_server(binary, cpus.server) as probe:
        client = probe.client()
        try:
            known = {s.name for s in wanted if client.config_get(s.name)}
        finally:
            client.close()
    missing = [s.name for s in wanted if s.name not in known and not s.optional]
    if missing:
        raise BadInput(
            f"workload {workload.name}: {binary} does not know the setting "
            f"{', '.join(missing)}; replay with a redis-server that does (--replay-server)"
        )
    return server_config.argv(s for s in wanted if s.name in known)


def _replay(
    workload: MixWorkload,
    binary: str,
    tool: LoadgenBinary,
    cpus: CpuPlan,
    seconds: float,
    say: Callable[[str], None],
    sizes: bool,
) -> tuple[Reading, dict[str, int], dict[tuple[str, int], int]]:
    """The file run for ``seconds`` on a fresh server: its counters, its error replies;
    with ``sizes``, then the value sizes a MONITOR sample of a further short run saw."""
    with cpulock.hold(cpus.server + cpus.client, on_wait=say):
        try:
            argv = _settings(binary, cpus, workload)
            with native_server(binary, cpus.server, settings=argv) as server:
                points.check_version(workload, "--replay-server", server.version)
                control = server.client()
                try:
                    saved = setup.prepare_server(control, workload, tool.name)
                    point = points.points(workload)[0]
                    specs = points.load_specs(workload, point, tool.name, saved)
                    aim = Aim(tool, server.host, server.port, cpus.client,
                              server.is_alive, server.pid)  # fmt: skip
                    before = serverstats.snapshot(control)  # connects: counted below
                    sockets = procs.socket_count(server.pid) if server.pid else None
                    result = loadgen.run(
                        tool, aim, specs, seconds=seconds, timeout=seconds + SETUP_TIMEOUT_S
                    )
                    if server.pid:
                        # the load generator's last requests run before they are counted
                        serverstats.wait_sockets(server.pid, sockets, control, timeout=10.0)
                    after = serverstats.snapshot(control)
                    seen = _sizes_seen(server, tool, aim, specs) if sizes else {}
                finally:
                    control.close()
        except ServerStartError as exc:
            raise CannotMeasure(f"the replay's server did not start: {exc}") from None
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise CannotMeasure(f"the replay's server stopped answering: {exc}") from None
    if result.problem or result.exit_code:
        why = result.problem or f"exit code {result.exit_code}"
        raise CannotMeasure(f"the replay's load generator ({tool.name}) failed: {why}")
    delta = serverstats.delta(before, after)
    errors = {name: int(n) for name, n in delta.errors.items()}
    if not errors and delta.error_replies:
        errors = {"error replies": int(delta.error_replies)}
    return _reading(delta, server.version), errors, seen


def _sizes_seen(
    server: RunningServer, tool: LoadgenBinary, aim: Aim, specs: list[LoadSpec]
) -> dict[tuple[str, int], int]:
    """Median value sizes per (command, argument position) as a MONITOR sample of the
    replay sees them: parsed and aggregated by the capture's own code, so both sides are
    measured alike. A run of its own after the counted window, which MONITOR would slow."""
    monitor = redis.Redis(
        host=server.host, port=server.port, username=server.access.username,
        password=server.access.password, socket_timeout=30, decode_responses=False,
        **QUIET_CONNECT,
    )  # fmt: skip
    with ThreadPoolExecutor(max_workers=1) as pool:
        running = pool.submit(
            loadgen.run, tool, aim, specs, seconds=SIZES_S, timeout=SIZES_S + SETUP_TIMEOUT_S
        )
        try:
            time.sleep(0.1)  # its connections open
            taken = sampler.take(monitor, SIZES_S - 0.2, SIZES_COMMANDS)
        finally:
            monitor.close()
            running.result()
    return {
        (a.command, a.position): a.sizes.median
        for a in shapes.infer(taken.records).arguments
        if a.sizes is not None
    }
