"""An image of one commit, built by ``docker build`` inside a builder image the user chose.

This is how the official images are made (compile in a container from a known base), so a
user who wants the compiler and libraries of a given base gets them; the default for
commits stays regtrack's own native build imported as an image (images.py), which needs no
base image at all. The build context is ``git archive`` of the exact commit plus one
Dockerfile of ours; build flags reach ``make`` as an exec-form argv, never through a shell.
Images are cached by (commit, flags, builder image id): a second run builds nothing.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from regtrack.core import cpulock, docker_engine
from regtrack.core.errors import CannotMeasure
from regtrack.targets import engine_images
from regtrack.targets.sources import SourceRepo
from regtrack.targets.target import BuildFacts, Target

DOCKERFILE_NAME = "regtrack.Dockerfile"
LOG_TAIL_LINES = 15

# The second stage starts again from the builder image: the server needs its C library and
# nothing of the compile. The copy step is fixed text; Valkey trees name the binary valkey-server.
DOCKERFILE = """\
ARG BUILDER
FROM ${BUILDER} AS build
COPY . /src
RUN %(make)s
RUN ["/bin/sh", "-c", "%(copy)s"]

FROM ${BUILDER}
COPY --from=build /out/redis-server /usr/local/bin/redis-server
CMD ["redis-server"]
"""


COPY_SERVER = (
    "mkdir -p /out && (cp /src/src/redis-server /out/redis-server 2>/dev/null"
    " || cp /src/src/valkey-server /out/redis-server)"
)


def dockerfile(flags: list[str], jobs: int) -> str:
    make = ["make", "-C", "/src", f"-j{jobs}", *flags]
    return DOCKERFILE % {"make": json.dumps(make), "copy": COPY_SERVER}


def _context(repo: SourceRepo, commit: str, text: str) -> bytes:
    """The commit's tree as a tar, with our Dockerfile appended at its root."""
    buffer = io.BytesIO(repo.archive(commit))
    with tarfile.open(fileobj=buffer, mode="a") as tar:
        data = text.encode()
        info = tarfile.TarInfo(DOCKERFILE_NAME)
        info.size, info.mtime = len(data), int(time.time())
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def image_tag(commit: str, flags: list[str], builder_id: str) -> str:
    key = hashlib.sha256(json.dumps([commit, flags, builder_id]).encode()).hexdigest()[:12]
    return f"build-{commit[:12]}-{key}"


def build_image(
    client: Any,
    target: Target,
    builder: str,
    flags: list[str],
    on_line: Callable[[str], None] = lambda line: None,
    jobs: int = 2,
) -> tuple[str, BuildFacts]:
    """Build ``target``'s commit in ``builder``: the image's name and how it was built."""
    assert target.commit and target.source_repo
    builder_id = engine_images.ensure_image(client, builder, on_line)
    tag = image_tag(target.commit, flags, builder_id)
    name = f"{engine_images.IMPORTED_REPO}:{tag}"
    facts = BuildFacts(
        flags=tuple(flags),
        commit=target.commit,
        builder_image=builder,
        builder_image_id=builder_id,
        how="docker build",
    )
    if engine_images.has_image(client, name):
        return name, replace(facts, cached=True)
    repo = SourceRepo(target.source_repo)
    on_line("exporting sources")
    context = _context(repo, target.commit, dockerfile(flags, jobs))
    started = time.monotonic()
    lines: list[str] = []
    # The build uses every CPU: it waits for, and then holds off, any measurement here.
    with cpulock.hold_all(on_wait=on_line):
        _build(client, target, builder, name, context, lines, on_line)
    return name, replace(facts, cached=False, seconds=round(time.monotonic() - started, 1))


def _build(
    client: Any,
    target: Target,
    builder: str,
    name: str,
    context: bytes,
    lines: list[str],
    on_line: Callable[[str], None],
) -> None:
    try:
        for event in client.api.build(
            fileobj=io.BytesIO(context),
            custom_context=True,
            dockerfile=DOCKERFILE_NAME,
            buildargs={"BUILDER": builder},
            tag=name,
            rm=True,
            forcerm=True,
            pull=False,
            decode=True,
        ):
            if "error" in event:
                tail = "\n".join(lines[-LOG_TAIL_LINES:])
                raise CannotMeasure(
                    f"docker build of {target.label} in {builder} failed: "
                    f"{event['error'].strip()}\n{tail}"
                )
            for line in event.get("stream", "").splitlines():
                if line.strip():
                    lines.append(line.rstrip())
                    on_line(line.strip()[:120])
    except CannotMeasure:
        raise
    except Exception as exc:
        raise CannotMeasure(
            f"docker build of {target.label} in {builder} failed: {docker_engine.short(exc)}"
        ) from None
