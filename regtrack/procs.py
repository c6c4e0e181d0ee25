"""Child processes that cannot outlive regtrack, and CPU accounting read from /proc.

Every server and load generator is started here so that one rule holds everywhere: if
regtrack dies (even by SIGKILL) the kernel kills its children (PR_SET_PDEATHSIG), and on a
normal exit or an exception they are stopped explicitly.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:
    # Runs in the child between fork and exec; survives exec (taskset execs the real program).
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def spawn(
    argv: Sequence[str],
    *,
    stdout: int | object = subprocess.PIPE,
    stderr: int | object = subprocess.PIPE,
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen:
    """Start argv (never through a shell) in its own session, killed if regtrack dies.

    Its own session keeps the terminal's Ctrl-C away from it, so regtrack decides the order
    in which things stop and can still read the server after an interrupt.
    """
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        cwd=cwd,
        env=env,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    # spawn() gave the child its own session, so its process group holds everything it
    # started (make's compilers, a shell's children) and nothing of ours.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def stop(proc: subprocess.Popen, grace: float = 5.0) -> int | None:
    """Stop a child and its process group: SIGTERM, then SIGKILL after ``grace`` seconds."""
    if proc.poll() is not None:
        _signal_group(proc, signal.SIGKILL)  # stragglers of an exited leader
        return proc.returncode
    _signal_group(proc, signal.SIGTERM)
    try:
        return proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        _signal_group(proc, signal.SIGKILL)
        return proc.wait(timeout=grace)


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (the server start retries if it is taken meanwhile)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


@dataclass(frozen=True)
class CpuTimes:
    """Per-CPU jiffies from /proc/stat, for busy and steal shares over an interval."""

    busy: int
    steal: int
    total: int

    @classmethod
    def read(cls, cpus: Sequence[int]) -> CpuTimes:
        wanted = {f"cpu{c}" for c in cpus}
        busy = steal = total = 0
        with open("/proc/stat") as f:
            for line in f:
                fields = line.split()
                if not fields or fields[0] not in wanted:
                    continue
                values = [int(v) for v in fields[1:]]
                # user nice system idle iowait irq softirq steal guest guest_nice
                idle = values[3] + (values[4] if len(values) > 4 else 0)
                st = values[7] if len(values) > 7 else 0
                tot = sum(values[:8])
                busy += tot - idle - st
                steal += st
                total += tot
        return cls(busy=busy, steal=steal, total=total)

    def steal_pct_since(self, earlier: CpuTimes) -> float:
        dt = self.total - earlier.total
        return 100.0 * (self.steal - earlier.steal) / dt if dt > 0 else 0.0

    def busy_seconds_since(self, earlier: CpuTimes) -> float:
        return (self.busy - earlier.busy) / os.sysconf("SC_CLK_TCK")


def contention_pct(
    before: CpuTimes, after: CpuTimes, own_cpu_s: float, wall_s: float, n_cpus: int
) -> float:
    """Share of a CPU set's time that processes other than ours used during an interval.

    Another process on the server's or client's CPUs slows the run for reasons that have
    nothing to do with Redis; steal time does not show it, this does.
    """
    if wall_s <= 0 or n_cpus <= 0:
        return 0.0
    foreign = after.busy_seconds_since(before) - own_cpu_s
    return max(0.0, 100.0 * foreign / (wall_s * n_cpus))


def process_cpu_seconds(pid: int) -> float | None:
    """user+system CPU seconds of a live process (all threads), or None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


class Abandoned(Exception):
    """A child was killed before it finished; the message says why."""


def wait_with_rusage(
    proc: subprocess.Popen, timeout: float, keep_going: Callable[[], bool] = lambda: True
) -> tuple[int, float]:
    """Wait for a child and return (exit code, CPU seconds it used).

    The kernel's rusage of the reaped child is exact, unlike sampling /proc while it runs.
    Kills the child and raises Abandoned when it runs past ``timeout`` or when
    ``keep_going`` (checked every 0.2 s, e.g. "is the server still alive?") turns false.
    """
    deadline = time.monotonic() + timeout
    next_check = time.monotonic() + 0.2
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage.ru_utime + usage.ru_stime
        now = time.monotonic()
        reason = None
        if now > deadline:
            reason = f"did not finish within {timeout:.0f} s and was killed"
        elif now > next_check:
            next_check = now + 0.2
            if not keep_going():
                reason = "was stopped because the server exited"
        if reason:
            _signal_group(proc, signal.SIGKILL)
            os.wait4(proc.pid, 0)
            proc.returncode = -signal.SIGKILL
            raise Abandoned(reason)
        time.sleep(0.01)
