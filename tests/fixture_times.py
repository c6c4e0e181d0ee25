"""pytest plugin (always loaded, pyproject.toml): with ``--fixture-times FILE``, the seconds
each fixture's set-up took are written to FILE as JSON at the end of the session.

--durations says which test waited; this says for what (an offline source repository, a
builder image, a browser), which is what benchmarks/ci_breakdown.py attributes time to.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path

import pytest

_seconds: dict[str, float] = defaultdict(float)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fixture-times",
        metavar="FILE",
        default=None,
        help="write each fixture's total set-up seconds to FILE (JSON)",
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest):
    started = time.monotonic()
    yield
    _seconds[fixturedef.argname] += time.monotonic() - started


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = session.config.getoption("--fixture-times")
    if path:
        ranked = dict(sorted(_seconds.items(), key=lambda kv: -kv[1]))
        Path(path).write_text(json.dumps({k: round(v, 2) for k, v in ranked.items()}, indent=1))
