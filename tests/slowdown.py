"""A known regression, made on purpose: Redis with extra work in every GET.

Clones a source repository and commits, on top of a given ref, a busy loop of ``spins``
iterations at the start of getGenericCommand (about 6 instructions per iteration). It is
how the tests and benchmarks/verdicts.py check that regtrack finds a regression of a
known size, and stays quiet about an A/A comparison.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "regtrack",
    "GIT_AUTHOR_EMAIL": "regtrack@example.invalid",
    "GIT_COMMITTER_NAME": "regtrack",
    "GIT_COMMITTER_EMAIL": "regtrack@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def make_slow_branch(source: Path, dest: Path, base: str, spins: int) -> str:
    """A clone of ``source`` with branch ``slow-<spins>`` = ``base`` + the busy loop.

    Deterministic (fixed dates and authors), so the build cache reuses it across runs.
    Returns the branch name.
    """
    branch = f"slow-{spins}"
    if not (dest / ".git").exists():
        subprocess.run(["git", "clone", "--quiet", str(source), str(dest)], check=True)
    if branch in _git(dest, "branch", "--list", branch):
        return branch
    _git(dest, "checkout", "--quiet", "-b", branch, base)
    path = dest / "src" / "t_string.c"
    text = path.read_text()
    loop = (
        "int getGenericCommand(client *c) {\n"
        f"    for (volatile unsigned regtrack_spin = 0; regtrack_spin < {spins}; "
        "regtrack_spin++);\n"
    )
    patched, count = re.subn(r"^int getGenericCommand\(client \*c\) \{\n", loop, text, flags=re.M)
    if count != 1:
        raise RuntimeError(f"getGenericCommand not found once in {path}")
    path.write_text(patched)
    _git(dest, "commit", "--quiet", "-am", f"GET: {spins} wasted loop iterations (regtrack test)")
    _git(dest, "checkout", "--quiet", "--detach")
    return branch
