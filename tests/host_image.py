"""A Debian image with make and a C compiler, made from this machine's own installed
packages: no registry to pull one from, nothing to download (debootstrap took half a
minute of every cold CI run for the same image).

The image holds the files of the packages a minimal Debian needs (Priority: required),
of make, gcc and libc6-dev (or the packages a caller names), and of every package they
depend on, as dpkg lists them, with the alternatives links that name their commands (cc,
awk), /usr's merged layout, and dpkg's status of exactly those packages: `dpkg-query`
inside finds them installed, so an install step that installs only what is missing
(docker/apt-missing.sh, scripts/install.sh) fetches nothing.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

TOOLS = ("make", "gcc", "libc6-dev")
MERGED = ("bin", "sbin", "lib", "lib64")  # symlinks into /usr on a merged-/usr system


def _run(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def packages(tools: tuple[str, ...] = TOOLS) -> list[str]:
    """Installed packages: Priority required, the tools, and all they depend on."""
    rows = _run("dpkg-query", "-W", "-f=${Package}\t${Priority}\t${db:Status-Status}\n")
    installed = {r.split("\t")[0]: r.split("\t")[1] for r in rows.splitlines()
                 if r.endswith("\tinstalled")}  # fmt: skip
    required = [name for name, priority in installed.items() if priority == "required"]
    closure = _run(
        "apt-cache", "depends", "--recurse", "--installed", "--no-recommends", "--no-suggests",
        "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", *tools, *required,
    )  # fmt: skip
    named = {line for line in closure.splitlines() if line and line[0] not in " <"}
    return sorted(named & set(installed))  # alternatives that are not installed drop out


def _canonical(path: str) -> str:
    """Where the file really is: /bin/sh is /usr/bin/sh on a merged-/usr system."""
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def dpkg_status(names: list[str]) -> bytes:
    """The host's dpkg status entries of ``names`` only: what the image really holds."""
    wanted = set(names)
    entries = Path("/var/lib/dpkg/status").read_text().split("\n\n")
    kept = [e for e in entries if e.startswith("Package: ") and e.split("\n")[0][9:] in wanted]
    return ("\n\n".join(kept) + "\n").encode()


# Files packages make when installed rather than ship (so dpkg -L does not list them).
GENERATED = {"ca-certificates": ("/etc/ssl/certs",)}


def _generated(names: list[str]) -> list[str]:
    found = []
    for name in names:
        for root in GENERATED.get(name, ()):
            found += [str(p) for p in Path(root).rglob("*")]
    return found


def archive(names: list[str]) -> bytes:
    """A tar of the packages' files (regular files and symlinks) at their real paths."""
    listed = _run("dpkg", "-L", *names).splitlines() + _generated(names)
    alternatives = [str(p) for p in Path("/etc/alternatives").iterdir()]
    linked = [
        str(p)
        for d in ("/usr/bin", "/usr/sbin")
        for p in Path(d).iterdir()
        if p.is_symlink() and os.readlink(p).startswith("/etc/alternatives/")
    ]
    files = sorted({_canonical(p) for p in [*listed, *alternatives, *linked] if p.startswith("/")})
    buffer = io.BytesIO()
    made = {"tmp", "root", "etc", "home", "var", "var/tmp", "etc/passwd", "etc/group"}
    made |= {"var/lib", "var/lib/dpkg", "var/lib/dpkg/status"}
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for top in MERGED:
            if os.path.islink(f"/{top}"):
                info = tarfile.TarInfo(top)
                info.type, info.linkname = tarfile.SYMTYPE, os.readlink(f"/{top}")
                tar.addfile(info)
                made.add(top)
        dirs = (("tmp", 0o1777), ("root", 0o700), ("etc", 0o755), ("home", 0o755),
                ("var", 0o755), ("var/tmp", 0o1777), ("var/lib", 0o755),
                ("var/lib/dpkg", 0o755))  # fmt: skip
        for directory, mode in dirs:
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)
        for name, data in (("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n"),
                           ("etc/group", b"root:x:0:\n"),
                           ("var/lib/dpkg/status", dpkg_status(names))):  # fmt: skip
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for path in files:
            name = path.lstrip("/")
            if name not in made and (os.path.islink(path) or os.path.isfile(path)):
                tar.add(path, arcname=name, recursive=False)
                made.add(name)
    return buffer.getvalue()


def builder_image(client: Any, name: str, tools: tuple[str, ...] = TOOLS) -> str:
    """Import the image of ``tools`` as ``name`` (repository:tag); returns its id."""
    repository, tag = name.split(":")
    client.api.import_image_from_data(archive(packages(tools)), repository=repository, tag=tag)
    return client.images.get(name).id
