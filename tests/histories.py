"""Commit histories made on purpose on top of real Redis sources, for bisect and ranges.

Each commit is one edit of src/t_string.c: a harmless comment at the end of the file,
a busy loop added to getGenericCommand, or a line that does not
compile (fixed by the next commit). Dates and authors are fixed, so the commits, and
with them the build cache entries, are the same on every machine.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

FILE = Path("src") / "t_string.c"
ENTRY = re.compile(r"^int getGenericCommand\(client \*c\) \{\n(    for \(volatile .*\n)?", re.M)
BROKEN = "this line does not compile (regtrack test)\n"

# 8 commits: a commit that does not build (index 3, where the search looks first; fixed by
# 4) and one +5% step (index 5), so a bisection skips one commit and measures four.
ONE_STEP = ["harmless"] * 3 + ["broken", "fix", "spin 30", "harmless", "harmless"]


def _git(repo: Path, *args: str, date: str = "2026-01-01T00:00:00Z") -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "regtrack",
        "GIT_AUTHOR_EMAIL": "regtrack@example.invalid",
        "GIT_COMMITTER_NAME": "regtrack",
        "GIT_COMMITTER_EMAIL": "regtrack@example.invalid",
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_DATE": date,
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


def _edit(text: str, kind: str, n: int) -> str:
    if kind == "harmless":
        return text + f"/* regtrack history: harmless edit {n} */\n"
    if kind == "broken":
        return text + BROKEN
    if kind == "fix":
        return text.replace(BROKEN, "")
    if kind.startswith("spin "):
        spins = int(kind.split()[1])
        loop = (
            f"    for (volatile unsigned regtrack_spin = 0; regtrack_spin < {spins}; "
            "regtrack_spin++);\n"
        )
        return ENTRY.sub(lambda m: "int getGenericCommand(client *c) {\n" + loop, text, count=1)
    raise ValueError(kind)


def make_history(source: Path, dest: Path, base: str, branch: str, kinds: list[str]) -> list[str]:
    """Branch ``branch`` of a clone of ``source`` at ``dest``: ``base`` plus one commit per
    kind; returns the new commits, oldest first (the same SHAs every time). The branch's
    name carries a digest of the kinds, so a cached clone never serves another history."""
    branch = f"{branch}-{hashlib.sha256(' '.join(kinds).encode()).hexdigest()[:8]}"
    if not (dest / ".git").exists():
        subprocess.run(["git", "clone", "--quiet", str(source), str(dest)], check=True)
    if branch not in _git(dest, "branch", "--list", branch):
        _git(dest, "checkout", "--quiet", "-B", branch, base)
        for n, kind in enumerate(kinds):
            path = dest / FILE
            path.write_text(_edit(path.read_text(), kind, n))
            _git(dest, "commit", "--quiet", "-am", f"{kind} (history step {n})",
                 date=f"2026-01-01T00:{n:02d}:00Z")  # fmt: skip
        _git(dest, "checkout", "--quiet", "--detach")
    out = _git(dest, "rev-list", "--first-parent", "--reverse", f"{base}..{branch}")
    return out.split()
