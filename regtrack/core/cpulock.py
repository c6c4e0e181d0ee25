"""One benchmark per CPU at a time, across every regtrack process on the machine.

Two runs measuring on the same CPUs would each measure the other, and so would a build
(`make -j`, `docker build`) running beside a measurement. Each run, and each build, takes
an exclusive ``flock`` on one file per CPU it uses, SMT siblings included (a sibling shares
the core), in CPU order so that two never wait on each other in a cycle. The kernel drops
a lock when its process dies, even by ``kill -9``, so a crashed run never blocks the next.

The lock directory is shared by every user's regtrack (that is its point), so it is
treated as hostile ground: it must be a real directory owned by root or by this user and
not writable by others unless sticky (like /tmp); lock files are opened without following
symlinks and must be regular files with one link; this process writes only into lock
files it owns, and only its pid (never its command line, which may hold a token).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from regtrack.core.cpus import Topology
from regtrack.core.errors import CannotMeasure

POLL_S = 0.5
DEFAULT_DIR = "/tmp/regtrack-cpu-locks"
# CPUs this process holds already (a bisection builds between its runs, a run's build
# under its own lock): a second flock of our own would wait for ourselves.
_HELD: dict[int, int] = {}


def lock_dir() -> Path:
    """$REGTRACK_LOCK_DIR, else a directory every user's regtrack on this machine shares."""
    return Path(os.environ.get("REGTRACK_LOCK_DIR") or DEFAULT_DIR)


def _refuse(folder: Path, why: str) -> CannotMeasure:
    return CannotMeasure(
        f"the CPU lock directory {folder} {why}: someone may have planted it; remove it, "
        "or set REGTRACK_LOCK_DIR to a directory of your own"
    )


def _check_dir(folder: Path) -> None:
    """Create the shared directory (sticky, like /tmp), or check the one that is there."""
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(folder, 0o700)
            os.chmod(folder, 0o1777)  # shared by every user's regtrack, like /tmp
        except FileExistsError:
            pass  # another regtrack made it meanwhile: checked below
        except OSError as exc:
            raise CannotMeasure(
                f"cannot create the CPU lock directory {folder}: {exc.strerror}; "
                "set REGTRACK_LOCK_DIR to a writable directory"
            ) from None
        info = os.lstat(folder)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise _refuse(folder, "is not a directory (a symbolic link or a file)")
    if info.st_uid not in (0, os.geteuid()):
        raise _refuse(folder, f"belongs to user id {info.st_uid}, neither root nor you")
    if info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
        raise _refuse(folder, "is writable by everyone without the sticky bit")


def _open(cpu: int) -> int:
    folder = lock_dir()
    _check_dir(folder)
    path = folder / f"cpu-{cpu}.lock"
    flags = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY
    try:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | flags, 0o644)
        except PermissionError:
            # Another user's lock file (in a sticky directory the kernel may refuse even
            # root an O_CREAT of it, fs.protected_regular): a read-only descriptor locks too.
            fd = os.open(path, os.O_RDONLY | flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse(folder, f"holds {path.name} as a symbolic link") from None
        raise CannotMeasure(
            f"cannot use the CPU lock file {path}: {exc.strerror}; "
            "set REGTRACK_LOCK_DIR to a writable directory"
        ) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        raise _refuse(folder, f"holds {path.name} as something other than a plain lock file")
    return fd


def _owner(fd: int) -> str:
    try:
        text = os.pread(fd, 64, 0).decode(errors="replace").strip()
    except OSError:
        text = ""
    return text if text.startswith("pid ") and text[4:].isdigit() else "another regtrack"


def _acquire(fd: int, cpu: int, wait: bool, on_wait: Callable[[str], None]) -> None:
    said = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            owner = _owner(fd)
            if not wait:
                raise CannotMeasure(
                    f"CPU {cpu} is being benchmarked by {owner}; wait for it to end, "
                    "or leave out --no-wait to queue behind it"
                ) from None
            if not said:
                on_wait(f"CPU {cpu} is being benchmarked by {owner}; waiting for it")
                said = True
            time.sleep(POLL_S)


def _mine(fd: int) -> bool:
    return os.fstat(fd).st_uid == os.geteuid()


def with_siblings(cpus: tuple[int, ...] | list[int]) -> list[int]:
    """``cpus`` and their SMT siblings (a sibling's work slows the core's other thread)."""
    topology = Topology.detect()
    found = set(cpus)
    for cpu in cpus:
        found |= topology.smt_siblings(cpu)
    return sorted(found)


@contextlib.contextmanager
def hold(
    cpus: tuple[int, ...] | list[int],
    wait: bool = True,
    on_wait: Callable[[str], None] = lambda text: None,
) -> Iterator[None]:
    """Hold every CPU of ``cpus`` and their SMT siblings for the block; wait for them
    (saying who holds them), or fail at once with ``wait=False``. CPUs this process holds
    already are not taken twice."""
    held: list[tuple[int, int]] = []
    try:
        for cpu in with_siblings(cpus):
            if cpu in _HELD:
                continue
            fd = _open(cpu)
            try:
                _acquire(fd, cpu, wait, on_wait)
            except BaseException:
                os.close(fd)  # not ours: leave the owner's note in the file
                raise
            held.append((cpu, fd))
            _HELD[cpu] = fd
            if _mine(fd):
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"pid {os.getpid()}\n".encode(), 0)
        yield
    finally:
        for cpu, fd in held:
            _HELD.pop(cpu, None)
            if _mine(fd):
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
            os.close(fd)  # closing the descriptor releases its flock


def hold_all(
    wait: bool = True, on_wait: Callable[[str], None] = lambda text: None
) -> contextlib.AbstractContextManager[None]:
    """Every CPU this process may use: a build (make -j, docker build) would disturb a
    measurement on any of them."""
    return hold(sorted(os.sched_getaffinity(0)), wait=wait, on_wait=on_wait)
