"""Builds of Redis from source, cached by (commit, build flags, compiler).

Build flags are the ``--build-flags`` make variables and any of ``MAKE_ENVIRONMENT`` set
in regtrack's own environment (make reads those too; make_flags.py); the compiler is the
first line of ``--version`` of the one make runs. All three are stored with the build: they move
instruction counts, so comparisons across runs check them (results/comparability.py).

A second run with the same specs builds nothing: the cache entry is only written after
``make`` succeeded and the binary answered ``--version``. A failed build keeps its log for
the user and is retried next time.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from regtrack.core import child_env, cpulock, procs
from regtrack.core.digests import sha256_of
from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.targets.make_flags import MAKE_ENVIRONMENT, compiler_version, make_environment
from regtrack.targets.sources import SourceRepo, cache_root
from regtrack.targets.target import BuildFacts, Target

SERVER_NAMES = ("redis-server", "valkey-server")
BENCHMARK_NAMES = ("redis-benchmark", "valkey-benchmark")
LOG_TAIL_LINES = 15
ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class MakeFailed(CannotMeasure):
    """make itself failed. Unless ``passing`` names the machine's own trouble (a full
    disk, memory), the code does not compile: the same input would fail again."""

    def __init__(self, message: str, passing: str | None = None) -> None:
        super().__init__(message)
        self.passing = passing


@dataclass
class Build:
    """A finished build: where its binaries are and how they were made."""

    key: str
    commit: str | None
    flags: list[str]
    compiler: str
    directory: str
    server: str
    benchmark: str | None
    seconds: float
    server_version: str
    log: str
    cached: bool = False
    # MAKE_ENVIRONMENT variables make took from the environment (none for builds cached
    # before they were recorded: the cache reused those whatever the environment).
    environment: dict[str, str] = field(default_factory=dict)

    def facts(self) -> BuildFacts:
        """What the run records of the build (the target's ``build``)."""
        data = asdict(self)
        data["build_key"] = data.pop("key")
        return BuildFacts.from_json(data)


def _find(tree: Path, names: tuple[str, ...]) -> Path | None:
    for name in names:
        candidate = tree / "src" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One builder per cache entry, even across regtrack processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _log_tail(log: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = ANSI_RE.sub("", log.read_text(errors="replace")).rstrip().splitlines()
    except OSError:
        return ""
    return "\n".join("    " + line for line in text[-lines:])


def _ccache(flags: list[str]) -> tuple[list[str], dict[str, str]]:
    """make arguments and environment that put ccache in front of the compiler, when it
    is installed and the user chose no compiler: commits of one branch share most files,
    so each one after the first rebuilds in seconds. The compiler and its output are the
    same; paths are hashed relative to the tree, so every commit's tree shares one cache."""
    if shutil.which("ccache") is None or any(f.startswith("CC=") for f in flags):
        return [], {}
    return ["CC=ccache cc"], {
        "CCACHE_DIR": str(cache_root() / "ccache"),
        "CCACHE_BASEDIR": "/",
        "CCACHE_NOHASHDIR": "true",
    }


def make_env(flags: list[str]) -> dict[str, str]:
    """make's whole environment: the toolchain and the make variables recorded with the
    build (child_env.build, MAKE_ENVIRONMENT), and ccache's settings when it is used."""
    return {**child_env.build(MAKE_ENVIRONMENT), **_ccache(flags)[1]}


def _make(tree: Path, flags: list[str], log: Path, on_line: Callable[[str], None]) -> float:
    """Run make in ``tree``; returns seconds taken. Raises with the log's tail on failure."""
    jobs = str(len(os.sched_getaffinity(0)))
    started = time.monotonic()
    cc, _ = _ccache(flags)
    env = make_env(flags)
    argv = ["make", "-j", jobs, *cc, *flags]
    # make -j uses every CPU: it waits for, and then holds off, any measurement here.
    with cpulock.hold_all(on_wait=on_line), log.open("ab") as out:
        out.write(f"$ {shlex.join(argv)}\n".encode())
        out.flush()
        proc = procs.spawn(argv, stdout=out, stderr=subprocess.STDOUT, cwd=tree, env=env)
        try:
            last_size = -1
            while True:
                try:
                    proc.wait(timeout=0.5)  # returns as make exits, not at the next tick
                    break
                except subprocess.TimeoutExpired:
                    size = log.stat().st_size
                    if size != last_size:
                        last_size = size
                        on_line(_last_line(log))
        finally:
            procs.stop(proc, grace=2.0)
    if proc.returncode != 0:
        message = (
            f"build in {tree} failed (make exit code {proc.returncode}); full log: {log}\n"
            f"{_log_tail(log)}"
        )
        passing = _passing_reason(log) or (
            f"make was killed by signal {-proc.returncode}" if proc.returncode < 0 else None
        )
        if passing:
            raise MakeFailed(message, passing=passing)
        raise MakeFailed(message)
    return time.monotonic() - started


# Failures of the machine, not of the code: a later build of the same commit may pass.
PASSING_FAILURES = (
    "No space left on device",
    "Disk quota exceeded",
    "Cannot allocate memory",
    "virtual memory exhausted",
    "out of memory",
    "internal compiler error: Killed",
    "fatal error: Killed signal terminated program",
    "Resource temporarily unavailable",
)


def _passing_reason(log: Path) -> str | None:
    """The machine's own trouble named in the build log's tail, if any."""
    tail = _log_tail(log, lines=200)
    return next((text for text in PASSING_FAILURES if text in tail), None)


def _last_line(log: Path) -> str:
    """The newest line of the build log, without the colours Redis's Makefile prints."""
    with log.open("rb") as f:
        f.seek(max(0, log.stat().st_size - 400))
        tail = ANSI_RE.sub("", f.read().decode(errors="replace")).strip().splitlines()
    return " ".join(tail[-1].split())[:100] if tail else ""


def _server_version(server: Path) -> str:
    try:
        out = subprocess.run(
            [str(server), "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env=child_env.server(),
        )
    except OSError as exc:
        raise CannotMeasure(f"built server {server} cannot run: {exc.strerror}") from None
    text = out.stdout.strip()
    if out.returncode != 0 or " v=" not in text:
        raise CannotMeasure(f"built server {server} does not report a version: {text[:200]}")
    return text


def _make_build(
    tree: Path,
    flags: list[str],
    compiler: str,
    log: Path,
    on_line: Callable[[str], None],
    key: str,
    commit: str | None,
    directory: Path,
    environment: dict[str, str],
) -> Build:
    """make, then find the binaries and ask the server its version."""
    seconds = _make(tree, flags, log, on_line)
    server = _find(tree, SERVER_NAMES)
    if server is None:
        raise CannotMeasure(f"make succeeded but {tree}/src has no redis-server; log: {log}")
    benchmark = _find(tree, BENCHMARK_NAMES)
    return Build(
        key=key,
        commit=commit,
        flags=flags,
        compiler=compiler,
        directory=str(directory),
        server=str(server),
        benchmark=str(benchmark) if benchmark else None,
        seconds=round(seconds, 1),
        server_version=_server_version(server),
        log=str(log),
        environment=environment,
    )


def _log_header(compiler: str, environment: dict[str, str]) -> str:
    taken = shlex.join(f"{k}={v}" for k, v in environment.items()) or "nothing"
    return f"compiler: {compiler}\nmake variables from the environment: {taken}\n"


PATH_FIELDS = ("directory", "server", "benchmark", "log")


def _save_record(record: Path, build: Build) -> None:
    """Paths are stored relative to the cache entry, so a moved cache stays valid."""
    data = asdict(build)
    for name in PATH_FIELDS:
        if data[name]:
            data[name] = os.path.relpath(data[name], record.parent)
    if not data["environment"]:  # as before it was recorded: an older regtrack reads it too
        del data["environment"]
    tmp = record.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    tmp.replace(record)  # never a half-written record that looks like a finished build


def _load_record(record: Path) -> Build | None:
    try:
        data = json.loads(record.read_text())
        for name in PATH_FIELDS:
            if data[name]:
                data[name] = str((record.parent / data[name]).resolve())
        build = Build(**{**data, "cached": True})
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return build if Path(build.server).is_file() else None


def build_commit(
    repo: SourceRepo,
    commit: str,
    flags: list[str],
    on_line: Callable[[str], None] = lambda line: None,
) -> Build:
    """Build ``commit`` of ``repo`` in its own cache entry, or reuse the cached build."""
    compiler = compiler_version(flags)
    environment = make_environment(flags)
    # Without such variables the key is as it was before they were recorded: cached
    # builds stay valid.
    inputs: list = [commit, flags, compiler] + ([environment] if environment else [])
    key = hashlib.sha256(json.dumps(inputs).encode()).hexdigest()[:16]
    entry = cache_root() / "builds" / f"{commit[:12]}-{key}"
    record = entry / "build.json"
    failure = entry / "failed.txt"
    with _locked(entry.with_suffix(".lock")):
        cached = _load_record(record)
        if cached is not None:
            return cached
        if failure.is_file():  # make failed on this very input before: it would again
            raise MakeFailed(f"{failure.read_text().strip()} (remembered: remove {entry} to retry)")
        tree = entry / "src"
        if tree.exists():
            shutil.rmtree(tree)
        entry.mkdir(parents=True, exist_ok=True)
        log = entry / "build.log"
        log.write_text(
            f"regtrack build of {commit} from {repo.location}\n{_log_header(compiler, environment)}"
        )
        on_line("exporting sources")
        repo.export(commit, tree)
        try:
            build = _make_build(
                tree, flags, compiler, log, on_line, key, commit, entry, environment
            )
        except MakeFailed as exc:
            if exc.passing is None:  # the code does not build: it would not next time either
                failure.write_text(str(exc).splitlines()[0] + "\n")
            raise
        _save_record(record, build)
        return build


def build_tree(
    tree: Path, flags: list[str], on_line: Callable[[str], None] = lambda line: None
) -> Build:
    """Build a user's source tree in place (``make`` is incremental there, as by hand)."""
    if not (tree / "src").is_dir() or not (tree / "Makefile").is_file():
        raise BadInput(f"{tree} is not a Redis source tree (no Makefile and src/)")
    compiler = compiler_version(flags)
    environment = make_environment(flags)
    # The log goes to the cache, not into the user's tree.
    entry = cache_root() / "trees" / hashlib.sha256(str(tree).encode()).hexdigest()[:16]
    entry.mkdir(parents=True, exist_ok=True)
    log = entry / "build.log"
    log.write_text(f"regtrack build of the tree {tree}\n{_log_header(compiler, environment)}")
    return _make_build(tree, flags, compiler, log, on_line, "in-place", None, tree, environment)


def obtain(
    targets: list[Target],
    flags: list[str],
    on_phase: Callable[[str], None] = lambda text: None,
) -> list[Target]:
    """Every target with a runnable server binary, git and src targets built.

    All builds finish before anything is measured: a failing build stops the run while
    nothing has been spent on measuring, except for a commit of a range (A..B), which
    comes back marked (``build_failed``), so the range goes on without it.
    """
    repos: dict[str, SourceRepo] = {}
    out: list[Target] = []
    for target in targets:
        if target.kind not in ("git", "src"):
            out.append(target)
            continue
        label = target.label

        def show(line: str, label: str = label) -> None:
            on_phase(f"building {label}: {line}")

        if target.kind == "git":
            assert target.commit and target.source_repo
            repo = repos.setdefault(target.source_repo, SourceRepo(target.source_repo))
            try:
                build = build_commit(repo, target.commit, flags, show)
            except CannotMeasure as exc:
                if target.range is None or getattr(exc, "passing", None):
                    raise  # a range goes on without a commit that cannot build, not a full disk
                out.append(replace(target, build_failed=str(exc).splitlines()[0]))
                continue
        else:
            assert target.tree
            build = build_tree(Path(target.tree), flags, show)
        out.append(
            replace(
                target,
                binary=build.server,
                binary_sha256=sha256_of(build.server),
                build=build.facts(),
            )
        )
    return out
