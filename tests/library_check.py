"""A lifecycle preset against the real library it follows: the same tasks through the real
library's driver (tests/library_traffic.py) and through the preset on the open-loop engine,
each on a fresh redis-server, and the server's counts per task compared command by command.

Both run in one regime, since what a dequeue finds follows it:
- drained (celery, rq, dramatiq): every task enqueued at once and drained (the real
  driver's), the preset at capacity with one producer keeping the queue full and one
  consumer paced by its tasks' work (work_us) to the real library's tasks/s.
- paced (taskiq, arq: PACED): the real driver and the preset both enqueue at the same fixed
  arrival rate, well below the worker's speed (taskiq-redis drains ~1,100 tasks/s here),
  so every XREADGROUP wakes for the task that arrived and finds it alone (MONITOR: 990 of
  994 reads returned one entry at 200 tasks/s), and the per-read reclaim (SCRIPT EXISTS,
  MULTI SET NX XAUTOCLAIM EVALSHA EXEC) is per task on both sides. Drained, the two do not
  meet: the real driver's producer shares its event loop with the receiver, whose reads
  find ~4 entries, while the preset's full queue gives every read its COUNT (100).
  arq at 100 jobs/s: its poll every 0.5 s finds the ~50 jobs that arrived since (23 polls
  for 1,100 jobs), which it runs in a burst ~1.9 ms apart, and each enqueue meets an idle
  worker on both sides. Drained, its producer enqueued every job while its event loop was
  busy, and the preset (paced to the burst's gaps) put the server at +17-20% (medians of
  3). Paced, the real figure holds within 6-20% over 3 runs, the preset +9 to +21% above it
  (five medians of 3): the engine waits idle for every reply, where arq's event loop is
  still busy when one comes, and on this VM the server's wake-up of an idle CPU is an IPI
  (/proc/interrupts: the client's CPU took 8.8 function-call interrupts per task from the
  preset's server, 1.2 from arq's; the server's sys time the excess). The preset cannot
  model a busy client; its approximations say so (benchmarks/results/library_check.txt).
Commands a library sends once per task must agree per task. Commands that follow the
dequeue in a regime both cannot share are listed in REGIME with the measured reason, shown
and not held to the bound. Server CPU per task is compared in the same regime. Used by
tests/test_lifecycle_real.py and benchmarks/library_check.py."""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from regtrack.bench.loadgen import openloop
from regtrack.workloads.files import load_workload
from regtrack.workloads.lifecycle import LifecycleWorkload
from tests import library_traffic as lt

# Per-task figures are held to these bounds (issue 48).
COMMANDS_PCT = 10.0
CPU_PCT = 15.0
# The share of a real task's time the preset's consumer spends on its work (the rest: its
# round trips), to run at the real library's tasks/s.
WORK_SHARE = 0.85
# Seconds the preset may take to finish the tasks queued when its run ends: at capacity up
# to max_queued (1,000) wait, which a consumer at RQ's pace (~180 tasks/s, 19 round trips
# each) takes over the engine's default 5 s to drain.
DRAIN_S = 30.0
# Commands under this many per task in both are start-up, shut-down or time's share.
NOISE_PER_TASK = 0.05
# Libraries checked at a fixed arrival rate (tasks/s), both sides (see the docstring).
PACED = {"taskiq": 200.0, "arq": 100.0}
# A paced check's premise, checked on the real side: its read finds one task (reads per
# task within PREMISE_READS_PCT of 1) and the server's CPU grew with the tasks. A host that
# stalls the real driver for more than an arrival gap breaks it (CI once saw 0.72 reads
# per task and a negative CPU per task): that real run is measured again, up to
# PREMISE_TRIES times, as it is no measure of the library in the regime compared. The
# preset's run is held to the same premise (a slow host once gave its consumer 0.77 reads
# per task, two tasks a read, with the server at 5 times its usual CPU per task). (A
# real run whose driver hung after its tasks, as taskiq's receiver once did, reading on
# at 1.12-1.3 reads and 2-8x the CPU per task for 120 s, is refused outright: run_real.)
# arq's poll finds what arrived in its 0.5 s whatever the host does: its premise is the
# CPU's growth alone.
PACED_READ = {"taskiq": "cmdstat_xreadgroup"}
PREMISE_READS_PCT = 5.0
PREMISE_TRIES = 3
# Commands whose count follows the dequeue, per preset (see the module's docstring).
# dramatiq: a fetch asks for 16 minus its messages in flight and its worker threads share
# the driver's CPU with its producer, so what a fetch finds is spread over 0 to 16
# (MONITOR of 1,000 tasks: 193 fetches, 44 empty, 46 of one, 29 of 16; 0.15 HMGET per
# task), where the preset's one consumer of a full queue finds 16 (0.06). The LPOP that
# finds the queue empty follows that too (real 1.07-1.10 per task, preset 1.01). EVALSHA
# and its heartbeat ZADD are held to the bound: the fetch is ~0.15 of their ~2.1 per task,
# and they measured 2-4% apart in every run.
# arq: one ZRANGEBYSCORE per 0.5 s (0.02 per task at 100 tasks/s); the preset's consumer
# polls again at once after jobs found, until a poll finds none (~0.06).
REGIME = {
    "dramatiq": {"cmdstat_lpop", "cmdstat_hmget"},
    "arq": {"cmdstat_zrangebyscore"},
}  # fmt: skip


@dataclass(frozen=True)
class Row:
    command: str
    real: float
    preset: float
    regime: bool  # follows the dequeue: shown, not bounded

    @property
    def off_pct(self) -> float:
        base = max(self.real, 1e-9)
        return 100.0 * (self.preset - self.real) / base

    @property
    def within(self) -> bool:
        return self.regime or abs(self.off_pct) <= COMMANDS_PCT


@dataclass(frozen=True)
class Check:
    library: str
    version: str
    follows: str
    rate: float  # tasks/s the real library ran at, the preset's pace
    rows: tuple[Row, ...]
    real_cpu_us: float
    preset_cpu_us: float
    preset_tasks: int
    paced: bool = False  # both at a fixed arrival rate (PACED), not drained

    @property
    def cpu_off_pct(self) -> float:
        return 100.0 * (self.preset_cpu_us - self.real_cpu_us) / self.real_cpu_us

    @property
    def missing(self) -> list[str]:
        """Commands one side sends (above noise) that the other never does."""
        return [r.command for r in self.rows if min(r.real, r.preset) == 0]

    @property
    def commands_ok(self) -> bool:
        return not self.missing and all(r.within for r in self.rows)

    def table(self) -> str:
        lines = [
            f"{self.library}: {self.follows} (installed {self.version}); "
            f"{'both at' if self.paced else 'preset at'} {self.rate:,.0f} tasks/s"
            f"{' (arrivals)' if self.paced else ''}, {self.preset_tasks:,} preset tasks",
            f"  {'command':<26} {'real/task':>10} {'preset/task':>12} {'off':>8}",
        ]
        for r in self.rows:
            note = "  (follows the dequeue)" if r.regime else ""
            lines.append(
                f"  {r.command.removeprefix('cmdstat_'):<26} {r.real:>10.2f} {r.preset:>12.2f} "
                f"{r.off_pct:>+7.1f}%{note}"
            )
        total_real = sum(r.real for r in self.rows)
        total_preset = sum(r.preset for r in self.rows)
        lines.append(f"  {'total':<26} {total_real:>10.2f} {total_preset:>12.2f}")
        lines.append(
            f"  server CPU per task: real {self.real_cpu_us:.1f} us, preset "
            f"{self.preset_cpu_us:.1f} us ({self.cpu_off_pct:+.1f}%)"
        )
        return "\n".join(lines)


def preset_traffic(
    workload: LifecycleWorkload, rate: float | None, seconds: float
) -> tuple[dict[str, float], float, int]:
    """The preset for ``seconds`` on a fresh server, at ``rate`` (None: capacity); calls
    and CPU per task."""
    engine = openloop.locate()
    pace = ["--rate", repr(rate), "--arrival", "constant"] if rate else []
    with lt.server() as srv, tempfile.TemporaryDirectory() as tmp:
        for command in workload.setup_commands():
            srv.client.execute_command(*command)
        doc = Path(tmp) / "lifecycle.json"
        doc.write_text(json.dumps(workload.engine_document()))
        srv.client.config_resetstat()
        cpu_before = lt._cpu_us(srv.client)
        out = subprocess.run(
            ["taskset", "-c", lt.DRIVER_CPU, engine.path, "--lifecycle", str(doc),
             "--port", str(srv.port), *pace, "--duration", repr(seconds), "--warmup", "0",
             "--drain", repr(DRAIN_S)],
            capture_output=True, text=True, check=True, timeout=60 + 2 * seconds + DRAIN_S,
        )  # fmt: skip
        cpu = lt._cpu_us(srv.client) - cpu_before
        calls = lt._commands(srv.client)
    report = json.loads(out.stdout)
    tasks = int(report["completed"]) + int(report["left"])
    if report["left"] or report["errors"]:
        raise RuntimeError(f"{workload.name}: the preset did not run clean: {out.stdout[:400]}")
    skip = {
        "cmdstat_config|resetstat",
        "cmdstat_info",
        "cmdstat_script|load",
        "cmdstat_xgroup|create",
    }
    per_task = {k: v / tasks for k, v in calls.items() if k not in skip}
    return per_task, cpu / tasks, tasks


T = TypeVar("T")


def _until_held(measure: Callable[[], T], held: Callable[[T], bool]) -> T:
    """``measure()``, measured again while ``held`` says the run broke its premise, up to
    PREMISE_TRIES runs in all (the last one is kept either way)."""
    result = measure()
    for _ in range(PREMISE_TRIES - 1):
        if held(result):
            break
        result = measure()
    return result


def _premise_held(library: str, per_task: dict[str, float], cpu_us: float) -> bool:
    """A paced run of either side, real or preset, measured the regime compared."""
    if library not in PACED_READ:
        return cpu_us > 0
    reads = per_task.get(PACED_READ[library], 0.0)
    return abs(reads - 1.0) <= PREMISE_READS_PCT / 100 and cpu_us > 0


def run_real(library: str, small: int, large: int, rate: float | None) -> lt.LibraryTraffic:
    """The real library's traffic per task, from runs that finished every task and then
    stopped: a driver still running at its timeout has its idle reads in the counts."""
    real = lt.measure(library, small=small, large=large, rate=rate)
    for run in real.runs:
        assert run.exit_code == 0 and run.task_lines == run.tasks and run.done_line, (
            f"the real {library} driver did not finish {run.tasks} tasks and stop "
            f"(exit {run.exit_code}, {run.task_lines} task lines, done line {run.done_line}, "
            f"{run.seconds:.0f} s): {run.stderr[-1000:]}"
        )
    return real


def check(
    library: str, small: int = 100, large: int = 600, workload_file: str | None = None
) -> Check:
    """The library's preset (or ``workload_file``: a lifecycle `mix capture --sample` wrote
    of the library's traffic) against the real library, run alike."""
    paced = PACED.get(library)
    real = _until_held(
        lambda: run_real(library, small, large, paced),
        lambda r: (
            not paced or _premise_held(library, r.commands_per_task, r.server_cpu_us_per_task)
        ),
    )
    a, b = real.runs
    workload = load_workload(workload_file or library)
    assert isinstance(workload, LifecycleWorkload), f"{workload_file or library}: not a lifecycle"
    if paced:
        # Both at the same arrival rate, open loop, one producer and one consumer: every
        # read wakes for the task that arrived and finds it alone.
        rate = paced
        alike = workload.model_copy(update={"producers": 1, "consumers": 1})
        preset, cpu_us, tasks = _until_held(
            lambda: preset_traffic(alike, rate, (large - small) / rate),
            lambda run: _premise_held(library, run[0], run[1]),
        )
    else:
        # the library's pace: its tasks' span (first enqueue to last done), else its run's
        spans = (a.span_s, b.span_s)
        if None in spans:
            spans = (a.seconds, b.seconds)
        rate = (large - small) / max(1e-3, spans[1] - spans[0])
        # The real driver's regime: its tasks wait in the queue for one worker, which finds
        # one at every dequeue (never the blocked path), at the library's pace. The preset:
        # one producer keeping the queue full, one consumer whose tasks' work (work_us)
        # paces it to the real tasks/s, each command then a wake-up of its own as in the
        # real run.
        seconds = (large - small) / rate
        work = int(WORK_SHARE * 1e6 / rate)
        alike = workload.model_copy(update={"producers": 1, "consumers": 1, "work_us": work})
        preset, cpu_us, tasks = preset_traffic(alike, None, seconds)
    names = sorted(
        n for n in set(real.commands_per_task) | set(preset)
        if max(real.commands_per_task.get(n, 0.0), preset.get(n, 0.0)) >= NOISE_PER_TASK
    )  # fmt: skip
    rows = tuple(
        Row(n, real.commands_per_task.get(n, 0.0), preset.get(n, 0.0),
            n in REGIME.get(library, ()))
        for n in names
    )  # fmt: skip
    return Check(
        library, real.version, workload.follows, rate, rows, real.server_cpu_us_per_task,
        cpu_us, tasks, paced is not None,
    )  # fmt: skip
