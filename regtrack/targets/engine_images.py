"""Images in the local Docker engine: found, pulled, imported from a native build, digested.

Released versions run the official ``redis:<version>`` image (pulled when missing);
without a registry or base image, a native build is imported with the libraries it links
into a minimal image (``docker import``).
"""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regtrack.core import child_env
from regtrack.core.docker_engine import short
from regtrack.core.errors import CannotMeasure

IMPORTED_REPO = "regtrack/redis"
SERVER_PATH = "/usr/local/bin/redis-server"  # where every image made here has the server


def official_image(version: str) -> str:
    """redis:<version> for a release tag; other refs have no official image."""
    return f"redis:{version}"


def has_image(client: Any, name: str) -> bool:
    import docker

    try:
        client.images.get(name)
        return True
    except docker.errors.ImageNotFound:
        return False


def ensure_image(client: Any, name: str, on_line: Callable[[str], None]) -> str:
    """The image's id, pulling it (with progress) when the engine does not have it."""
    import docker

    try:
        return client.images.get(name).id
    except docker.errors.ImageNotFound:
        pass
    except docker.errors.APIError as exc:
        raise CannotMeasure(f"cannot inspect image {name}: {short(exc)}") from None
    repository, _, tag = name.rpartition(":") if ":" in name.split("/")[-1] else (name, "", "")
    try:
        for event in client.api.pull(repository, tag=tag or "latest", stream=True, decode=True):
            if "error" in event:
                raise CannotMeasure(f"cannot pull {name}: {event['error']}")
            status = event.get("status", "")
            detail = event.get("progress", "")
            on_line(f"pulling {name}: {status} {detail}".strip())
        return client.images.get(name).id
    except CannotMeasure:
        raise
    except Exception as exc:
        raise CannotMeasure(
            f"cannot pull {name}: {short(exc)}; without a registry, run the version from "
            "source (--docker-images build) or load the image with docker load"
        ) from None


def _libraries(binary: Path) -> list[Path]:
    """The shared libraries ``binary`` links, and the dynamic loader, from ldd."""
    out = subprocess.run(
        ["ldd", str(binary)], capture_output=True, text=True, check=False, env=child_env.server()
    )
    if out.returncode != 0:
        return []  # static
    libs = []
    for line in out.stdout.splitlines():
        m = re.search(r"(/\S+)", line)
        if m and Path(m.group(1)).exists():
            libs.append(Path(m.group(1)))
    return libs


def import_binary(client: Any, binary: Path, tag: str) -> str:
    """A minimal image: the server, the libraries it links, /tmp and /data. No registry,
    no base image needed. Returns the image's id; reused when the tag exists."""
    import docker

    name = f"{IMPORTED_REPO}:{tag}"
    with contextlib.suppress(docker.errors.ImageNotFound):
        return client.images.get(name).id
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for directory in ("tmp", "data", "etc", "usr/local/bin"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if directory == "tmp" else 0o755
            tar.addfile(info)
        passwd = b"root:x:0:0:root:/root:/bin/sh\n"
        info = tarfile.TarInfo("etc/passwd")
        info.size = len(passwd)
        tar.addfile(info, io.BytesIO(passwd))
        tar.add(str(binary.resolve()), arcname=SERVER_PATH.lstrip("/"))
        for lib in _libraries(binary):
            tar.add(str(lib.resolve()), arcname=str(lib).lstrip("/"))
    buffer.seek(0)
    try:
        client.api.import_image_from_data(
            buffer.getvalue(),
            repository=IMPORTED_REPO,
            tag=tag,
            changes=["ENV PATH=/usr/local/bin", f'CMD ["{SERVER_PATH}"]'],
        )
        return client.images.get(name).id
    except Exception as exc:
        raise CannotMeasure(f"cannot import {binary} as image {name}: {short(exc)}") from None


@dataclass(frozen=True)
class ImageIdentity:
    """What identifies an image: its id and, for a pulled one, its registry digests."""

    image_id: str
    repo_digests: tuple[str, ...] = ()


def image_digest(client: Any, image: str) -> ImageIdentity:
    found = client.images.get(image)
    return ImageIdentity(found.id, tuple(found.attrs.get("RepoDigests") or ()))
