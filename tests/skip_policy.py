"""pytest plugin (always loaded, pyproject.toml): every skip is reported, and with
``--allowed-skips FILE`` (or $REGTRACK_ALLOWED_SKIPS) a skip for a reason the file does
not list fails the session.

A skipped test in CI is a test that did not run; .ci/run sets the variable so that only
the absences we chose (memtier_benchmark, which no registry here has) can pass silently.
FILE holds one allowed reason per line (a substring of the skip message); # comments.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

_skips: list[tuple[str, str]] = []  # (test id, reason)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--allowed-skips",
        metavar="FILE",
        default=os.environ.get("REGTRACK_ALLOWED_SKIPS") or None,
        help="fail the session when a test skips for a reason FILE does not list "
        "(default: $REGTRACK_ALLOWED_SKIPS)",
    )


def _reason(report: pytest.TestReport) -> str:
    if isinstance(report.longrepr, tuple):
        return report.longrepr[2].removeprefix("Skipped: ")
    return str(report.longrepr)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        _skips.append((report.nodeid, _reason(report)))


def _allowed(config: pytest.Config) -> list[str] | None:
    path = config.getoption("--allowed-skips")
    if path is None:
        return None
    lines = Path(path).read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def _unlisted(config: pytest.Config) -> list[tuple[str, str]]:
    allowed = _allowed(config)
    if allowed is None:
        return []
    return [(test, why) for test, why in _skips if not any(a in why for a in allowed)]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _unlisted(session.config) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    write = terminalreporter.write_line
    terminalreporter.section("skip summary")
    if not _skips:
        write("no test skipped")
    for why, count in Counter(why for _, why in _skips).most_common():
        write(f"{count:>4} skipped: {why}")
    unlisted = _unlisted(config)
    if unlisted:
        write(f"FAILED: {len(unlisted)} skipped for a reason --allowed-skips does not list:")
        for test, why in unlisted:
            write(f"  {test}: {why}")
