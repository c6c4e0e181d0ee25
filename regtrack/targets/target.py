"""A resolved version as a typed, frozen record: what every number is traced back to.

A Target is made by targets/versions.py (resolving a spec) and replaced, never changed, as
it is built (targets/build.py), put in an image (targets/images.py) or given its server
settings (bench/server_settings.py). It is stored as JSON in the run's plan and in the
targets table (``to_json``: the layout regtrack always stored, its facts under
``details``) and read back by ``from_json``, which accepts what older regtrack stored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self


def text_or_none(value: Any) -> str | None:
    """A stored fact as text, None where it was not recorded."""
    return None if value is None else str(value)


def _drop_none(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


@dataclass(frozen=True)
class RangePlace:
    """Where a commit of a range A..B sits: its place among the range's commits."""

    spec: str
    position: int
    commits: int
    measured: int

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class BuildFacts:
    """How regtrack built a version: natively (targets/build.Build) or by ``docker
    build`` in a builder image (targets/image_build.py); what instruction counts depend
    on (the compiler and make variables) is compared before counts are (comparability)."""

    # None: a build stored before its make variables were (never equal to another).
    flags: tuple[str, ...] | None = None
    compiler: str | None = None
    # MAKE_ENVIRONMENT variables make took from the environment.
    environment: Mapping[str, str] = field(default_factory=dict)
    commit: str | None = None
    build_key: str | None = None
    directory: str | None = None
    server: str | None = None
    benchmark: str | None = None  # the redis-benchmark the build made
    seconds: float | None = None
    server_version: str | None = None
    log: str | None = None
    cached: bool | None = None
    how: str | None = None  # "docker build" for a build in a builder image
    builder_image: str | None = None
    builder_image_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["flags"] = list(self.flags) if self.flags is not None else None
        data["environment"] = dict(self.environment) if self.environment else None
        return _drop_none(data)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        names = {f.name for f in dataclasses.fields(cls)}
        known = {k: v for k, v in data.items() if k in names}
        if known.get("flags") is not None:
            known["flags"] = tuple(str(f) for f in known["flags"])
        known["environment"] = {str(k): str(v) for k, v in (data.get("environment") or {}).items()}
        return cls(**known)


@dataclass(frozen=True)
class DockerImage:
    """The container image a version runs in, how it was obtained, and its identity."""

    image: str
    how: str = ""
    image_id: str | None = None
    repo_digests: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"image": self.image, "how": self.how}
        if self.image_id is not None:
            data.update(image_id=self.image_id, repo_digests=list(self.repo_digests))
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            image=str(data.get("image") or ""),
            how=str(data.get("how") or ""),
            image_id=text_or_none(data.get("image_id")),
            repo_digests=tuple(str(d) for d in data.get("repo_digests") or ()),
        )


@dataclass(frozen=True)
class Target:
    """A resolved spec: enough to trace any number back to exact code."""

    label: str
    spec: str
    kind: str  # bin | src | git | image
    binary: str | None = None
    binary_sha256: str | None = None
    commit: str | None = None
    ref: str | None = None
    source_repo: str | None = None
    image: str | None = None
    resolved_path: str | None = None  # bin: the file the path given links to
    tree: str | None = None  # src: the source tree
    source_version: str | None = None  # REDIS_VERSION of the commit's src/version.h
    commit_date: str | None = None
    subject: str | None = None
    author: str | None = None
    range: RangePlace | None = None  # a commit of a range A..B
    build: BuildFacts | None = None  # None: regtrack did not build it
    build_failed: str | None = None  # a range's commit that did not build: why
    docker: DockerImage | None = None  # --runtime docker: its image
    # The server settings this version runs with (bench/server_settings.py); None: the
    # workload's, as planned.
    server_config: Mapping[str, str] | None = None

    DETAILS = (
        "resolved_path", "tree", "source_version", "commit_date", "subject", "author",
        "range", "build", "build_failed", "docker", "server_config",
    )  # fmt: skip

    def details_json(self) -> dict[str, Any]:
        """The version's facts as the targets table and the plan store them (``details``)."""
        out: dict[str, Any] = {}
        for name in self.DETAILS:
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, RangePlace | BuildFacts | DockerImage):
                value = value.to_json()
            elif name == "server_config":
                value = dict(value)
            out[name] = value
        return out

    def to_json(self) -> dict[str, Any]:
        head = {
            name: getattr(self, name)
            for name in (
                "label", "spec", "kind", "binary", "binary_sha256", "commit", "ref",
                "source_repo", "image",
            )
        }  # fmt: skip
        return {**head, "details": self.details_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """A target as any regtrack stored it (facts it did not record stay None)."""
        details = data.get("details") or {}
        build, docker, place = details.get("build"), details.get("docker"), details.get("range")
        server_config = details.get("server_config")
        return cls(
            label=str(data["label"]),
            spec=str(data["spec"]),
            kind=str(data.get("kind") or ""),
            binary=text_or_none(data.get("binary")),
            binary_sha256=text_or_none(data.get("binary_sha256")),
            commit=text_or_none(data.get("commit")),
            ref=text_or_none(data.get("ref")),
            source_repo=text_or_none(data.get("source_repo")),
            image=text_or_none(data.get("image")),
            resolved_path=text_or_none(details.get("resolved_path")),
            tree=text_or_none(details.get("tree")),
            source_version=text_or_none(details.get("source_version")),
            commit_date=text_or_none(details.get("commit_date")),
            subject=text_or_none(details.get("subject")),
            author=text_or_none(details.get("author")),
            range=RangePlace(**place) if isinstance(place, Mapping) else None,
            build=BuildFacts.from_json(build) if isinstance(build, Mapping) else None,
            build_failed=text_or_none(details.get("build_failed")),
            docker=DockerImage.from_json(docker) if isinstance(docker, Mapping) else None,
            server_config=(
                {str(k): str(v) for k, v in server_config.items()}
                if isinstance(server_config, Mapping)
                else None
            ),
        )
