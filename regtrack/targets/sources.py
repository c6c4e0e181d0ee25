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
from dataclasses import dataclass
from pathlib import Path

from regtrack.core import child_env, procs, redact
from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.targets import git_remote
from regtrack.targets.git_command import git, git_env, remote_git

UPSTREAM = "https://github.com/redis/redis.git"
SERIES_RE = re.compile(r"^(\d+)\.(\d+)$")
RELEASE_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
SHA_RE = re.compile(r"^[0-9a-fA-F]{7,40}$")
COMMIT_RE = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")  # a full SHA-1 or SHA-256 id
CLONING_RE = re.compile(r"^.+\.git\.tmp(\d+)$")  # a clone under way: NAME.git.tmpPID


def cache_root() -> Path:
    """$REGTRACK_CACHE, else $XDG_CACHE_HOME/regtrack, else ~/.cache/regtrack."""
    if os.environ.get("REGTRACK_CACHE"):
        return Path(os.environ["REGTRACK_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "regtrack"


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
