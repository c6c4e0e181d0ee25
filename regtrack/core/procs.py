"""Child processes that cannot outlive regtrack, and CPU accounting read from /proc.

Every server and load generator is started here so that one rule holds everywhere: if
regtrack dies (even by SIGKILL) the kernel kills its children (PR_SET_PDEATHSIG), and on a
normal exit or an exception they are stopped explicitly.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from regtrack.core import child_env, interrupts
from regtrack.core.errors import CannotMeasure


def util_linux(tool: str, without: str) -> str:
    """The path of a util-linux tool (taskset, setpriv), or one line saying what is lost
    ``without`` it and how to install it."""
    path = shutil.which(tool)
    if not path:
        raise CannotMeasure(
            f"{tool} is not installed, so {without}: install util-linux "
            "(apt-get install util-linux)"
        )
    return path


def setpriv_path() -> str:
    """setpriv: it sets the parent-death signal, then execs the program."""
    return util_linux("setpriv", "children could outlive regtrack")


def spawn(
    argv: Sequence[str],
    *,
    stdout: int | object = subprocess.PIPE,
    stderr: int | object = subprocess.PIPE,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen:
    """Start argv (never through a shell) in its own session, killed if regtrack dies, with
    ``env`` as its whole environment: by default the basics of core/child_env.py, never
    regtrack's own (a CI job's tokens stay there).

    Its own session keeps the terminal's Ctrl-C away from it, so regtrack decides the order
    in which things stop and can still read the server after an interrupt. The death
    signal is set by ``setpriv --pdeathsig KILL`` in the child after the fork, not by a
    ``preexec_fn``: Python code between fork and exec can deadlock when other threads
    run (load generators start from a thread pool), and setpriv runs none. The signal
    survives the exec of taskset and of the program itself.
    """
    return subprocess.Popen(
        [setpriv_path(), "--pdeathsig", "KILL", "--", *argv],
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        cwd=cwd,
        env=child_env.basic() if env is None else env,
        start_new_session=True,
    )


def alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one we may not signal exists too)."""
    if pid <= 0:
        return False  # 0 and below name process groups, not a process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running(proc: subprocess.Popen) -> bool:
    """Whether a child still runs.

    ``poll()`` alone is not enough: a child killed while another process traces it stays
    unreported to its parent until the tracer lets go. vgdb (callgrind's commands) attaches
    to valgrind with ptrace to deliver each command, so a server killed during one looked
    alive until the command's own timeout (120 s). /proc shows it as a zombie at once.
    """
    if proc.poll() is not None:
        return False
    try:
        text = Path(f"/proc/{proc.pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rindex(")") + 2 :].split()[0] not in ("Z", "X")


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


def pause(proc: subprocess.Popen) -> None:
    """Stop a child and its process group where they stand (SIGSTOP): its connections stay
    open, its requests in flight are answered into its socket buffers."""
    _signal_group(proc, signal.SIGSTOP)


def resume(proc: subprocess.Popen) -> None:
    """Let a paused child go on (SIGCONT)."""
    _signal_group(proc, signal.SIGCONT)


def kill(proc: subprocess.Popen, timeout: float = 5.0) -> int | None:
    """End a child whose output is not wanted, paused or not: SIGKILL to its group, then
    reap it (a SIGTERM would wait, pending, until a paused child is resumed)."""
    _signal_group(proc, signal.SIGKILL)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


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
    """Per-CPU jiffies from /proc/stat, for the steal share over an interval (the others'
    share of the pinned CPUs is core/others.py's)."""

    steal: int
    total: int

    @classmethod
    def read(cls, cpus: Sequence[int]) -> CpuTimes:
        wanted = {f"cpu{c}" for c in cpus}
        steal = total = 0
        with open("/proc/stat") as f:
            for line in f:
                fields = line.split()
                if not fields or fields[0] not in wanted:
                    continue
                values = [int(v) for v in fields[1:]]
                # user nice system idle iowait irq softirq steal guest guest_nice
                steal += values[7] if len(values) > 7 else 0
                total += sum(values[:8])
        return cls(steal=steal, total=total)

    def steal_pct_since(self, earlier: CpuTimes) -> float:
        dt = self.total - earlier.total
        return 100.0 * (self.steal - earlier.steal) / dt if dt > 0 else 0.0


def process_cpu_seconds(pid: int) -> float | None:
    """user+system CPU seconds of a live process (all threads), or None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def socket_count(pid: int) -> int | None:
    """How many sockets a live process holds open (from /proc/PID/fd, whose links are read,
    never followed), or None if it is gone or not ours to read. Reading it runs no code in
    the process, unlike asking a server for its client list."""
    try:
        with os.scandir(f"/proc/{pid}/fd") as entries:
            paths = [entry.path for entry in entries]
    except OSError:
        return None
    count = 0
    for path in paths:
        try:
            count += os.readlink(path).startswith("socket:")
        except FileNotFoundError:
            continue  # closed since the listing: no longer held (the count is falling)
        except OSError:
            return None
    return count


TICK_S = 0.1  # how often on_tick runs while waiting for a child


def busiest_window(
    samples: list[tuple[float, float | None, float | None]], length: float
) -> tuple[float, float | None] | None:
    """CPU shares (percent of one CPU) of two processes over the ``length`` seconds in
    which the first one worked hardest: a load generator's measured window, without its
    start-up and teardown (which a share over its whole life counts as idle time).

    ``samples`` are (time, CPU seconds of the load generator, of the server); None when
    there are too few samples to place such a window.
    """
    points = [(t, c, srv) for t, c, srv in samples if c is not None]
    length = min(length, points[-1][0] - points[0][0]) if points else 0.0
    if length <= TICK_S or len(points) < 3:
        return None
    best: tuple[float, int, int] | None = None
    j = 0
    for i in range(len(points)):
        while j < len(points) and points[j][0] - points[i][0] < length - TICK_S / 2:
            j += 1
        if j == len(points):
            break
        rate = (points[j][1] - points[i][1]) / (points[j][0] - points[i][0])
        if best is None or rate > best[0]:
            best = (rate, i, j)
    if best is None:
        return None
    rate, i, j = best
    span = points[j][0] - points[i][0]
    first, last = points[i][2], points[j][2]
    server = 100.0 * (last - first) / span if first is not None and last is not None else None
    return 100.0 * rate, server


class Abandoned(Exception):
    """A child was killed before it finished; the message says why."""


def wait_with_rusage(
    proc: subprocess.Popen,
    timeout: float,
    keep_going: Callable[[], bool] = lambda: True,
    on_tick: Callable[[], None] | None = None,
) -> tuple[int, float]:
    """Wait for a child and return (exit code, CPU seconds it used).

    The kernel's rusage of the reaped child is exact, unlike sampling /proc while it runs.
    Kills the child and raises Abandoned when it runs past ``timeout``, when ``keep_going``
    (checked every 0.2 s, e.g. "is the server still alive?") turns false, or when regtrack
    was told to stop (a thread waits here too: the signal's exception reaches only the
    main thread).
    ``on_tick`` is called at the start and every 0.1 s (e.g. to sample CPU times).
    """
    deadline = time.monotonic() + timeout
    next_check = time.monotonic() + 0.2
    next_tick = time.monotonic()
    while True:
        if on_tick is not None and time.monotonic() >= next_tick:
            next_tick += TICK_S
            on_tick()
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
            if interrupts.pending():
                reason = "was stopped: regtrack was interrupted"
            elif not keep_going():
                reason = "was stopped because the server exited"
        if reason:
            _signal_group(proc, signal.SIGKILL)
            os.wait4(proc.pid, 0)
            proc.returncode = -signal.SIGKILL
            raise Abandoned(reason)
        time.sleep(0.01)
