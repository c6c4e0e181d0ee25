"""Putting an offline source repository in place: reuse a complete one, refuse to replace
what this command did not make, build in a staging folder beside the destination and
rename it into place (an interrupted build never leaves half a repository)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from regtrack.core.errors import CannotMeasure
from regtrack.targets.offline.history import (
    build_repo,
    existing_is_complete,
    manifest_path,
    refs_summary,
)
from regtrack.targets.offline.recipes import ARCHIVES_ENV, Product, Progress


@dataclass(frozen=True)
class Ref:
    """One tag or branch of the repository and the release its src/version.h names."""

    ref: str  # "tag 7.0.15", "branch unstable"
    commit: str
    version: str


@dataclass(frozen=True)
class OfflineRepo:
    """The repository in place: where, whether it was already complete, and its refs."""

    dest: Path
    reused: bool
    refs: tuple[Ref, ...]


def default_work() -> Path:
    """The download cache and scratch space, beside regtrack's other caches."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "regtrack" / "offline-sources"


def archive_folders(extra: tuple[Path, ...] | list[Path] = ()) -> list[Path]:
    """The folders of $REGTRACK_SOURCE_ARCHIVES, then ``extra``: where pinned archives are
    taken from before any download."""
    listed = [Path(p) for p in os.environ.get(ARCHIVES_ENV, "").split(os.pathsep) if p]
    return [*listed, *extra]


def make(
    product: Product,
    dest: Path,
    *,
    work: Path | None = None,
    archives: list[Path] | None = None,
    force: bool = False,
    bare: bool = False,
    progress: Progress = lambda _message: None,
) -> OfflineRepo:
    """The repository of ``product``'s pinned releases in ``dest``, made unless a complete
    one from the same recipe is there (``force``: made again)."""
    dest = dest.expanduser().absolute()
    work = (work or default_work()).expanduser().absolute()
    if shutil.which("git") is None:
        raise CannotMeasure("git is not installed")
    if dest.exists() and not dest.is_dir():
        raise CannotMeasure(f"{dest} exists and is not a directory")
    if dest.is_dir():
        ok, why = existing_is_complete(dest, product)
        if ok and not force:
            progress(f"{dest} is already a complete {product.name} repository; nothing to do")
            return OfflineRepo(dest, True, _refs(dest, product))
        _check_replaceable(dest, product, force)
        progress(f"rebuilding {dest} ({'--force' if ok else why})")

    work.mkdir(parents=True, exist_ok=True)
    with (work / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build per work folder at a time
        dest.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
        umask = os.umask(0)
        os.umask(umask)
        staging.chmod(0o777 & ~umask)  # mkdtemp makes it 0700
        try:
            build_repo(product, staging, work, bare=bare, archives=archives, progress=progress)
            if dest.exists():
                shutil.rmtree(dest)
            staging.rename(dest)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    progress(f"done: {dest}")
    return OfflineRepo(dest, False, _refs(dest, product))


def _check_replaceable(dest: Path, product: Product, force: bool) -> None:
    """An existing ``dest`` is replaced only if this command made it for this product
    (``force``: any product), or if it is empty."""
    manifest_file = manifest_path(dest)
    if manifest_file.is_file():
        try:
            holds = json.loads(manifest_file.read_text()).get("product")
        except (OSError, ValueError):
            holds = None
        if holds != product.name and not force:
            raise CannotMeasure(
                f"{dest} holds a {holds!r} repository made by this command, "
                f"not {product.name!r}; use --force to replace it"
            )
    elif any(dest.iterdir()):
        raise CannotMeasure(
            f"{dest} exists, is not empty and was not made by this command; "
            "remove it or choose another DIR"
        )


def _refs(dest: Path, product: Product) -> tuple[Ref, ...]:
    git_dir = manifest_path(dest).parent
    return tuple(Ref(*row) for row in refs_summary(git_dir, product))
