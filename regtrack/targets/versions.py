"""Version specs as the user types them, and the exact targets they resolve to.

Spec grammar (comma separated, each optionally ``label=spec``):
  6.2            newest 6.2.x release tag in the source repository
  7.0.15         a tag          unstable   a branch head      a1b2c3d   a commit (7-40 hex)
  A..B           the first-parent commits after A up to B (git's A..B), one version each,
                 labelled by short SHA; --every / --max-commits thin it, keeping both ends
  bin:PATH       an existing redis-server binary
  src:PATH       a source tree to build
  image:NAME     a container image (docker runtime)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from regtrack.core.digests import sha256_of
from regtrack.core.errors import BadInput
from regtrack.targets.sources import SourceRepo
from regtrack.targets.target import RangePlace, Target

LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
REF_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/+-]{0,199}$")
PREFIXES = ("bin", "src", "image")
SHORT_SHA = 7


@dataclass(frozen=True)
class VersionSpec:
    """One parsed spec: what to run, under which label."""

    label: str
    kind: str  # bin | src | image | git
    value: str
    text: str


def _check_text(item: str) -> None:
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in item):
        raise BadInput(f"version spec {item!r} contains control characters")


def parse_spec(item: str) -> VersionSpec:
    """Parse ``[label=]spec``; refuse anything that is not plainly one of the forms."""
    _check_text(item)
    text = item.strip(" ")
    if not text:
        raise BadInput("empty version spec: give specs like 7.0.15 or bin:/usr/bin/redis-server")
    label: str | None = None
    body = text
    head, sep, rest = text.partition("=")
    if sep and ":" not in head:
        if not LABEL_RE.match(head):
            raise BadInput(
                f"label {head!r} in {text!r} is not valid: use letters, digits, '.', '_', '+', '-' "
                "(at most 64, starting with a letter or digit)"
            )
        label, body = head, rest.strip()
        if not body:
            raise BadInput(f"version spec {text!r} has a label but nothing after '='")
    prefix, colon, value = body.partition(":")
    if colon and prefix in PREFIXES:
        if not value:
            raise BadInput(f"version spec {text!r}: nothing after '{prefix}:'")
        return VersionSpec(label=label or body, kind=prefix, value=value, text=text)
    if colon:
        raise BadInput(
            f"version spec {text!r}: unknown prefix {prefix!r}; use bin:, src: or image:, "
            "or a tag, branch or commit"
        )
    if ".." in body and "..." not in body:
        return _parse_range(text, label, body)
    if not _is_ref(body):
        raise BadInput(
            f"version spec {body!r} is not a tag, branch or commit name "
            "(letters, digits, '.', '_', '-', '/' only)"
        )
    return VersionSpec(label=label or body, kind="git", value=body, text=text)


def _is_ref(name: str) -> bool:
    return bool(REF_RE.match(name)) and ".." not in name and not name.endswith((".", "/", ".lock"))


def _parse_range(text: str, label: str | None, body: str) -> VersionSpec:
    """``A..B``: both ends tags, branches or commits; no label (each commit gets its own)."""
    base, _, tip = body.partition("..")
    if not _is_ref(base) or not _is_ref(tip):
        raise BadInput(
            f"version range {body!r}: give two tags, branches or commits, like 7.0.0..7.0.15"
        )
    if label:
        raise BadInput(
            f"version range {text!r}: a range is one version per commit, each labelled by its "
            "short SHA; leave out the label"
        )
    return VersionSpec(label=body, kind="range", value=body, text=text)


def thin(commits: list[str], every: int | None = None, most: int | None = None) -> list[str]:
    """Every ``every``-th commit and at most ``most`` of them, evenly spread; the first and
    the last are always kept, so a range's ends are always measured."""
    picked = list(commits)
    if every and every > 1 and picked:
        picked = picked[::every] + ([] if (len(picked) - 1) % every == 0 else [picked[-1]])
    if most and len(picked) > most:
        n = len(picked)
        picked = [picked[i] for i in sorted({round(k * (n - 1) / (most - 1)) for k in range(most)})]
    return picked


def parse_specs(text: str) -> list[VersionSpec]:
    """Parse the comma-separated --versions value; labels must be unique."""
    specs = [parse_spec(item) for item in text.split(",") if item.strip()]
    if not specs:
        raise BadInput("no versions given: use --versions 7.0.15,unstable or bin:/path")
    seen: dict[str, str] = {}
    for spec in specs:
        if spec.label in seen:
            raise BadInput(
                f"label {spec.label!r} is used twice ({seen[spec.label]!r} and {spec.text!r}): "
                "give each version its own label, e.g. a=bin:/path,b=bin:/path"
            )
        seen[spec.label] = spec.text
    return specs


def resolve_binary(spec: VersionSpec) -> Target:
    """bin:PATH: the file must exist and be executable; it is fingerprinted by sha256."""
    path = Path(spec.value).expanduser()
    if not path.exists():
        raise BadInput(f"version {spec.text!r}: {path} does not exist")
    if not path.is_file() or not os.access(path, os.X_OK):
        raise BadInput(f"version {spec.text!r}: {path} is not an executable file")
    # Run it by the name given, not the symlink's target: Debian's redis-server links to
    # redis-check-rdb, and Redis picks its mode from argv[0].
    resolved = path.resolve()
    return Target(
        label=spec.label,
        spec=spec.text,
        kind="bin",
        binary=str(path.absolute()),
        binary_sha256=sha256_of(resolved),
        resolved_path=str(resolved),
    )


def resolve_git(spec: VersionSpec, repo: SourceRepo) -> Target:
    found = repo.resolve(spec.value)
    return Target(
        label=spec.label,
        spec=spec.text,
        kind="git",
        commit=found.commit,
        ref=f"{found.ref_kind} {found.ref}",
        source_repo=repo.location,
        source_version=found.version_h,
        commit_date=found.date,
        subject=found.subject,
    )


def resolve_tree(spec: VersionSpec) -> Target:
    path = Path(spec.value).expanduser()
    if not path.is_dir():
        raise BadInput(f"version {spec.text!r}: {path} is not a directory")
    if not (path / "src").is_dir() or not (path / "Makefile").is_file():
        raise BadInput(f"version {spec.text!r}: {path} is not a Redis source tree (no src/)")
    return Target(label=spec.label, spec=spec.text, kind="src", tree=str(path.resolve()))


def resolve_range(
    spec: VersionSpec, repo: SourceRepo, every: int | None, most: int | None
) -> list[Target]:
    """``A..B`` as one git target per first-parent commit (thinned), oldest first."""
    base_ref, _, tip_ref = spec.value.partition("..")
    base, tip = repo.resolve(base_ref), repo.resolve(tip_ref)
    commits = repo.first_parent(base.commit, tip.commit)
    if not commits:
        raise BadInput(
            f"version range {spec.value!r} holds no commits: {base_ref} must be an older "
            f"commit on {tip_ref}'s first-parent line"
        )
    picked = thin(commits, every, most)
    targets = []
    for commit in picked:
        facts = repo.describe(commit)
        targets.append(
            Target(
                label=commit[:SHORT_SHA],
                spec=spec.text,
                kind="git",
                commit=commit,
                ref=f"range {spec.value}",
                source_repo=repo.location,
                source_version=repo.version_of(commit),
                commit_date=facts["commit_date"],
                subject=facts["subject"],
                author=facts["author"],
                range=RangePlace(spec.value, commits.index(commit), len(commits), len(picked)),
            )
        )
    return targets


def resolve(
    specs: list[VersionSpec],
    source_repo: str | None = None,
    cache: Path | None = None,
    every: int | None = None,
    most: int | None = None,
) -> list[Target]:
    """Resolve every spec before anything is built or measured, so a typo fails at once.

    A range (A..B) becomes one target per commit, thinned by ``every`` / ``most``."""
    repo: SourceRepo | None = None
    targets = []
    for spec in specs:
        if spec.kind == "bin":
            targets.append(resolve_binary(spec))
        elif spec.kind == "src":
            targets.append(resolve_tree(spec))
        elif spec.kind in ("git", "range"):
            repo = repo or SourceRepo(source_repo, cache)
            if spec.kind == "git":
                targets.append(resolve_git(spec, repo))
            else:
                targets.extend(resolve_range(spec, repo, every, most))
        else:
            targets.append(Target(label=spec.label, spec=spec.text, kind="image", image=spec.value))
    labels = [t.label for t in targets]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise BadInput(
            f"version {twice[0]!r} is given twice (a range's commits are labelled by short "
            "SHA): give each version once"
        )
    return targets
