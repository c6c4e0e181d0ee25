"""Every file regtrack writes where a user points it (a database, a summary, JSON, a report):
never through a symbolic link it did not make, and under CI never a database inside the
checkout.

In CI, regtrack runs as root in a pull request's checkout, and the checkout is the
author's: a committed ``regtrack.json`` that links to a file elsewhere, or a ``reports``
that links to another folder, would have regtrack overwrite what it points at; a
committed ``reports/regtrack.db`` would be read as regtrack's own results (docs/ci.md,
"Security"; docs/reliability.md, "Threat model").

The rule for a link on the way to a file: the file itself is never a link (a replaced
file is written to a new temporary file and renamed over the name, which replaces a link
rather than following it; an appended one is opened with ``O_NOFOLLOW``). A folder on the
way may be a link only if it is the machine's own layout: outside the checkout, owned by
root or this user, in a folder that no one else may write to. Anything else is one line
(exit 2) naming the link.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path

from regtrack.core.errors import BadInput

CI_VALUES = ("true", "1", "yes")


def under_ci() -> bool:
    """Whether this runs in a CI job ($CI, set by GitHub Actions, GitLab, and most others)."""
    return os.environ.get("CI", "").strip().lower() in CI_VALUES


def checkout_roots() -> list[Path]:
    """The folders a pull request controls: the working directory and $GITHUB_WORKSPACE
    (not ``/``: a job started at the root has no checkout to tell apart)."""
    roots = [Path.cwd()]
    if os.environ.get("GITHUB_WORKSPACE"):
        roots.append(Path(os.environ["GITHUB_WORKSPACE"]))
    resolved = []
    for root in roots:
        real = Path(os.path.realpath(root))
        if real != Path("/") and real not in resolved:
            resolved.append(real)
    return resolved


def inside_checkout(path: str | Path) -> Path | None:
    """The checkout folder ``path`` lies in (its folder's real path), or None."""
    folder = Path(os.path.realpath(Path(os.path.abspath(path)).parent))
    for root in checkout_roots():
        if folder == root or root in folder.parents:
            return root
    return None


def _trusted_link(link: Path, info: os.stat_result) -> bool:
    """A folder link that is the machine's own layout (``/var/run`` -> ``/run``), not one
    a pull request committed or another local user planted."""
    if inside_checkout(link) is not None:
        return False
    if info.st_uid not in (0, os.geteuid()):
        return False
    parent = os.stat(link.parent)
    return not parent.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def checked(path: str | Path, what: str, *, folder: bool = False) -> Path:
    """``path`` made absolute, if writing it follows no link regtrack may not follow;
    else BadInput naming the link. A file is never a link; a ``folder`` may be one as
    any folder on the way may. Parts still to be made are not checked (none exists)."""
    absolute = Path(os.path.abspath(path))
    current = Path(absolute.anchor)
    for part in absolute.parts[1:]:
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            break
        except NotADirectoryError:
            verb = "create" if folder else "write"
            raise BadInput(
                f"cannot {verb} the {what} {path}: {current.parent} is not a folder"
            ) from None
        except OSError as exc:
            raise BadInput(f"cannot write the {what} {path}: {current}: {exc.strerror}") from None
        if not stat.S_ISLNK(info.st_mode):
            continue
        if current == absolute and not folder:
            raise BadInput(
                f"the {what} {path} is a symbolic link: regtrack never writes through a link "
                "it did not make; remove it or name another file"
            )
        if not _trusted_link(current, info):
            raise BadInput(
                f"the {what} {path} goes through the symbolic link {current}, which regtrack "
                "did not make (in the checkout, or where others may write): name a path "
                "without it, e.g. under $RUNNER_TEMP"
            )
    return absolute


def make_dirs(path: str | Path, what: str) -> Path:
    """The folder ``path``, made if missing (each missing part in turn, none followed)."""
    folder = checked(path, what, folder=True)
    missing = []
    current = folder
    while not os.path.lexists(current):
        missing.append(current)
        current = current.parent
    if not os.path.isdir(current):
        raise BadInput(f"cannot create the {what} {path}: {current} is not a folder")
    for part in reversed(missing):
        try:
            os.mkdir(part, 0o755)
        except FileExistsError:
            pass
        except OSError as exc:
            raise BadInput(f"cannot create the {what} {path}: {exc.strerror}") from None
        if os.path.islink(part):  # made by someone else in between: not ours to follow
            raise BadInput(f"cannot create the {what} {path}: {part} became a symbolic link")
    return folder


def replace_text(path: str | Path, text: str, what: str, *, mode: int = 0o644) -> Path:
    """Write ``path`` whole: a new temporary file beside it, renamed over the name, so a
    reader never sees half of it and a link at the name is replaced, not followed."""
    target = checked(path, what)
    folder = make_dirs(target.parent, f"{what}'s folder")
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.")
    except OSError as exc:
        raise BadInput(f"cannot write the {what} {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)  # mkstemp's 0600 would hide a report page from a web server
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise BadInput(f"cannot write the {what} {path}: {exc.strerror}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def append_text(path: str | Path, text: str, what: str) -> Path:
    """Add ``text`` to ``path`` (made if missing): opened with O_NOFOLLOW, and only a
    regular file is written (a planted FIFO or device is refused, never blocked on)."""
    target = checked(path, what)
    make_dirs(target.parent, f"{what}'s folder")
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(target, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BadInput(
                f"the {what} {path} is a symbolic link: regtrack never writes through a link "
                "it did not make; remove it or name another file"
            ) from None
        raise BadInput(f"cannot write the {what} {path}: {exc.strerror}") from None
    with contextlib.ExitStack() as stack:
        stack.callback(os.close, fd)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BadInput(f"the {what} {path} is not a regular file: name a file")
        os.set_blocking(fd, True)
        data = text.encode()
        while data:
            data = data[os.write(fd, data) :]
    return target


def database_path(path: str | Path) -> Path:
    """A database regtrack may open: no link on the way nor at it (its journal files
    neither), and under CI not inside the checkout, whose author could have committed
    it with forged results."""
    target = checked(path, "database")
    for suffix in ("-wal", "-shm", "-journal"):
        if os.path.islink(f"{target}{suffix}"):
            raise BadInput(
                f"the database {path}'s {suffix[1:]} file is a symbolic link: regtrack never "
                "writes through a link it did not make; remove it or use another --db"
            )
    root = inside_checkout(target) if under_ci() else None
    if root is not None:
        raise BadInput(
            f"the database {path} is inside the checkout {root}, which a pull request "
            "controls (it could commit forged results there): under CI=true pass --db "
            'with a path outside it, e.g. --db "$RUNNER_TEMP/regtrack.db"'
        )
    return target
