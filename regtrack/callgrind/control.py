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

from regtrack import procs
from regtrack.errors import CannotMeasure

CONTROL_TIMEOUT_S = 120.0


def require() -> tuple[str, str]:
    """Paths of valgrind and callgrind_control, or one line saying how to get them."""
    valgrind = shutil.which("valgrind")
    control = shutil.which("callgrind_control")
    if not valgrind or not control:
        raise CannotMeasure(
            "--metric instructions needs valgrind (callgrind): install it with "
            "apt-get install valgrind, or use --metric throughput"
        )
    return valgrind, control


def wrapper(valgrind: str, outdir: Path) -> list[str]:
    """The argv prefix that runs a server under callgrind, isolated in ``outdir``."""
    return [
        valgrind,
        "--tool=callgrind",
        f"--callgrind-out-file={outdir}/callgrind.out.%p",
        f"--vgdb-prefix={outdir}/vgdb",
        "--dump-instr=no",
        "--collect-jumps=no",
        "--quiet",
    ]


def _control(control: str, outdir: Path, pid: int, action: str, alive: Callable[[], bool]) -> None:
    """Run callgrind_control; give up at once if the server dies (it would wait for it)."""
    with tempfile.TemporaryFile() as out:
        proc = procs.spawn(
            [control, f"--vgdb-prefix={outdir}/vgdb", action, str(pid)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            code, _ = procs.wait_with_rusage(proc, CONTROL_TIMEOUT_S, alive)
        except procs.Abandoned as exc:
            raise CannotMeasure(f"callgrind_control {action} {exc}") from None
        out.seek(0)
        text = out.read().decode(errors="replace").strip()
    if code != 0 or "Error" in text:
        last = text.splitlines()[-1:] or ["no output"]
        raise CannotMeasure(f"callgrind_control {action} failed: {last[0]}")


def zero(control: str, outdir: Path, pid: int, alive: Callable[[], bool]) -> None:
    _control(control, outdir, pid, "--zero", alive)


def dump(control: str, outdir: Path, pid: int, alive: Callable[[], bool]) -> Path:
    """Ask for a dump and return the new profile file once it is complete."""
    before = set(outdir.glob(f"callgrind.out.{pid}*"))
    _control(control, outdir, pid, "--dump", alive)
    deadline = time.monotonic() + CONTROL_TIMEOUT_S
    while time.monotonic() < deadline and alive():
        new = sorted(set(outdir.glob(f"callgrind.out.{pid}*")) - before)
        # callgrind writes "totals:" last: a file without it is still being written.
        if new and "totals:" in new[-1].read_text(errors="replace")[-4096:]:
            return new[-1]
        time.sleep(0.05)
    raise CannotMeasure(f"callgrind wrote no dump for pid {pid} in {outdir}")
