"""Small real git repositories shaped like Redis's, whose `make` is quick.

The "build" writes src/redis-server as a wrapper that execs the installed redis-server,
so resolution, caching and build failures are exercised in seconds; the slow test with
real Redis sources lives in test_offline_versions.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
}

GOOD_MAKEFILE = """\
all:
\t@echo "CC fake.o"
\t@printf '#!/bin/bash\\nexec -a redis-server {server} "$$@"\\n' > src/redis-server
\t@chmod +x src/redis-server
\t@printf '#!/bin/sh\\nexit 0\\n' > src/redis-benchmark
\t@chmod +x src/redis-benchmark
\t@echo built $(MALLOC) >> build-count.txt
"""

BAD_MAKEFILE = """\
all:
\t@echo "CC server.o"
\t@echo "server.c:42: error: expected ';' before '}' token"
\t@exit 2
"""


def git(repo: Path, *args: str) -> str:
    env = dict(os.environ, **GIT_ENV)
    out = subprocess.run(
        ["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def commit_version(repo: Path, version: str, makefile: str, server: str) -> str:
    (repo / "src").mkdir(exist_ok=True)
    (repo / "src" / "version.h").write_text(f'#define REDIS_VERSION "{version}"\n')
    (repo / "Makefile").write_text(makefile.replace("{server}", server))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"Redis {version}")
    return git(repo, "rev-parse", "HEAD")


def make_repo(path: Path, broken: set[str] = frozenset()) -> dict[str, str]:
    """Tags 1.0.0, 1.0.1, 1.1.0 and branch unstable (1.2.0); returns version -> commit."""
    server = shutil.which("redis-server") or "/usr/bin/redis-server"
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "unstable")
    commits = {}
    for version in ("1.0.0", "1.0.1", "1.1.0", "1.2.0"):
        makefile = BAD_MAKEFILE if version in broken else GOOD_MAKEFILE
        commits[version] = commit_version(path, version, makefile, server)
        if version != "1.2.0":
            git(path, "tag", version)
    return commits


def make_history(path: Path, kinds: list[str]) -> list[str]:
    """A fake Redis 7.0.15 repository (instant builds) with one commit per kind, oldest
    first, on branch unstable: "ok", or "broken" (make fails); returns the commits."""
    server = shutil.which("redis-server") or "/usr/bin/redis-server"
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "unstable")
    (path / "src").mkdir()
    for n, kind in enumerate(kinds):
        (path / "src" / "version.h").write_text('#define REDIS_VERSION "7.0.15"\n')
        (path / "step.txt").write_text(f"{n}\n")
        makefile = BAD_MAKEFILE if kind == "broken" else GOOD_MAKEFILE
        (path / "Makefile").write_text(makefile.replace("{server}", server))
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", f"{kind} (history step {n})")
    return git(path, "rev-list", "--reverse", "unstable").split()
