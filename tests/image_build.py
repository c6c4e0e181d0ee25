"""Build regtrack's own image (the repository's Dockerfile) through the real engine, from a
base the tests make: no registry to pull debian:bookworm-slim from.

The base is this machine's installed Debian packages (tests/host_image.py) holding what
docker/packages-*.txt name, so the Dockerfile's apt step finds everything installed and
fetches nothing. The build context is what .dockerignore lets through, plus
memtier_benchmark's release archive ($REGTRACK_MEMTIER_ARCHIVE, as scripts/install.sh
reads it) and the open-loop engine scripts/install.sh built (no Rust image to build it in)
in docker/archives/: never a file in the working tree. Layers are the engine's
cache, so a second build of unchanged sources takes seconds.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path
from typing import IO, Any

from tests import host_image

ROOT = Path(__file__).resolve().parent.parent
BASE = "regtrack-test/image-base:host"
IMAGE = "regtrack-test/regtrack:test"
MEMTIER_ARCHIVE = "memtier_benchmark-2.3.0.tar.gz"
ENGINE = "regtrack-openloop"
BUILD_TIMEOUT = 1800  # a cold build: uv.lock's packages from PyPI, memtier_benchmark


def listed(name: str) -> tuple[str, ...]:
    """The packages docker/packages-NAME.txt names."""
    text = (ROOT / "docker" / f"packages-{name}.txt").read_text()
    return tuple(w for line in text.splitlines() for w in line.split("#")[0].split())


def base_image(client: Any) -> str:
    """The base, imported once per machine (kept by its tag like the builder image)."""
    from regtrack.targets import engine_images

    if not engine_images.has_image(client, BASE):
        host_image.builder_image(client, BASE, listed("runtime") + listed("build"))
    return BASE


def context(memtier_archive: str | None, engine: str | None) -> IO[bytes]:
    """The build context as the docker CLI would send it, with the archives if given."""
    from docker.utils import build

    lines = (ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    tar = build.tar(str(ROOT), exclude=patterns)
    with tarfile.open(fileobj=tar, mode="a") as archive:
        if memtier_archive:
            archive.add(memtier_archive, arcname=f"docker/archives/{MEMTIER_ARCHIVE}")
        if engine:
            archive.add(engine, arcname=f"docker/archives/{ENGINE}")
    tar.seek(0)
    return tar


def build(base: str) -> tuple[str, list[str]]:
    """Build the image as IMAGE from ``base``: (its id, the build's output lines). Raises
    RuntimeError with the output's tail when the build fails."""
    import docker
    from regtrack.bench.loadgen import openloop

    api = docker.from_env(timeout=BUILD_TIMEOUT).api  # a layer may print nothing for minutes
    out: list[str] = []
    stream = api.build(
        fileobj=context(os.environ.get("REGTRACK_MEMTIER_ARCHIVE"), openloop.installed()),
        custom_context=True,
        tag=IMAGE,
        buildargs={"BASE": base, "RUST_BASE": base},
        rm=True,
        forcerm=True,
        pull=False,
        decode=True,
    )
    for chunk in stream:
        if "error" in chunk:
            tail = "".join(out[-40:])
            raise RuntimeError(f"docker build failed: {chunk['error']}\n{tail}")
        out.append(chunk.get("stream", ""))
    image = api.inspect_image(IMAGE)["Id"]
    api.close()
    return image, out
