"""Which container image each version runs under --runtime docker, made or pulled as needed.

Release tags (7.0.15) of the upstream repository run the official redis:<version> image
(``--docker-images auto``, the default; ``official`` forces it for a mirror's tags too);
``image:`` specs run as given; everything else, and every version with
``--docker-images build``, runs an image of that exact code: with ``--builder-image`` a
``docker build`` of the commit inside that image (image_build.py), otherwise regtrack's
own build imported from the binary and the libraries it links, so that no registry or
base image is needed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from regtrack import image_build
from regtrack.errors import BadInput
from regtrack.runtimes import docker as docker_runtime
from regtrack.sources import UPSTREAM
from regtrack.versions import Target

RELEASE_TAG_RE = re.compile(r"^tag (\d+\.\d+\.\d+)$")


def uses_official(target: Target, policy: str) -> bool:
    """Whether ``target`` runs the official image (then it needs no build of its own)."""
    if not RELEASE_TAG_RE.match(target.ref or ""):
        return False
    return policy == "official" or (policy == "auto" and target.source_repo == UPSTREAM)


def built_in_docker(target: Target, policy: str, builder: str | None) -> bool:
    """Whether ``target`` is compiled by ``docker build`` (then it needs no native build)."""
    return bool(builder) and target.kind == "git" and not uses_official(target, policy)


def assign(
    client: Any,
    targets: list[Target],
    policy: str,
    on_line: Callable[[str], None],
    builder: str | None = None,
    flags: list[str] | None = None,
) -> None:
    """Set target.image (and how it was obtained) for every target."""
    for target in targets:
        if built_in_docker(target, policy, builder):
            assert builder

            def show(line: str, label: str = target.label) -> None:
                on_line(f"building {label} in {builder}: {line}")

            target.details["build"] = image_build.build_image(
                client, target, builder, flags or [], show
            )
            how = f"docker build in {builder}"
        elif target.kind == "image":
            assert target.image
            docker_runtime.ensure_image(client, target.image, on_line)
            how = "as given"
        elif uses_official(target, policy):
            target.image = docker_runtime.official_image((target.ref or "").split()[-1])
            docker_runtime.ensure_image(client, target.image, on_line)
            how = "official image"
        else:
            if not target.binary or not target.binary_sha256:
                raise BadInput(f"version {target.label!r} has no binary to put in an image")
            on_line(f"importing {target.label} into an image")
            tag = f"{target.kind}-{target.binary_sha256[:16]}"
            docker_runtime.import_binary(client, Path(target.binary), tag)
            target.image = f"{docker_runtime.IMPORTED_REPO}:{tag}"
            how = "imported from regtrack's build"
        target.details["docker"] = {
            "image": target.image,
            "how": how,
            **docker_runtime.image_digest(client, target.image),
        }
