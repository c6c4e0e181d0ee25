"""Which container image each version runs under --runtime docker, made or pulled as needed.

One comparison runs one kind of build for every version, so that it compares code, not
packaging: either Docker Hub's official ``redis:<version>`` images (possible only when
every version is a release tag) or images of regtrack's own builds (everything else).
``--docker-images auto`` (the default) takes the official images when every version has
one and no --build-flags are given, else regtrack's builds for all; ``official`` and
``build`` ask for one kind explicitly. ``image:`` specs run as given. regtrack's builds
are made with ``--builder-image`` by a ``docker build`` of the commit inside that image
(image_build.py), otherwise from its own native build, imported with the libraries it
links, so that no registry or base image is needed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from regtrack.core.errors import BadInput
from regtrack.targets import engine_images, image_build
from regtrack.targets.sources import UPSTREAM
from regtrack.targets.target import DockerImage, Target

RELEASE_TAG_RE = re.compile(r"^tag (\d+\.\d+\.\d+)$")


def has_official(target: Target) -> bool:
    """Whether Docker Hub has an official image of exactly this version (a release tag)."""
    return bool(RELEASE_TAG_RE.match(target.ref or ""))


def decide(targets: list[Target], requested: str, flags: list[str]) -> str:
    """The one kind of build every version of this comparison runs: official | build
    (or "as given" when every version is an image: spec)."""
    built = [t for t in targets if t.kind != "image"]
    if not built:
        return "as given"
    missing = [t for t in built if not has_official(t)]
    if requested == "official":
        if missing:
            raise BadInput(
                f"--docker-images official: version {missing[0].label!r} is not a release tag, "
                "so it has no official image; use --docker-images build (regtrack's builds of "
                "every version) or auto"
            )
        if flags:
            raise BadInput(
                "--build-flags cannot apply to official images (Docker Hub built them): use "
                "--docker-images build, or leave out --build-flags"
            )
        return "official"
    if requested == "build" or missing or flags:
        return "build"
    return "official" if all(t.source_repo == UPSTREAM for t in built) else "build"


def uses_official(target: Target, kind: str) -> bool:
    """Whether ``target`` runs the official image (then it needs no build of its own)."""
    return kind == "official" and target.kind != "image" and has_official(target)


def built_in_docker(target: Target, kind: str, builder: str | None) -> bool:
    """Whether ``target`` is compiled by ``docker build`` (then it needs no native build)."""
    return bool(builder) and target.kind == "git" and kind == "build"


def assign(
    client: Any,
    targets: list[Target],
    kind: str,
    on_line: Callable[[str], None],
    builder: str | None = None,
    flags: list[str] | None = None,
) -> list[Target]:
    """Every target with its image (and how it was obtained)."""
    return [_assigned(client, t, kind, on_line, builder, flags or []) for t in targets]


def _assigned(
    client: Any,
    target: Target,
    kind: str,
    on_line: Callable[[str], None],
    builder: str | None,
    flags: list[str],
) -> Target:
    build = target.build
    if built_in_docker(target, kind, builder):
        assert builder

        def show(line: str, label: str = target.label) -> None:
            on_line(f"building {label} in {builder}: {line}")

        image, build = image_build.build_image(client, target, builder, flags, show)
        how = f"docker build in {builder}"
    elif target.kind == "image":
        assert target.image
        image = target.image
        engine_images.ensure_image(client, image, on_line)
        how = "as given"
    elif uses_official(target, kind):
        image = engine_images.official_image((target.ref or "").split()[-1])
        engine_images.ensure_image(client, image, on_line)
        how = "official image"
    else:
        if not target.binary or not target.binary_sha256:
            raise BadInput(f"version {target.label!r} has no binary to put in an image")
        on_line(f"importing {target.label} into an image")
        tag = f"{target.kind}-{target.binary_sha256[:16]}"
        engine_images.import_binary(client, Path(target.binary), tag)
        image = f"{engine_images.IMPORTED_REPO}:{tag}"
        how = "imported from regtrack's build"
    identity = engine_images.image_digest(client, image)
    docker = DockerImage(image, how, identity.image_id, identity.repo_digests)
    return replace(target, image=image, build=build, docker=docker)
