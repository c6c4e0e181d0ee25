"""Ctrl-C and SIGTERM stop a run promptly, even when the first signal is lost.

Python delivers a signal by raising in whatever code runs at that moment; if that is a
finaliser or a logging lock release, the interpreter prints "Exception ignored" and goes
on. The handler therefore also remembers the signal, and the run loop calls ``check``
between steps, so a swallowed signal still stops the run at the next trial boundary.
"""

from __future__ import annotations

import signal

from regtrack.errors import Interrupted

_received: str | None = None


def install() -> None:
    """Route SIGINT and SIGTERM to ``Interrupted`` (main thread only)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _on_signal)


def _on_signal(signum: int, _frame: object) -> None:
    global _received
    _received = signal.Signals(signum).name
    raise Interrupted(_received)


def check() -> None:
    """Raise ``Interrupted`` if a signal arrived, even one whose exception was swallowed."""
    if _received is not None:
        raise Interrupted(_received)
