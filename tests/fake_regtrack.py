"""`regtrack` with the measuring edge modelled (tests/fakebench.py), for tests that run a
whole CI job's steps in seconds: the action's steps call this through a `regtrack` shim
first on PATH (tests/test_action.py).

$REGTRACK_FAKE_MODEL is JSON of fakebench.Model's fields, e.g. ``{"throughput": {"a":
400000, "b": 360000}}`` (the candidate 10% slower); without it every version measures
alike. Everything else (options, specs, the store, the gate, every output and `regtrack
github comment`) is the real command line, handed the model as its measuring seam; no
server is started. Exit 70: the command reached a server start the model does not stand in
for (fakebench.NotModelled).
"""

from __future__ import annotations

import json
import os
import sys

from regtrack.cli import main

MODEL_VARIABLE = "REGTRACK_FAKE_MODEL"
MEASURING = ("ci", "run", "bisect")
EXIT_NOT_MODELLED = 70  # fakebench's guard: no exit code regtrack gives


def run() -> None:
    """Regtrack's own main(), handed the model for a command that measures (the others
    start as fast as the real command: they import no measuring code)."""
    if not any(word in MEASURING for word in sys.argv[1:]):
        main()
        return
    from tests import fakebench

    fields = json.loads(os.environ.get(MODEL_VARIABLE) or "{}")
    try:
        main(sys.argv[1:], fakebench.Model(**fields))
    except fakebench.NotModelled as exc:  # a traceback's exit 1 reads as a regression
        print(f"fake_regtrack: {exc}", file=sys.stderr)
        sys.exit(EXIT_NOT_MODELLED)


if __name__ == "__main__":
    run()
