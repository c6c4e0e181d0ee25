"""git as a child process: the environment it runs in (no prompt, C locale, only what
git needs of ours), a command whose failure is one line, and a command talking to a remote
in a process group that dies with regtrack."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from regtrack.core import child_env, procs
from regtrack.core.errors import CannotMeasure
from regtrack.targets import git_remote

NETWORK_TIMEOUT_S = 900


def git_env(extra: Mapping[str, str] | None = None, *, isolated: bool = False) -> dict[str, str]:
    """The environment git runs in: what git needs of ours (core/child_env.py), never
    prompts, C locale; then ``extra`` on top.

    ``isolated`` also drops the inherited ``GIT_*`` variables and ignores the system and
    global git config, so that only ``extra`` and the repository's own config count
    (deterministic commits, whoever runs them).
    """
    env = child_env.git(isolated=isolated)
    if isolated:
        env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    env.update(
        GIT_TERMINAL_PROMPT="0",  # never wait for a password in a benchmark run
        GIT_HTTP_LOW_SPEED_LIMIT="1000",
        GIT_HTTP_LOW_SPEED_TIME="60",
        LC_ALL="C",
    )
    env.update(extra or {})
    return env


def git(
    args: list[str],
    cwd: Path | None = None,
    timeout: float | None = 120,
    check: bool = True,
    *,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    what: str | None = None,
) -> subprocess.CompletedProcess:
    """Run ``git *args``; CannotMeasure if git is missing, too slow or (``check``) fails.

    ``env`` replaces the whole environment (default ``git_env()``), ``input`` is written to
    stdin, and ``what`` says what failed: "WHAT: git's last line (exit N)" instead of
    "git ARGS[0] failed: git's last line".
    """
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=git_env() if env is None else env,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        raise CannotMeasure("git is not installed: apt-get install git") from None
    except subprocess.TimeoutExpired:
        raise CannotMeasure(f"git {args[0]} took longer than {timeout:.0f} s") from None
    if check and proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        if what:
            raise CannotMeasure(f"{what}: {last} (exit {proc.returncode})")
        raise CannotMeasure(f"git {args[0]} failed: {last}")
    return proc


def remote_git(remote: git_remote.Remote, args: list[str]) -> tuple[int, str]:
    """``git *args`` talking to ``remote``: (exit code, stderr).

    Its credentials are only in its environment. It runs in a process group of its own
    that dies with regtrack (procs.spawn), and the whole group (git-remote-http, index-pack)
    is killed if regtrack is interrupted or it outlives NETWORK_TIMEOUT_S, so nothing is
    left writing into a clone's directory as it is removed.
    """
    if shutil.which("git") is None:
        raise CannotMeasure("git is not installed: apt-get install git")
    proc = procs.spawn(
        ["git", *remote.argv(*args)], stdout=subprocess.DEVNULL, env=git_env(remote.env)
    )
    try:
        _, stderr = proc.communicate(timeout=NETWORK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        procs.kill(proc)
        raise CannotMeasure(f"git {args[0]} took longer than {NETWORK_TIMEOUT_S} s") from None
    except BaseException:
        procs.kill(proc)
        raise
    return proc.returncode, stderr.decode(errors="replace")
