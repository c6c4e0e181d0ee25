"""regtrack installed as users install it, away from this checkout: a wheel of the checkout,
installed by pipx into a home of its own, makes the offline source set (its pinned releases
are package data) and measures a version built from it.

First tier: nothing else builds or installs the wheel, so nothing else would see a file
missing from it or a command that works only from a clone. Its dependencies are the
lock's versions (a constraints file made from uv.lock), from PyPI or pip's cache; the
archives come from $REGTRACK_SOURCE_ARCHIVES where CI has them (.ci/run), and the build of
7.0.15 from the suite's build cache.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.conftest import BUILD_FLAGS, ROOT, TEST_CACHE

pytestmark = pytest.mark.slow

PIPX = "pipx==1.18.4"
PIP_QUIET = ["-q", "--disable-pip-version-check", "--no-input"]


def _run(argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> str:
    """stdout of argv; the test fails with the end of its stderr when it fails."""
    proc = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, f"{argv[:4]} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return proc.stdout


def _constraints(folder: Path) -> Path:
    """Every package of uv.lock at its locked version, as pip constraints; one locked per
    Python version (numpy, scipy) is constrained under the markers the lock gives it."""
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    pins = []
    for package in lock["package"]:
        if "registry" not in package.get("source", {}):
            continue  # regtrack itself
        pin = f"{package['name']}=={package['version']}"
        if markers := package.get("resolution-markers"):
            pin += " ; " + " or ".join(f"({m})" for m in markers)
        pins.append(pin)
    path = folder / "constraints.txt"
    path.write_text("\n".join(pins) + "\n")
    return path


def _outside_env(home: Path) -> dict[str, str]:
    """The environment of a user's shell: nothing pointing at this checkout or its venv;
    the suite's build cache (REGTRACK_CACHE) so that 7.0.15 is built once per machine."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "GITHUB_ACTIONS")
    }
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(ROOT))
    )
    env.update(
        PIPX_HOME=str(home / "pipx"),
        PIPX_BIN_DIR=str(home / "bin"),
        PIPX_MAN_DIR=str(home / "man"),
        PIPX_DEFAULT_BACKEND="pip",  # not uv, even where one is on PATH: the default install
        REGTRACK_CACHE=str(TEST_CACHE),
    )
    return env


@pytest.mark.timeout(900)  # cold: pipx, hatchling and the dependencies from PyPI
def test_a_pipx_installed_wheel_makes_the_offline_sources_and_measures(tmp_path, offline_redis):
    assert not tmp_path.is_relative_to(ROOT)
    env = _outside_env(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    tools = tmp_path / "tools"
    _run(["python3", "-m", "venv", str(tools)], cwd=elsewhere, env=env, timeout=120)
    pip = [str(tools / "bin" / "python"), "-m", "pip"]
    _run([*pip, "install", *PIP_QUIET, PIPX], cwd=elsewhere, env=env, timeout=300)
    _run(
        [*pip, "wheel", *PIP_QUIET, "--no-deps", "-w", str(tmp_path / "dist"), str(ROOT)],
        cwd=elsewhere,
        env=env,
        timeout=300,
    )
    (wheel,) = (tmp_path / "dist").glob("regtrack-*.whl")
    pip_args = f"{' '.join(PIP_QUIET)} --constraint {_constraints(tmp_path)}"
    pipx = str(tools / "bin" / "pipx")
    _run(
        [pipx, "install", f"--pip-args={pip_args}", str(wheel)], cwd=elsewhere, env=env, timeout=600
    )

    regtrack = str(tmp_path / "bin" / "regtrack")
    assert _run([regtrack, "--version"], cwd=elsewhere, env=env, timeout=60).startswith(
        "regtrack, version "
    )
    python = tmp_path / "pipx" / "venvs" / "regtrack" / "bin" / "python"
    where = _run([str(python), "-c", "import regtrack; print(regtrack.__file__)"],
                 cwd=elsewhere, env=env, timeout=60)  # fmt: skip
    assert Path(where.strip()).is_relative_to(tmp_path / "pipx"), where

    # The pinned releases come with the package; the archives from CI's folder, and the
    # download cache is the suite's (nothing downloaded twice).
    dest = tmp_path / "offline-redis"
    made = _run(
        [regtrack, "sources", "offline", "redis", str(dest),
         "--work", str(TEST_CACHE / "offline-sources")],
        cwd=elsewhere, env=env, timeout=600,
    )  # fmt: skip
    assert made.splitlines()[0] == str(dest)
    expected = subprocess.run(
        ["git", "-C", str(offline_redis), "rev-parse", "7.0.15^{commit}"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert f"-> {expected} -> 7.0.15" in made, "the same SHAs as the checkout's command"

    db = tmp_path / "r.db"
    _run(
        [regtrack, "run", "--versions", "7.0", "--source-repo", str(dest), *BUILD_FLAGS,
         "--duration", "0.5", "--warmup", "0.1", "--repetitions", "1", "--pipelines", "10",
         "--keys", "1000", "--loadgen", "redis-benchmark", "--no-report", "--db", str(db)],
        cwd=elsewhere, env=env, timeout=600,
    )  # fmt: skip
    with sqlite3.connect(db) as conn:
        trials = conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
    assert trials >= 1
