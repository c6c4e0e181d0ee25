"""The server's system calls by name, counted by the kernel: what /proc/PID/io cannot see.

/proc/PID/io counts read- and write-class calls only (syscr, syscw): a change that adds a
getppid, a clock_gettime through syscall() or an epoll_ctl per request is invisible there.
The kernel's ``syscalls:sys_enter_*`` tracepoints count every call by name without ptrace
(no signal stops, no slower server): one counting perf event per tracepoint and server
thread (``perf_event_open``, the facility `perf stat -e 'syscalls:sys_enter_*' -p PID`
uses), read before and after each window, so a window's counts are exact deltas.

Why not the perf tool itself: the kernel waits for an RCU grace period when the last
event of a tracepoint closes (about 34 ms here, x ~360 tracepoints: `perf stat` took
12-13 s to exit, and prints its counts only then). A process-wide holder event per
tracepoint (on this process) keeps a server's own events cheap to close; the holders
close when regtrack exits. Where the tracepoints cannot be opened (perf_event_paranoid
above 1 without privilege, no tracefs (regtrack mounts its own for a moment where it
can), a container without CAP_PERFMON), ``unavailable()``
says why in one line and trials keep /proc/PID/io's read and write counts, as before.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import errno
import os
import platform
import resource
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

TRACEFS = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
PREFIX = "sys_enter_"
_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}
_TYPE_TRACEPOINT = 2
_ATTR_SIZE = 64  # PERF_ATTR_SIZE_VER0: every kernel with perf events takes it
_INHERIT = 1 << 1  # threads a counted thread starts later are counted with it
_FD_CLOEXEC = 8
_MNT_DETACH = 2
_state: dict[str, object] = {}


def tracepoints(root: Path | None = None) -> dict[str, int]:
    """{syscall name: tracepoint id} from tracefs (empty where it cannot be read). Without
    ``root``: where the system mounts it, else from a mount of regtrack's own."""
    for base in (root,) if root else TRACEFS:
        events = base / "events" / "syscalls"
        try:
            found = {
                d.name.removeprefix(PREFIX): int((d / "id").read_text())
                for d in events.iterdir()
                if d.name.startswith(PREFIX)
            }
        except (OSError, ValueError):
            continue
        if found:
            return found
    return {} if root else _from_own_mount()


def _from_own_mount() -> dict[str, int]:
    """The ids from a tracefs regtrack mounts on a directory it made, and unmounts at once:
    a root whose host has tracefs but does not mount it (seen on a CI machine) counts by
    name too, and the host's mounts are left as they were (perf mounts it and leaves it).
    A container without CAP_SYS_ADMIN cannot mount: empty, and the reason is said."""
    if os.geteuid() != 0:
        return {}
    libc = ctypes.CDLL(None, use_errno=True)
    where = tempfile.mkdtemp(prefix="regtrack-tracefs-")
    try:
        if libc.mount(b"nodev", where.encode(), b"tracefs", 0, None) != 0:
            return {}
        try:
            return tracepoints(Path(where))
        finally:
            libc.umount2(where.encode(), _MNT_DETACH)
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(where)


def _attr(tracepoint: int) -> ctypes.Array[ctypes.c_char]:
    """A perf_event_attr (version 0) counting one tracepoint."""
    raw = bytearray(_ATTR_SIZE)
    struct.pack_into("IIQ", raw, 0, _TYPE_TRACEPOINT, _ATTR_SIZE, tracepoint)
    struct.pack_into("Q", raw, 40, _INHERIT)
    return ctypes.create_string_buffer(bytes(raw), _ATTR_SIZE)


def _open(tracepoint: int, tid: int) -> int:
    """One counting event on ``tid`` (0: this process); raises OSError."""
    number = _PERF_EVENT_OPEN.get(platform.machine())
    if number is None:
        raise OSError(errno.ENOSYS, f"perf_event_open is not known on {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(number, _attr(tracepoint), tid, -1, -1, _FD_CLOEXEC)
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return int(fd)


def unavailable() -> str | None:
    """Why per-syscall counts cannot be taken here (None: they can). Probed once per
    process, by opening the holder events every later counter leans on."""
    if "why" not in _state:
        _state["why"] = _hold()
    why = _state["why"]
    return why if isinstance(why, str) else None


def _hold() -> str | None:
    points = tracepoints()
    if not points:
        return (
            "the syscalls tracepoints are not readable (tracefs is not mounted and cannot be "
            "mounted here, or not root)"
        )
    held: list[int] = []
    try:
        for tracepoint in points.values():
            held.append(_open(tracepoint, 0))
    except OSError as exc:
        for fd in held:  # before any other event: the waits are few (this one's)
            os.close(fd)
        hint = (
            f" (kernel.perf_event_paranoid is {_paranoid()}: run as root or set it to 1 or lower)"
            if exc.errno in (errno.EACCES, errno.EPERM)
            else ""
        )
        return f"cannot count the syscalls tracepoints: {exc.strerror}{hint}"
    _state["points"] = points
    _state["held"] = held
    atexit.register(_release, held)
    return None


def _release(held: list[int]) -> None:
    """Close the holders without making regtrack's exit wait ~12 s for the kernel: a
    forked child holds the last references and closes them, then exits by itself (it
    runs nothing else); this process's copies then close at once.

    The child first lets go of everything else it inherited: a caller reading regtrack's
    output to its end (a CI step, a pipe) would otherwise wait for the child, and a lock
    (the CPUs', the database's) would outlive the run."""
    try:
        pid = os.fork()
    except OSError:
        return  # the exit closes them, slowly
    if pid == 0:
        _keep_only(held)
        for fd in held:
            with contextlib.suppress(OSError):
                os.close(fd)
        os._exit(0)
    for fd in held:
        with contextlib.suppress(OSError):
            os.close(fd)


def _keep_only(fds: list[int]) -> None:
    """Close every descriptor but ``fds`` (standard streams included) in a new session of
    its own, so that no terminal signal or reader of the parent's output waits on it."""
    with contextlib.suppress(OSError):
        os.setsid()
    start = 0
    for fd in sorted(fds):
        os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, os.sysconf("SC_OPEN_MAX"))


def _paranoid() -> str:
    try:
        return Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip()
    except OSError:
        return "unknown"


@dataclass
class Counter:
    """Counting events on every thread of ``pid`` for every syscall tracepoint, open from
    ``start`` to ``close``; ``read()`` gives the totals so far, ``since()`` a window's."""

    pid: int
    fds: dict[str, list[int]] = field(default_factory=dict)
    problem: str | None = None

    def read(self) -> dict[str, int] | None:
        """{syscall: calls so far} (every thread's), None once a read failed."""
        if self.problem:
            return None
        totals: dict[str, int] = {}
        try:
            for name, fds in self.fds.items():
                count = sum(struct.unpack("Q", os.read(fd, 8))[0] for fd in fds)
                if count:
                    totals[name] = count
        except OSError as exc:
            self.problem = f"reading the syscall counters failed ({exc.strerror})"
            return None
        return totals

    def close(self) -> None:
        for fds in self.fds.values():
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.fds = {}


def since(before: dict[str, int] | None, after: dict[str, int] | None) -> dict[str, int] | None:
    """The calls made between two readings, by name (zero counts left out)."""
    if before is None or after is None:
        return None
    delta = {name: after[name] - before.get(name, 0) for name in after}
    return {name: n for name, n in sorted(delta.items()) if n > 0}


def _room_for(fds: int) -> None:
    """Raise the soft limit on open files towards the hard one when ``fds`` more may not
    fit (an event per syscall and thread: ~1,800 for one server of five threads)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = len(os.listdir("/proc/self/fd")) + fds + 64
    if soft != resource.RLIM_INFINITY and soft < need:
        top = need if hard == resource.RLIM_INFINITY else min(need, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, top), hard))


def start(pid: int | None) -> Counter | None:
    """A counter on every thread of ``pid``, or None where per-syscall counts cannot be
    taken (``unavailable()`` says why) or the process is gone."""
    if pid is None or unavailable() is not None:
        return None
    points = _state["points"]
    assert isinstance(points, dict)
    try:
        tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return None
    counter = Counter(pid)
    _room_for(len(points) * len(tids))
    try:
        for name, tracepoint in points.items():
            fds = counter.fds.setdefault(name, [])
            for tid in tids:
                fds.append(_open(tracepoint, tid))
    except OSError as exc:
        counter.close()
        counter.problem = f"cannot count syscalls of process {pid} ({exc.strerror})"
    return counter


def counters(stack: contextlib.ExitStack, pids: dict[str, int | None]) -> dict[str, Counter]:
    """A counter per label's process (none where they cannot be counted), each closed when
    ``stack`` closes."""
    out = {}
    for label, pid in pids.items():
        counter = start(pid)
        if counter is not None:
            stack.callback(counter.close)
            out[label] = counter
    return out


def reading(kernel: dict[str, Counter], label: str) -> dict[str, int] | None:
    """``label``'s calls so far (None: not counted by name)."""
    counter = kernel.get(label)
    return counter.read() if counter is not None else None
