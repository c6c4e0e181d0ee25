""".ci/run's skip policy (tests/skip_policy.py), on a tiny test file that skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TINY = """
import pytest

def test_runs():
    pass

def test_needs_memtier():
    pytest.skip("memtier_benchmark is not installed: build it and put it on PATH")

def test_needs_chromium():
    pytest.skip("chromium is not installed (apt-get install chromium)")
"""


def _pytest(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_tiny.py").write_text(body)
    allowed = tmp_path / "allowed-skips"
    allowed.write_text("# a comment line\nmemtier_benchmark is not installed\n")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
         "tests.skip_policy", "--allowed-skips", str(allowed),
         "--rootdir", str(tmp_path), str(tmp_path / "test_tiny.py")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"},  # not the outer run's
    )  # fmt: skip


def test_an_unlisted_skip_fails_the_session_and_is_named(tmp_path):
    proc = _pytest(tmp_path, TINY)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 passed, 2 skipped" in proc.stdout
    assert "1 skipped: chromium is not installed (apt-get install chromium)" in proc.stdout
    assert "FAILED: 1 skipped for a reason --allowed-skips does not list:" in proc.stdout
    assert "test_tiny.py::test_needs_chromium: chromium is not installed" in proc.stdout


def test_ci_allows_no_skip_at_all():
    """Every real part is installed on the CI machine (memtier_benchmark too): .ci/run's
    list of allowed skip reasons holds comments only."""
    lines = (ROOT / ".ci" / "allowed-skips").read_text().splitlines()
    assert [line for line in lines if line.strip() and not line.startswith("#")] == []


def test_a_listed_skip_passes_and_is_still_summarised(tmp_path):
    proc = _pytest(tmp_path, TINY.split("def test_needs_chromium")[0])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "skip summary" in proc.stdout
    assert "1 skipped: memtier_benchmark is not installed" in proc.stdout
    assert "FAILED" not in proc.stdout
