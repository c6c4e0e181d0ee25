"""Shared helpers: run the real CLI, find real binaries, prove nothing is left running."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from regtrack.sources import cache_root

FIXTURES = Path(__file__).parent / "fixtures"
ARTIFACTS = Path(__file__).parent / "artifacts"
SHORT_RUN = ["--duration", "1", "--warmup", "0.3", "--keys", "2000"]


def our_processes() -> list[str]:
    """Command lines of servers and load generators regtrack may have started."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if (
            "regtrack-server-" in cmdline
            or "regtrack-callgrind-" in cmdline
            or cmdline.startswith(
                (
                    "redis-benchmark",
                    "/usr/bin/redis-benchmark",
                    "memtier_benchmark",
                    "/usr/local/bin/memtier_benchmark",
                )
            )
        ):
            found.append(f"{entry.name}: {cmdline.strip()}")
    return found


@pytest.fixture(autouse=True)
def nothing_left_running():
    """Every test must leave no server or load generator behind."""
    before = set(our_processes())
    yield
    left = [p for p in our_processes() if p not in before]
    assert not left, f"processes left behind: {left}"


@pytest.fixture
def redis_server() -> str:
    path = shutil.which("redis-server")
    if not path:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    return path


@pytest.fixture
def redis_benchmark_bin() -> str:
    path = shutil.which("redis-benchmark")
    if not path:
        pytest.skip("redis-benchmark is not installed (apt-get install redis-tools)")
    return path


def run_cli(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess:
    """The real command line, in a subprocess, as a user would run it."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "regtrack", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def wait_for_trials(db: Path, count: int, timeout: float = 120) -> int:
    """Poll a run's database until it holds ``count`` trials (or the timeout passes)."""
    deadline = time.monotonic() + timeout
    measured = 0
    while time.monotonic() < deadline and measured < count:
        time.sleep(0.2)
        if not db.exists():
            continue
        try:
            conn = sqlite3.connect(db)
            measured = conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
            conn.close()
        except sqlite3.OperationalError:
            pass  # the schema is being created
    return measured


# --- real Redis sources -------------------------------------------------------------------
# The offline source repositories and the builds are cached between sessions in regtrack's
# own cache (~/.cache/regtrack, or $REGTRACK_TEST_CACHE), shared with scripts/quickstart.sh:
# a fresh machine builds everything once (several minutes), later sessions reuse it.

ROOT = Path(__file__).resolve().parent.parent
TEST_CACHE = Path(os.environ.get("REGTRACK_TEST_CACHE") or cache_root())


def _offline_repo(product: str) -> Path:
    dest = TEST_CACHE / f"offline-{product}"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "offline_source_repo.py"),
            product,
            str(dest),
            "--work",
            str(TEST_CACHE / "offline-sources"),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert proc.returncode == 0, f"offline source repository for {product}: {proc.stderr[-2000:]}"
    return dest


@pytest.fixture(scope="session")
def offline_redis() -> Path:
    return _offline_repo("redis")


@pytest.fixture(scope="session")
def offline_valkey() -> Path:
    return _offline_repo("valkey")


@pytest.fixture
def env() -> dict[str, str]:
    """Environment for CLI runs that should reuse the shared build cache."""
    return {"REGTRACK_CACHE": str(TEST_CACHE)}


@pytest.fixture(scope="session")
def slow_repo(offline_redis) -> tuple[Path, str]:
    """A clone of the offline repository with a known GET slowdown on top of 7.0.15."""
    from tests.slowdown import make_slow_branch

    dest = TEST_CACHE / "slow-redis"
    return dest, make_slow_branch(offline_redis, dest, "7.0.15", 25)
