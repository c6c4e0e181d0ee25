"""`regtrack mix capture --check`: a captured mix or lifecycle replayed against a fresh
server and compared with the live traffic it came from.

The real side is the live server at --url now: its commandstats and CPU over --seconds,
read with INFO alone (as the capture reads it: nothing is sent that changes its data).
The file's ratios are rounded, its rare commands left out and its processes run flat
out, so the live counters, not the file, are the reference; the value sizes the capture
saw come from the file's header (traffic/value_sizes.py), the live server cannot show
them without MONITOR. The replay side: the file run for the same --seconds by memtier
(or the built-in driver) against a fresh redis-server pinned to the server CPUs, with
the file's [server] settings, counted by the same INFO deltas. A lifecycle (what the
capture writes where its sample links a task's push to its pop) is replayed by the
open-loop engine at the live server's task rate (its calls of the --task command, by
default the lifecycle's blocking pop, per second over the live window), not flat out;
its value sizes are read on a further run (capture_replay.SIZES_RATE tasks/s at least),
those it draws from their distribution (``${fill:...}``) compared at p10, p50 and p90.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from regtrack.analysis.capture_check import Replayed, SizeSides, compare
from regtrack.bench import capture_replay
from regtrack.bench.loadgen import builtin, memtier, openloop
from regtrack.bench.loadgen.base import LoadgenBinary
from regtrack.core import redact
from regtrack.core.cpus import plan_cpus
from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.workloads import commands, points
from regtrack.workloads.files import load_workload
from regtrack.workloads.lifecycle import LifecycleWorkload
from regtrack.workloads.model import MixWorkload
from regtrack.workloads.traffic import value_sizes


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
    workload, text = _workload(request.file)
    if isinstance(workload, LifecycleWorkload):
        return _lifecycle(request, workload, value_sizes.recorded(text), say)
    task = _task(workload, request.task)
    binary = _server_binary(request.server_bin)
    tool = _loadgen(request.loadgen)
    cpus = plan_cpus(request.server_cpus, request.client_cpus)
    real = capture_replay.live(request.url, request.secret, request.seconds)
    say(
        f"read {redact.url(request.url)} for {request.seconds:g} s; replaying {request.file} "
        f"for {request.seconds:g} s on a fresh server"
    )
    depth = int(points.points(workload)[0].params["pipeline"])
    recorded = value_sizes.recorded(text)
    replay, errors, seen = capture_replay.replay(
        workload, binary, tool, cpus, request.seconds, say, sizes=bool(recorded)
    )
    sizes = [SizeSides(r, seen.get((r.command, r.position))) for r in recorded]
    check = compare(real, replay, sizes, task, errors)
    return Replayed(
        check, redact.url(request.url), tool.name, cpus.server_list, cpus.client_list, depth
    )


def _lifecycle(
    request: Request,
    workload: LifecycleWorkload,
    recorded: list[value_sizes.SizeRecord],
    say: Callable[[str], None],
) -> Replayed:
    """A lifecycle replayed by the engine at the live task rate (see the module's doc)."""
    if request.loadgen not in (None, openloop.NAME):
        raise BadInput(
            f"--check {request.file}: a lifecycle is replayed by {openloop.NAME}, not "
            f"{request.loadgen}: leave out --loadgen"
        )
    pop = commands.stat_names(workload.dequeue.command)[0]
    task = _task(workload, request.task) or pop
    binary = _server_binary(request.server_bin)
    engine = openloop.locate()
    cpus = plan_cpus(request.server_cpus, request.client_cpus)
    real = capture_replay.live(request.url, request.secret, request.seconds)
    tasks = real.calls.get(task, 0)
    if not tasks:
        raise CannotMeasure(
            f"{redact.url(request.url)} ran no {task} in {request.seconds:g} s, so its task "
            "rate is unknown: check while the queue runs (or name the per-task command "
            "with --task)"
        )
    rate = tasks / real.seconds
    say(
        f"read {redact.url(request.url)} for {request.seconds:g} s ({rate:,.0f} {task}/s); "
        f"replaying {request.file} at that rate for {request.seconds:g} s on a fresh server"
    )
    replay, errors, seen = capture_replay.replay_lifecycle(
        workload, binary, engine, cpus, request.seconds, rate, say, sizes=bool(recorded)
    )
    sent = [args for _, args in workload.located_args()]
    drawn, ids = value_sizes.drawn(sent), value_sizes.engine_sized(sent)
    shared = value_sizes.shared(sent)
    sizes = [
        SizeSides(r, seen.get(at := (r.command, r.position)), at in drawn, at in ids, at in shared)
        for r in recorded
    ]
    check = compare(real, replay, sizes, task, errors)
    return Replayed(
        check, redact.url(request.url), f"{engine.name} at {rate:,.0f} tasks/s",
        cpus.server_list, cpus.client_list, 1, paced=True,
    )  # fmt: skip


def _workload(file: str) -> tuple[MixWorkload | LifecycleWorkload, str]:
    path = Path(file)
    if not path.is_file():
        raise BadInput(f"--check {file}: no such file")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"--check {file}: {getattr(exc, 'strerror', None) or 'not text'}") from None
    workload = load_workload(file if "/" in file else f"./{file}")  # a path, never a name
    if not isinstance(workload, MixWorkload | LifecycleWorkload):
        raise BadInput(
            f"--check {file}: a {getattr(workload, 'kind', 'driver')} workload; --check "
            "replays what mix capture writes: a mix or a lifecycle"
        )
    return workload, text


def _task(workload: MixWorkload | LifecycleWorkload, task: str | None) -> str | None:
    """``--task`` as commandstats names it, checked against the file's commands."""
    if task is None:
        return None
    name = task.strip().lower()
    sent = sorted({n for args in _sent(workload) for n in commands.stat_names(args)})
    if name not in sent:
        raise BadInput(f"--task {task}: the file sends no {task}; give one of {', '.join(sent)}")
    return name


def _sent(workload: MixWorkload | LifecycleWorkload) -> list[list[str]]:
    if isinstance(workload, LifecycleWorkload):
        return [args for _, args in workload.located_args()]
    return [c.args for c in workload.all_commands]


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
