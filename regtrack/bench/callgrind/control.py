"""Run a server under callgrind and zero/dump its counters around a measured window.

Callgrind counts user-space instructions: repeatable to well under 1% where throughput
on a shared machine drifts 5-20%. Counters are zeroed after setup and dumped after a fixed
number of requests, so setup, populate and INFO calls are outside the count.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from regtrack.core import child_env, cycles, procs
from regtrack.core.errors import CannotMeasure

CONTROL_TIMEOUT_S = 120.0
# serverCron runs `hz` times per second of wall time, whatever the server does. Callgrind
# slows the server ~50x, so at the default hz 10 that time-driven work (memory stats
# merges, client and database crons) costs ~50x its native share per operation, and that
# share moves with the machine's speed: 0.2-0.8% between two windows of one process
# (docs/methodology.md). serverCron itself is not counted (--toggle-collect); hz 1 under
# callgrind also cuts what it changes for the code that is counted (buffers it resizes)
# to about its native rate.
CALLGRIND_HZ = 1
CRON_FUNCTION = "serverCron"
# vgdb waits this long for a server blocked in a system call (an idle server between
# windows, always) to reach a poll point before it makes the call return itself (ptrace);
# its default of 100 ms, plus callgrind_control's perl and process listing, cost 0.22 s
# per command against 0.10 s (measured: eight commands per instruction trial).
MAX_INVOKE_MS = 10


def require() -> tuple[str, str]:
    """Paths of valgrind and vgdb (which sends callgrind its commands), or one line saying
    how to get them."""
    valgrind = shutil.which("valgrind")
    control = shutil.which("vgdb")
    if not valgrind or not control:
        raise CannotMeasure(
            "--metric instructions (and cycles) needs valgrind (callgrind): install it with "
            "apt-get install valgrind, or use --metric throughput"
        )
    return valgrind, control


def wrapper(valgrind: str, outdir: Path, simulate: bool = False) -> list[str]:
    """The argv prefix that runs a server under callgrind, isolated in ``outdir``; with
    ``simulate`` (--metric cycles) its cache and branch simulation on, on the pinned caches
    of core/cycles.py rather than the host's (a count must not depend on the host)."""
    simulation = (
        ["--cache-sim=yes", "--branch-sim=yes", *cycles.geometry_flags()] if simulate else []
    )
    return [
        valgrind,
        "--tool=callgrind",
        f"--callgrind-out-file={outdir}/callgrind.out.%p",
        f"--vgdb-prefix={outdir}/vgdb",
        "--dump-instr=no",
        "--collect-jumps=no",
        # Start without instrumentation: start-up and populate run ~10x faster, and
        # instrument() switches it on around each instruction trial.
        "--instr-atstart=no",
        # Timer-driven work is a cost per second, not per operation: serverCron and what
        # it calls (memory statistics merges, client and database crons) are not counted.
        # (--toggle-collect alone would start with collection off: say "yes" explicitly.)
        f"--toggle-collect={CRON_FUNCTION}",
        "--collect-atstart=yes",
        *simulation,
        "--quiet",
    ]


def _control(control: str, outdir: Path, pid: int, action: str, alive: Callable[[], bool]) -> None:
    """Send callgrind one monitor command through vgdb (what callgrind_control does, without
    its perl and its 100-ms wait); give up at once if the server dies (vgdb would wait)."""
    with tempfile.TemporaryFile() as out:
        proc = procs.spawn(
            [control, f"--vgdb-prefix={outdir}/vgdb", f"--pid={pid}",
             f"--max-invoke-ms={MAX_INVOKE_MS}", *action.split()],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=child_env.server(),
        )  # fmt: skip
        try:
            code, _ = procs.wait_with_rusage(proc, CONTROL_TIMEOUT_S, alive)
        except procs.Abandoned as exc:
            raise CannotMeasure(f"callgrind {action} {exc}") from None
        out.seek(0)
        text = out.read().decode(errors="replace").strip()
    if code != 0 or "error" in text.lower() or "not recognised" in text:
        last = text.splitlines()[-1:] or ["no output"]
        raise CannotMeasure(f"callgrind {action} failed: {last[0]}")


def instrument(control: str, outdir: Path, pid: int, on: bool, alive: Callable[[], bool]) -> None:
    """Switch instrumentation on (before a trial's warm-up) or off (after its last dump)."""
    _control(control, outdir, pid, f"instrumentation {'on' if on else 'off'}", alive)


def zero(control: str, outdir: Path, pid: int, alive: Callable[[], bool]) -> None:
    _control(control, outdir, pid, "zero", alive)


def dump(control: str, outdir: Path, pid: int, alive: Callable[[], bool]) -> Path:
    """Ask for a dump and return the new profile file once it is complete."""
    before = set(outdir.glob(f"callgrind.out.{pid}*"))
    _control(control, outdir, pid, "dump", alive)
    deadline = time.monotonic() + CONTROL_TIMEOUT_S
    while time.monotonic() < deadline and alive():
        new = sorted(set(outdir.glob(f"callgrind.out.{pid}*")) - before)
        # callgrind writes "totals:" last: a file without it is still being written.
        if new and "totals:" in new[-1].read_text(errors="replace")[-4096:]:
            return new[-1]
        time.sleep(0.05)
    raise CannotMeasure(f"callgrind wrote no dump for pid {pid} in {outdir}")
