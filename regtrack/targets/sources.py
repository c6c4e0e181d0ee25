"""Source repositories: one cached clone per repository, refs resolved to exact commits.

Every ref, path and SHA reaches git as an argv element after ``--end-of-options`` where git
accepts it, never through a shell, so a spec cannot become a command or an option.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from regtrack.core import child_env, procs, redact
from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.targets import git_remote

UPSTREAM = "https://github.com/redis/redis.git"
SERIES_RE = re.compile(r"^(\d+)\.(\d+)$")
RELEASE_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
SHA_RE = re.compile(r"^[0-9a-fA-F]{7,40}$")
COMMIT_RE = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")  # a full SHA-1 or SHA-256 id
NETWORK_TIMEOUT_S = 900
CLONING_RE = re.compile(r"^.+\.git\.tmp(\d+)$")  # a clone under way: NAME.git.tmpPID


def cache_root() -> Path:
    """$REGTRACK_CACHE, else $XDG_CACHE_HOME/regtrack, else ~/.cache/regtrack."""
    if os.environ.get("REGTRACK_CACHE"):
        return Path(os.environ["REGTRACK_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "regtrack"


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


def remove_abandoned_clones(folder: Path) -> list[Path]:
    """Remove the clone directories (NAME.git.tmpPID) in ``folder`` whose regtrack no
    longer runs (killed mid-clone: nothing ran to remove them); returns them."""
    removed = []
    for entry in os.scandir(folder):
        match = CLONING_RE.match(entry.name)
        if match and entry.is_dir(follow_symlinks=False) and not procs.alive(int(match[1])):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(Path(entry.path))
    return removed


def is_commit(text: object) -> bool:
    """Whether ``text`` is a full commit id: what a stored commit must be before it is
    given to git (a crafted database could hold "--output=FILE")."""
    return isinstance(text, str) and bool(COMMIT_RE.match(text))


def archive_argv(commit: str) -> list[str]:
    """git archive of a checked commit, as a tar on stdout."""
    return ["archive", "--format=tar", "--end-of-options", checked_commit(commit)]


def checked_commit(text: object) -> str:
    """``text`` if it is a full commit id, else BadInput (one line, exit 2)."""
    if not is_commit(text):
        raise BadInput(f"{str(text)[:60]!r} is not a full commit id (40 hex digits)")
    return str(text)


@dataclass(frozen=True)
class Resolved:
    """A spec's exact commit and how it was found (tag / branch / commit)."""

    commit: str
    ref_kind: str
    ref: str
    version_h: str | None
    date: str
    subject: str


class SourceRepo:
    """A cached bare mirror of one source repository (upstream Redis, a fork, a local path).

    ``location`` is what is stored, shown and keys the cache: a URL's credentials are
    redacted there (core/redact.py). The URL as given is used only to clone and fetch, its
    credentials reaching git through its environment (git_remote.py): never a command
    line, never the mirror's files."""

    def __init__(self, location: str | None = None, cache: Path | None = None):
        self._url = self._normalise(location or UPSTREAM)
        self.location = redact.location(self._url)
        slug = re.sub(r"[^A-Za-z0-9]+", "-", self.location).strip("-")[-40:]
        digest = hashlib.sha256(self.location.encode()).hexdigest()[:12]
        self.path = (cache or cache_root()) / "repos" / f"{slug}-{digest}.git"
        self._fetched = False

    @staticmethod
    def _normalise(location: str) -> str:
        if any(ord(ch) < 32 for ch in location):
            raise BadInput(f"--source-repo {redact.location(location)!r} has control characters")
        if location.startswith("-"):
            raise BadInput(f"--source-repo {redact.location(location)!r} must not start with '-'")
        if re.match(r"^[a-z][a-z0-9+.-]*://", location) or re.match(r"^[\w.-]+@[\w.-]+:", location):
            return location
        path = Path(location).expanduser()
        if not path.exists():
            raise BadInput(f"--source-repo {location}: no such directory")
        probe = git(["-C", str(path), "rev-parse", "--git-dir"], check=False)
        if probe.returncode != 0:
            raise BadInput(f"--source-repo {location} is not a git repository")
        return str(path.resolve())

    @property
    def is_local(self) -> bool:
        return not re.match(r"^[a-z][a-z0-9+.-]*://", self.location) and "@" not in self.location

    def ensure_clone(self) -> None:
        """Clone into the cache once; later runs reuse it.

        The clone is made in NAME.git.tmpPID and renamed into place once complete. Its
        directory is removed however the clone ends in this process (an error, Ctrl-C,
        SIGTERM); one left by a regtrack that was killed is removed by the next clone.
        No credential is written into it (git_remote.py).
        """
        if (self.path / "HEAD").is_file():
            return
        remote = git_remote.remote(self._url)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        remove_abandoned_clones(self.path.parent)
        tmp = self.path.with_name(f"{self.path.name}.tmp{os.getpid()}")
        try:
            argv = ["clone", "--mirror", "--quiet", "--", remote.url, str(tmp)]
            code, stderr = remote_git(remote, argv)
            if code != 0:
                raise CannotMeasure(self._unreachable(stderr))
            try:
                tmp.rename(self.path)
            except OSError:
                if not (self.path / "HEAD").is_file():  # else another process was first
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self._fetched = True

    def _unreachable(self, stderr: str) -> str:
        last = redact.scrub((stderr.strip().splitlines() or ["no answer"])[-1])
        hint = (
            "; without internet access, make a repository of real releases with "
            "`regtrack sources offline redis DIR` and pass --source-repo DIR"
            if not self.is_local
            else ""
        )
        return f"cannot get the source repository {self.location}: {last}{hint}"

    def fetch(self) -> None:
        """Bring the cache up to date with the repository (once per process)."""
        if self._fetched:
            return
        self.ensure_clone()
        remote = git_remote.remote(self._url)
        # The mirror's refspec, from the URL as git may show it.
        argv = ["-C", str(self.path), "fetch", "--prune", "--tags", "--quiet", "--",
                remote.url, "+refs/*:refs/*"]  # fmt: skip
        code, stderr = remote_git(remote, argv)
        if code != 0:
            raise CannotMeasure(self._unreachable(stderr))
        self._fetched = True

    # --- resolution ----------------------------------------------------------------------

    def _rev(self, name: str) -> str | None:
        proc = git(
            [
                "-C",
                str(self.path),
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                f"{name}^{{commit}}",
            ],
            check=False,
        )
        return proc.stdout.strip() if proc.returncode == 0 else None

    def tags(self) -> list[str]:
        out = git(["-C", str(self.path), "tag", "--list"]).stdout
        return [t for t in out.split() if t]

    def branches(self) -> list[str]:
        out = git(
            ["-C", str(self.path), "for-each-ref", "--format=%(refname:short)", "refs/heads/"]
        ).stdout
        return [b for b in out.split() if b]

    def _newest_release(self, major: str, minor: str) -> str | None:
        best: tuple[int, str] | None = None
        for tag in self.tags():
            m = RELEASE_RE.match(tag)
            if m and m.group(1) == major and m.group(2) == minor:
                patch = int(m.group(3))
                if best is None or patch > best[0]:
                    best = (patch, tag)
        return best[1] if best else None

    def _try_resolve(self, value: str) -> tuple[str, str, str] | None:
        """(commit, ref kind, ref name) from the local cache, or None if unknown here."""
        series = SERIES_RE.match(value)
        if series:
            tag = self._newest_release(series.group(1), series.group(2))
            if tag:
                return self._rev(f"refs/tags/{tag}") or "", "tag", tag
            return None
        for kind, ref in (("tag", f"refs/tags/{value}"), ("branch", f"refs/heads/{value}")):
            commit = self._rev(ref)
            if commit:
                return commit, kind, value
        if SHA_RE.match(value):
            proc = git(
                [
                    "-C",
                    str(self.path),
                    "rev-parse",
                    "--verify",
                    "--end-of-options",
                    f"{value}^{{commit}}",
                ],
                check=False,
            )
            if proc.returncode == 0:
                return proc.stdout.strip(), "commit", value
            if "ambiguous" in proc.stderr:
                raise BadInput(
                    f"version {value!r} is an ambiguous commit prefix in {self.location}: "
                    "give more hex digits"
                )
        return None

    def resolve(self, value: str) -> Resolved:
        """Resolve a tag, a release series (6.2), a branch or a commit to an exact commit."""
        self.ensure_clone()
        found = self._try_resolve(value)
        if found is None:
            self.fetch()
            found = self._try_resolve(value)
        if found is None:
            series = SERIES_RE.match(value)
            if series:
                known = sorted(
                    {".".join(t.split(".")[:2]) for t in self.tags() if RELEASE_RE.match(t)}
                )
                raise BadInput(
                    f"no {value}.x release tag in {self.location}; release series there: "
                    f"{', '.join(known) or 'none'}"
                )
            raise BadInput(
                f"unknown version {value!r}: no such tag, branch or commit in {self.location}"
            )
        commit, kind, ref = found
        return Resolved(
            commit=commit,
            ref_kind=kind,
            ref=ref,
            version_h=self.version_of(commit),
            date=self._show(commit, "%cI"),
            subject=self._show(commit, "%s"),
        )

    def first_parent(self, base: str, tip: str) -> list[str]:
        """The first-parent commits after ``base`` up to ``tip``, oldest first: git's
        ``base..tip`` along the branch's own line (merged branches count as one step)."""
        span = f"{checked_commit(base)}..{checked_commit(tip)}"
        argv = ["rev-list", "--first-parent", "--reverse", "--end-of-options", span]
        out = git(["-C", str(self.path), *argv]).stdout
        return out.split()

    def describe(self, commit: str) -> dict[str, str]:
        """Date, subject and author of ``commit``, for tables, logs and history axes."""
        out = git(
            ["-C", str(self.path), "show", "-s", "--format=%cI%x00%s%x00%an <%ae>",
             "--end-of-options", checked_commit(commit)]
        ).stdout.strip()  # fmt: skip
        date, subject, author = [*out.split("\x00"), "", "", ""][:3]
        return {"commit_date": date, "subject": subject, "author": author}

    def _show(self, commit: str, fmt: str) -> str:
        argv = ["show", "-s", f"--format={fmt}", "--end-of-options", checked_commit(commit)]
        return git(["-C", str(self.path), *argv]).stdout.strip()

    def version_of(self, commit: str) -> str | None:
        """REDIS_VERSION from src/version.h at that commit (read without a checkout)."""
        path = f"{checked_commit(commit)}:src/version.h"
        proc = git(["-C", str(self.path), "show", "--end-of-options", path], check=False)
        # A fork's own version first: Valkey also defines REDIS_VERSION "7.2.4" for clients.
        for macro in ("VALKEY_VERSION", "REDIS_VERSION"):
            m = re.search(rf'#define\s+{macro}\s+"([^"]+)"', proc.stdout)
            if m:
                return m.group(1)
        return None

    def archive(self, commit: str) -> bytes:
        """The tree of ``commit`` as a tar (``git archive``), e.g. a docker build context."""
        proc = subprocess.run(
            ["git", "-C", str(self.path), *archive_argv(commit)],
            capture_output=True,
            env=git_env(),
            check=False,
        )
        if proc.returncode != 0:
            raise CannotMeasure(f"cannot export commit {commit} from {self.location}")
        return proc.stdout

    def export(self, commit: str, dest: Path) -> None:
        """Write the tree of ``commit`` into ``dest`` (no .git, nothing ignored dropped)."""
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.Popen(
            ["git", "-C", str(self.path), *archive_argv(commit)],
            stdout=subprocess.PIPE,
            env=git_env(),
        )
        untar = subprocess.run(
            ["tar", "-x", "--no-same-owner", "-C", str(dest)],
            stdin=archive.stdout,
            capture_output=True,
            env=child_env.basic(),
            check=False,
        )
        archive.stdout.close()  # type: ignore[union-attr]
        if archive.wait() != 0 or untar.returncode != 0:
            raise CannotMeasure(f"cannot export commit {commit} from {self.location}")
