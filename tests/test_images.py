"""--runtime docker: one kind of build for every version of a comparison (images.decide)."""

from __future__ import annotations

import pytest

from regtrack.core.errors import BadInput
from regtrack.targets import images
from regtrack.targets.sources import UPSTREAM
from regtrack.targets.versions import Target


def _tag(version: str, repo: str = UPSTREAM) -> Target:
    return Target(version, version, "git", commit="a" * 40, ref=f"tag {version}", source_repo=repo)


COMMIT = Target("fix", "fix", "git", commit="b" * 40, ref="branch fix", source_repo=UPSTREAM)
IMAGE = Target("mine", "image:me/redis:1", "image", image="me/redis:1")


def test_release_tags_alone_run_the_official_images():
    assert images.decide([_tag("7.0.15"), _tag("8.0.6")], "auto", []) == "official"
    assert images.decide([_tag("7.0.15"), IMAGE], "auto", []) == "official"
    assert images.decide([IMAGE], "auto", []) == "as given"


def test_a_tag_compared_with_a_commit_runs_regtracks_build_on_both_sides():
    targets = [_tag("7.0.15"), COMMIT]
    kind = images.decide(targets, "auto", [])
    assert kind == "build"
    assert not any(images.uses_official(t, kind) for t in targets)


def test_a_mirrors_tags_are_built_unless_official_is_asked_for():
    mirror = [_tag("7.0.15", "/srv/mirror"), _tag("8.0.6", "/srv/mirror")]
    assert images.decide(mirror, "auto", []) == "build"
    assert images.decide(mirror, "official", []) == "official"


def test_build_flags_never_silently_skip_official_images():
    assert images.decide([_tag("7.0.15")], "auto", ["MALLOC=libc"]) == "build"
    with pytest.raises(BadInput, match="--build-flags cannot apply to official images"):
        images.decide([_tag("7.0.15")], "official", ["MALLOC=libc"])


def test_official_for_a_version_without_an_official_image_is_refused():
    with pytest.raises(BadInput, match="version 'fix' is not a release tag"):
        images.decide([_tag("7.0.15"), COMMIT], "official", [])
    assert images.decide([_tag("7.0.15"), COMMIT], "build", []) == "build"
