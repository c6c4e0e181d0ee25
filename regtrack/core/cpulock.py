"""One benchmark per CPU at a time, across every regtrack process on the machine.

Two runs measuring on the same CPUs would each measure the other. Each run takes an
exclusive ``flock`` on one file per CPU it pins to (server and load generator), in CPU
order so that two runs never wait on each other in a cycle. The kernel drops a lock when
its process dies, even by ``kill -9``, so a crashed run never blocks the next one. The
file holds the owner's pid and command line, for the message the waiting run prints.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from regtrack.core.errors import CannotMeasure

POLL_S = 0.5


def lock_dir() -> Path:
    """$REGTRACK_LOCK_DIR, else a directory every user's regtrack on this machine shares."""
    return Path(os.environ.get("REGTRACK_LOCK_DIR") or "/tmp/regtrack-cpu-locks")


def _owner(path: Path) -> str:
    try:
        return path.read_text().strip() or "another regtrack"
    except OSError:
        return "another regtrack"


def _open(cpu: int) -> int:
    folder = lock_dir()
    try:
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError):  # shared by every user's regtrack, like /tmp
                folder.chmod(0o1777)
        return os.open(folder / f"cpu-{cpu}.lock", os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        raise CannotMeasure(
            f"cannot use the CPU lock directory {folder}: {exc.strerror}; "
            "set REGTRACK_LOCK_DIR to a writable directory"
        ) from None


def _acquire(fd: int, cpu: int, wait: bool, on_wait: Callable[[str], None]) -> None:
    said = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            owner = _owner(lock_dir() / f"cpu-{cpu}.lock")
            if not wait:
                raise CannotMeasure(
                    f"CPU {cpu} is being benchmarked by {owner}; wait for it to end, "
                    "or leave out --no-wait to queue behind it"
                ) from None
            if not said:
                on_wait(f"CPU {cpu} is being benchmarked by {owner}; waiting for it")
                said = True
            time.sleep(POLL_S)


@contextlib.contextmanager
def hold(
    cpus: tuple[int, ...] | list[int],
    wait: bool = True,
    on_wait: Callable[[str], None] = lambda text: None,
) -> Iterator[None]:
    """Hold every CPU of ``cpus`` for the block; wait for them (saying who holds them),
    or fail at once with ``wait=False``."""
    held: list[int] = []
    try:
        for cpu in sorted(set(cpus)):
            fd = _open(cpu)
            try:
                _acquire(fd, cpu, wait, on_wait)
            except BaseException:
                os.close(fd)  # not ours: leave the owner's note in the file
                raise
            held.append(fd)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}: {' '.join(sys.argv)[:300]}\n".encode(), 0)
        yield
    finally:
        for fd in held:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing the descriptor releases its flock
