"""A signal whose exception is swallowed (as in a finaliser) still stops the run."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from regtrack.core import interrupts
from regtrack.core.errors import Interrupted


@pytest.fixture
def handlers(monkeypatch):
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    monkeypatch.setattr(interrupts, "_received", None)
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_a_swallowed_signal_is_raised_again_at_the_next_check(handlers):
    interrupts.install()
    interrupts.check()  # nothing received yet: no exception
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        signal.sigtimedwait([], 0)  # let the handler run here
    except Interrupted:
        pass  # what a finaliser or logging lock release does with it
    with pytest.raises(Interrupted, match="SIGTERM"):
        interrupts.check()


def test_a_swallowed_signal_prints_no_traceback(handlers, capsys):
    """What CI saw: SIGINT during logging's at-fork hook printed 'Exception ignored ...
    Traceback' although the run then stopped cleanly."""
    interrupts.install()

    class Finaliser:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGINT)
            signal.sigtimedwait([], 0)

    Finaliser()  # the handler's exception is raised inside __del__: "unraisable"
    assert "Traceback" not in capsys.readouterr().err
    with pytest.raises(Interrupted, match="SIGINT"):
        interrupts.check()


def test_interrupted_is_not_an_exception_that_broad_handlers_catch():
    assert not issubclass(Interrupted, Exception)
    assert issubclass(Interrupted, KeyboardInterrupt)
