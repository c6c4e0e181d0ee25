"""A captured mix or lifecycle replayed on a fresh server, and a live server read over a
window, for ``mix capture --check`` (flows/capture_check.py): each side's commands and
CPU counted by the server itself (INFO deltas), and the value sizes a MONITOR sample of
the replay sees, parsed by the capture's own code."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import redis

from regtrack.bench import lifecycle_trial, loadgen, serverstats, setup
from regtrack.bench.loadgen import lifecycle
from regtrack.bench.loadgen.base import Aim, LoadgenBinary, LoadgenResult
from regtrack.bench.runtimes.base import RunningServer, ServerStartError
from regtrack.bench.runtimes.native import native_server
from regtrack.core import cpulock, procs
from regtrack.core.cpus import CpuPlan
from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.core.records import CommandReading, ServerDelta
from regtrack.core.redis_options import QUIET_CONNECT
from regtrack.workloads import capture, points, server_config
from regtrack.workloads.lifecycle import LifecycleWorkload
from regtrack.workloads.model import MixWorkload
from regtrack.workloads.traffic import sampler, shapes

SETUP_TIMEOUT_S = 60.0  # beyond --seconds, for the load generator to end
SIZES_S = 1.0  # the replay's value sizes: a MONITOR sample this long (memtier: whole s)
SIZES_COMMANDS = 20_000  # or this many commands
# A lifecycle's sizes run: this long, at this many tasks a second at least, so that its
# sample (0.2 s less) draws each ${fill:...} some 600 times (SIZES_COMMANDS allowing), its
# p10/p50/p90 each in the middle of a fifth of the draws (value_sizes) by 5 standard
# deviations or more (400 draws: 4).
LIFECYCLE_SIZES_S = 1.5
SIZES_RATE = 500.0


def live(url: str, secret: str | None, seconds: float) -> CommandReading:
    """The live server's commands and CPU over ``seconds`` (INFO only, twice)."""
    with capture.reading(url, secret) as client:
        before = serverstats.snapshot(client)
        time.sleep(seconds)
        after = serverstats.snapshot(client)
        version = str(client.info("server").get("redis_version", "unknown"))
    return _reading(serverstats.delta(before, after), version)


def _reading(delta: ServerDelta, version: str) -> CommandReading:
    """One side's window as both sides are compared: calls, time and CPU per command."""
    return CommandReading(
        seconds=delta.wall_s,
        calls={name: int(c.calls) for name, c in delta.commands.items()},
        usec={name: c.usec for name, c in delta.commands.items()},
        cpu_s=delta.server_cpu_s,
        version=version,
    )


def settings(binary: str, cpus: CpuPlan, workload: MixWorkload | LifecycleWorkload) -> list[str]:
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


@contextlib.contextmanager
def _fresh_server(
    workload: MixWorkload | LifecycleWorkload,
    binary: str,
    cpus: CpuPlan,
    say: Callable[[str], None],
) -> Iterator[tuple[RunningServer, redis.Redis]]:
    """The replay's server, pinned and locked, with the file's settings, and a control
    connection; a server that does not start or stops answering is one line."""
    with cpulock.hold(cpus.server + cpus.client, on_wait=say):
        try:
            argv = settings(binary, cpus, workload)
            with native_server(binary, cpus.server, settings=argv) as server:
                points.check_version(workload, "--replay-server", server.version)
                control = server.client()
                try:
                    yield server, control
                finally:
                    control.close()
        except ServerStartError as exc:
            raise CannotMeasure(f"the replay's server did not start: {exc}") from None
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise CannotMeasure(f"the replay's server stopped answering: {exc}") from None


def _counted(
    before: serverstats.Counters,
    after: serverstats.Counters,
    version: str,
    result: LoadgenResult,
    what: str,
) -> tuple[CommandReading, dict[str, int]]:
    """The replay's window read from its two snapshots, with its error replies; a load
    generator (``what``) that failed is one line."""
    if result.problem or result.exit_code:
        why = result.problem or f"exit code {result.exit_code}"
        raise CannotMeasure(f"the replay's {what} failed: {why}")
    delta = serverstats.delta(before, after)
    errors = {name: int(n) for name, n in delta.errors.items()}
    if not errors and delta.error_replies:
        errors = {"error replies": int(delta.error_replies)}
    return _reading(delta, version), errors


def replay(
    workload: MixWorkload,
    binary: str,
    tool: LoadgenBinary,
    cpus: CpuPlan,
    seconds: float,
    say: Callable[[str], None],
    sizes: bool,
) -> tuple[CommandReading, dict[str, int], dict[tuple[str, int], shapes.Sizes]]:
    """The file run for ``seconds`` on a fresh server: its counters, its error replies;
    with ``sizes``, then the value sizes a MONITOR sample of a further short run saw."""
    with _fresh_server(workload, binary, cpus, say) as (server, control):
        saved = setup.prepare_server(control, workload, tool.name)
        point = points.points(workload)[0]
        specs = points.load_specs(workload, point, tool.name, saved)
        aim = Aim(tool, server.host, server.port, cpus.client, server.is_alive, server.pid)
        before = serverstats.snapshot(control)  # connects: counted below
        sockets = procs.socket_count(server.pid) if server.pid else None
        result = loadgen.run(tool, aim, specs, seconds=seconds, timeout=seconds + SETUP_TIMEOUT_S)
        if server.pid:
            # the load generator's last requests run before they are counted
            serverstats.wait_sockets(server.pid, sockets, control, timeout=10.0)
        after = serverstats.snapshot(control)
        seen = {}
        if sizes:
            seen = sizes_seen(server, lambda s: loadgen.run(
                tool, aim, specs, seconds=s, timeout=s + SETUP_TIMEOUT_S))  # fmt: skip
    reading, errors = _counted(
        before, after, server.version, result, f"load generator ({tool.name})"
    )
    return reading, errors, seen


def replay_lifecycle(
    workload: LifecycleWorkload,
    binary: str,
    engine: LoadgenBinary,
    cpus: CpuPlan,
    seconds: float,
    rate: float,
    say: Callable[[str], None],
    sizes: bool = False,
) -> tuple[CommandReading, dict[str, int], dict[tuple[str, int], shapes.Sizes]]:
    """The lifecycle run for ``seconds`` on a fresh server by the open-loop engine, its
    tasks arriving at ``rate`` a second (the live server's): its counters and its error
    replies. At the live rate, not flat out, so its commands per event-loop turn, and so
    its CPU per task, are the live traffic's, not a saturated server's. With ``sizes``,
    then the value sizes a MONITOR sample of a further run saw, at SIZES_RATE tasks a
    second at least, for LIFECYCLE_SIZES_S (enough values drawn for their p10 and p90)."""
    with _fresh_server(workload, binary, cpus, say) as (server, control):
        lifecycle_trial.fresh(server, workload)
        aim = Aim(engine, server.host, server.port, cpus.client, server.is_alive, server.pid)
        document = workload.engine_document()

        def run(seconds: float, rate: float) -> lifecycle.LifecycleResult:
            (result,) = lifecycle.run(
                engine, [aim], document, lifecycle.Arrivals(rate, "poisson"),
                seconds=seconds, warmup=0.0, timeout=seconds + SETUP_TIMEOUT_S,
            )  # fmt: skip
            return result

        before = serverstats.snapshot(control)
        result = run(seconds, rate)
        after = serverstats.snapshot(control)
        seen = {}
        if sizes:
            seen = sizes_seen(server, lambda s: run(s, max(rate, SIZES_RATE)), LIFECYCLE_SIZES_S)
    reading, errors = _counted(before, after, server.version, result, f"engine ({engine.name})")
    return reading, errors, seen


def sizes_seen(
    server: RunningServer, run: Callable[[float], object], seconds: float = SIZES_S
) -> dict[tuple[str, int], shapes.Sizes]:
    """Value sizes per (command, argument position) as a MONITOR sample of the replay sees
    them: parsed and aggregated by the capture's own code, so both sides are measured
    alike. ``run(seconds)`` sends the replay's load again: a run of its own after the
    counted window, which MONITOR would slow."""
    monitor = redis.Redis(
        host=server.host, port=server.port, username=server.access.username,
        password=server.access.password, socket_timeout=30, decode_responses=False,
        **QUIET_CONNECT,
    )  # fmt: skip
    with ThreadPoolExecutor(max_workers=1) as pool:
        running = pool.submit(run, seconds)
        try:
            time.sleep(0.1)  # its connections open
            taken = sampler.take(monitor, seconds - 0.2, SIZES_COMMANDS)
        finally:
            monitor.close()
            running.result()
    return {
        (a.command, a.position): a.sizes
        for a in shapes.infer(taken.records).arguments
        if a.sizes is not None
    }
