"""Unpacking a release archive safely (nothing outside the destination, no special files,
no .git) and finding the server tree in it."""

from __future__ import annotations

import os
import re
import shutil
import tarfile
from pathlib import Path

from regtrack.core.errors import CannotMeasure
from regtrack.targets.offline.recipes import Source


def _check_member(member: tarfile.TarInfo, dest: Path) -> None:
    """Reject members that are absolute, contain "..", or link outside dest."""
    name = member.name
    parts = Path(name).parts
    if name.startswith("/") or os.path.isabs(name) or ".." in parts:
        raise CannotMeasure(f"unsafe path in archive: {name!r}")
    if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
        raise CannotMeasure(f"special file in archive: {name!r}")
    if member.issym() or member.islnk():
        link = member.linkname
        base = dest if member.islnk() else (dest / name).parent
        resolved = os.path.normpath(os.path.join(base, link))
        if os.path.isabs(link) or not (
            resolved == str(dest) or resolved.startswith(str(dest) + os.sep)
        ):
            raise CannotMeasure(f"link escapes the archive: {name!r} -> {link!r}")


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
                    raise CannotMeasure(f"{archive.name}: contains a .git path")
                # Our own checks (absolute paths, "..", escaping links, special
                # files) reject what the 'data' filter would silently rewrite.
                try:
                    _check_member(member, dest)
                except CannotMeasure as exc:
                    raise CannotMeasure(f"{archive.name}: {exc}") from None
            if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4
                tar.extractall(dest, filter="data")
            else:
                tar.extractall(dest)
    except (tarfile.TarError, EOFError, OSError) as exc:
        filter_error = getattr(tarfile, "FilterError", ())
        kind = "unsafe archive member" if isinstance(exc, filter_error) else "cannot extract"
        raise CannotMeasure(f"{archive.name}: {kind}: {exc}") from None


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
            raise CannotMeasure(f"{source.filename}: expected one top-level directory, got {names}")
        root = entries[0]
        if not looks_like_tree(root):
            raise CannotMeasure(f"{source.filename}: {root.name}/ is not a server tree")
        return root
    candidates = sorted(
        p.parent.parent
        for p in extracted.rglob("server.c")
        if p.parent.name == "src" and looks_like_tree(p.parent.parent)
    )
    if len(candidates) != 1:
        raise CannotMeasure(
            f"{source.filename}: expected one directory with src/server.c, "
            f"deps/, Makefile and src/version.h, found {len(candidates)}"
        )
    return candidates[0]


def read_version(version_h: str, macro: str) -> str | None:
    m = re.search(rf'^#define\s+{macro}\s+"([^"]+)"', version_h, re.M)
    return m.group(1) if m else None
