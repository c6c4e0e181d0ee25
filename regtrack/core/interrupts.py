"""Ctrl-C, SIGTERM and SIGHUP stop a run promptly, even when the first signal is lost.

Python delivers a signal by raising in whatever code runs at that moment; if that is a
finaliser or a logging lock release, the interpreter prints "Exception ignored" and goes
on. The handler therefore also remembers the signal, and the run loop calls ``check``
between steps, so a swallowed signal still stops the run at the next trial boundary.
Threads waiting on a child (load generators of a mix run side by side) ask ``pending``,
so they stop theirs at once instead of letting the trial run out.

SIGHUP (a dropped SSH session, a closed terminal) stops a run like SIGTERM: otherwise
its default action kills regtrack with containers running and the run marked running.

A database statement runs in SQLite's C code, where no Python handler runs until it
returns: results/connection.py stops one that was running when a signal arrived
(``received``), then raises ``Interrupted`` with ``check``.
"""

from __future__ import annotations

import signal
import sys
from typing import Any

from regtrack.core.errors import Interrupted

_received: str | None = None
_count = 0


SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def install() -> None:
    """Route SIGINT, SIGTERM and SIGHUP to ``Interrupted`` (main thread only), and keep
    the interpreter from printing a traceback for the one it swallows (e.g. in the
    at-fork hook of logging, which runs each time a subprocess starts)."""
    for sig in SIGNALS:
        signal.signal(sig, _on_signal)
    sys.unraisablehook = _unraisable


def _unraisable(args: Any) -> None:
    if isinstance(args.exc_value, KeyboardInterrupt) and _received is not None:
        return  # recorded by _on_signal; check() raises it again where it can be handled
    sys.__unraisablehook__(args)


def _on_signal(signum: int, _frame: object) -> None:
    global _received, _count
    _received = signal.Signals(signum).name
    _count += 1
    raise Interrupted(_received)


def pending() -> bool:
    """Whether a signal arrived (for threads, which the signal's exception never reaches)."""
    return _received is not None


def received() -> int:
    """How many signals arrived so far: work started before the latest one is to stop,
    work started after it (cleanup: recording that a run was interrupted) is not."""
    return _count


def check() -> None:
    """Raise ``Interrupted`` if a signal arrived, even one whose exception was swallowed."""
    if _received is not None:
        raise Interrupted(_received)
