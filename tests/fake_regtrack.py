"""`regtrack` with the measuring edge modelled (tests/fakebench.py), for tests that run a
whole CI job's steps in seconds: the action's steps call this through a `regtrack` shim
first on PATH (tests/test_action.py).

$REGTRACK_FAKE_MODEL is JSON of fakebench.Model's fields, e.g. ``{"throughput": {"a":
400000, "b": 360000}}`` (the candidate 10% slower); without it every version measures
alike. Everything else (options, specs, preflight, the store, the gate, every output and
`regtrack github comment`) is the real command line.
"""

from __future__ import annotations

import json
import os
import sys

from regtrack.cli import main

MODEL_VARIABLE = "REGTRACK_FAKE_MODEL"
MEASURING = ("ci", "run", "bisect")


def run() -> None:
    """Install the model for a command that measures, then run regtrack's own main()
    (the others start as fast as the real command: they import no measuring code)."""
    if any(word in MEASURING for word in sys.argv[1:]):
        import pytest

        from tests import fakebench

        fields = json.loads(os.environ.get(MODEL_VARIABLE) or "{}")
        fakebench.install(pytest.MonkeyPatch(), fakebench.Model(**fields))
    main()


if __name__ == "__main__":
    run()
