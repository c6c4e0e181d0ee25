"""The repository's history: each release's tree committed onto one linear history with
fixed authors, dates and messages (two machines get the same SHAs), upstream's tag and
branch names, and a manifest saying what it was made from."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from regtrack.core.errors import CannotMeasure
from regtrack.targets import git_command
from regtrack.targets.offline.extract import find_tree, read_version, safe_extract
from regtrack.targets.offline.fetch import Downloader
from regtrack.targets.offline.recipes import (
    GIT_IDENT_EMAIL,
    GIT_IDENT_NAME,
    MANIFEST_NAME,
    SCRIPT_ID,
    Product,
    Progress,
    Source,
    recipe_digest,
)


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """An environment isolated from the user's git configuration, with our identity."""
    identity = {
        "GIT_AUTHOR_NAME": GIT_IDENT_NAME,
        "GIT_AUTHOR_EMAIL": GIT_IDENT_EMAIL,
        "GIT_COMMITTER_NAME": GIT_IDENT_NAME,
        "GIT_COMMITTER_EMAIL": GIT_IDENT_EMAIL,
    }
    return git_command.git_env({**identity, **(extra or {})}, isolated=True)


GIT_FLAGS = [
    "-c",
    "core.autocrlf=false",
    "-c",
    "core.safecrlf=false",
    "-c",
    "core.fileMode=true",
    "-c",
    "core.symlinks=true",
    "-c",
    "commit.gpgSign=false",
    "-c",
    "tag.gpgSign=false",
]


def git(
    git_dir: Path | None,
    *args: str,
    what: str,
    env: dict[str, str] | None = None,
    stdin_text: str = "",
) -> str:
    """stdout of ``git GIT_FLAGS [--git-dir=GIT_DIR] ARGS`` (no time limit) in git_env()."""
    location = [f"--git-dir={git_dir}"] if git_dir else []
    argv = [*GIT_FLAGS, *location, *args]
    env = env or git_env()
    return git_command.git(argv, timeout=None, env=env, input=stdin_text, what=what).stdout


def commit_message(product: Product, source: Source, subdir: str) -> str:
    lines = [
        f"{product.title} {source.version} (upstream source via {source.origin_text})",
        "",
    ]
    if source.origin == "pypi":
        lines += [
            f"Source:   PyPI sdist of {source.package}=={source.where}",
            f"File:     {source.filename}",
            f"SHA-256:  {source.sha256}",
            f"Tree:     the {subdir}/ directory of the sdist (the embedded",
            f"          {product.title} source tree), committed as the repo root.",
        ]
    else:
        lines += [
            f"Source:   Debian source package '{source.package}', suite {source.where}",
            f"File:     {source.filename} (upstream orig tarball)",
            f"SHA-256:  {source.sha256}",
            f"Tree:     contents of {subdir}/ in the tarball, committed as the",
            "          repo root. Debian patches (debian.tar.*) NOT applied.",
        ]
    if source.upstream_commit:
        lines.append(f"Upstream: {source.upstream_commit} (tag {source.version})")
    lines.append(f"Repacked: {source.repack_note}" if source.repack_note else "Repacked: no")
    lines += ["", f"Created by {SCRIPT_ID}."]
    return "\n".join(lines) + "\n"


def version_at(git_dir: Path, ref: str, macro: str) -> str:
    try:
        text = git(git_dir, "show", f"{ref}:src/version.h", what=f"read {ref}")
    except CannotMeasure:
        return "?"
    return read_version(text, macro) or "?"


def refs_summary(git_dir: Path, product: Product) -> list[tuple[str, str, str]]:
    out = git(
        git_dir,
        "for-each-ref",
        "--format=%(refname)%09%(objectname)",
        "refs/tags",
        "refs/heads",
        what="list refs",
    )
    rows = []
    for line in out.splitlines():
        ref, sha = line.split("\t")
        short = ref.removeprefix("refs/")
        kind = "tag" if short.startswith("tags/") else "branch"
        name = short.split("/", 1)[1]
        rows.append((f"{kind} {name}", sha, version_at(git_dir, sha, product.version_macro)))

    def key(row: tuple[str, str, str]) -> tuple[int, tuple[int, ...], str]:
        kind, name = row[0].split(" ", 1)
        numbers = tuple(int(p) for p in re.findall(r"\d+", name))
        return (0 if kind == "tag" else 1, numbers or (1 << 30,), name)

    return sorted(rows, key=key)


def manifest_path(dest: Path) -> Path:
    dot_git = dest / ".git"
    return (dot_git if dot_git.is_dir() else dest) / MANIFEST_NAME


def existing_is_complete(dest: Path, product: Product) -> tuple[bool, str]:
    """Is dest a complete repository made by this script from this recipe?"""
    mpath = manifest_path(dest)
    if not mpath.is_file():
        return False, "no manifest (not made by this script)"
    try:
        manifest = json.loads(mpath.read_text())
    except (OSError, ValueError) as exc:
        return False, f"unreadable manifest: {exc}"
    if manifest.get("product") != product.name:
        return False, f"it holds {manifest.get('product')!r}, not {product.name!r}"
    if manifest.get("recipe") != recipe_digest(product):
        return False, "it was made from an older recipe"
    git_dir = mpath.parent
    try:
        out = git(
            git_dir,
            "for-each-ref",
            "--format=%(refname)",
            "refs/tags",
            "refs/heads",
            what="check refs",
        )
    except CannotMeasure as exc:
        return False, str(exc)
    have = set(out.split())
    want = {f"refs/tags/{t}" for t in manifest.get("tags", [])}
    want |= {f"refs/heads/{b}" for b in manifest.get("branches", [])}
    want |= {f"refs/tags/{s.version}" for s in product.sources if not s.optional}
    want.add("refs/heads/unstable")
    missing = sorted(want - have)
    if missing:
        return False, "missing refs: " + ", ".join(missing)
    return True, "complete"


def build_repo(
    product: Product,
    dest: Path,
    work: Path,
    *,
    bare: bool,
    archives: list[Path] | None = None,
    progress: Progress = lambda _message: None,
) -> dict[str, object]:
    """Make the repository in ``dest`` (new or empty) from the archives, downloaded into
    ``work`` when not there yet; return its manifest."""
    downloader = Downloader(work, product.name, archives, progress)
    available: list[tuple[Source, Path]] = []
    skipped: list[str] = []
    for source in product.sources:
        try:
            available.append((source, downloader.fetch(source)))
        except CannotMeasure as exc:
            if not source.optional:
                raise
            progress(f"WARNING: skipping optional {product.name} {source.version}: {exc}")
            skipped.append(source.version)

    git_dir = dest if bare else dest / ".git"
    init = ["init", "-q", "--template=", "--initial-branch=unstable"]
    if bare:
        init.append("--bare")
    git(None, *init, str(dest), what=f"git init {dest}")
    (git_dir / "info").mkdir(exist_ok=True)
    # Store file bytes exactly as shipped: override any in-tree .gitattributes
    # (eol conversion, ident expansion, filters) while adding.
    (git_dir / "info" / "attributes").write_text(
        "* -text -eol -ident -filter -working-tree-encoding\n"
    )

    parent = ""
    commits: dict[str, str] = {}
    extract_root = work / "extract"
    index_file = work / "index.tmp"
    for source, archive in available:
        progress(f"extracting {archive.name}")
        extracted = extract_root / f"{product.name}-{source.version}"
        safe_extract(archive, extracted)
        tree_dir = find_tree(extracted, source)
        found = read_version(
            (tree_dir / "src" / "version.h").read_text(errors="replace"),
            product.version_macro,
        )
        if found != source.version:
            raise CannotMeasure(
                f"{source.filename}: src/version.h says {product.version_macro} "
                f"{found!r}, expected {source.version!r}"
            )
        subdir = tree_dir.relative_to(extracted).as_posix()
        index_file.unlink(missing_ok=True)
        env = git_env(
            {
                "GIT_INDEX_FILE": str(index_file),
                "GIT_AUTHOR_DATE": source.date,
                "GIT_COMMITTER_DATE": source.date,
            }
        )
        what = f"git commit of {product.name} {source.version}"
        git(git_dir, f"--work-tree={tree_dir}", "add", "-f", "-A", ".", what=what, env=env)
        tree = git(git_dir, "write-tree", what=what, env=env).strip()
        argv = ["commit-tree", "--no-gpg-sign", tree]
        if parent:
            argv += ["-p", parent]
        message = commit_message(product, source, subdir)
        commit = git(git_dir, *argv, env=env, stdin_text=message, what=what).strip()
        git(git_dir, "update-ref", f"refs/tags/{source.version}", commit, what=what)
        commits[source.version] = commit
        parent = commit
        shutil.rmtree(extracted)
        progress(f"committed {product.name} {source.version} as {commit}")
    index_file.unlink(missing_ok=True)
    shutil.rmtree(extract_root, ignore_errors=True)

    # Series branches (upstream has e.g. "7.0") at the newest release of each
    # series, and "unstable" at the newest commit overall.
    branches: dict[str, str] = {}
    for source, _archive in available:
        branches[source.series] = commits[source.version]
    branches["unstable"] = parent
    for name, commit in branches.items():
        git(git_dir, "update-ref", f"refs/heads/{name}", commit, what="create branches")
    git(git_dir, "symbolic-ref", "HEAD", "refs/heads/unstable", what="set HEAD")
    git(git_dir, "repack", "-a", "-d", "-q", what="git repack")
    if not bare:
        git(None, "-C", str(dest), "reset", "-q", "--hard", "unstable", what="check out unstable")
    manifest = {
        "product": product.name,
        "recipe": recipe_digest(product),
        "created_by": SCRIPT_ID,
        "tags": sorted(commits),
        "branches": sorted(branches),
        "skipped_optional": skipped,
        "sources": [
            {
                "version": s.version,
                "origin": s.origin_text,
                "package": s.package,
                "file": s.filename,
                "sha256": s.sha256,
                "debian_version": downloader.debian_versions.get(s.version, ""),
                "repacked": s.repack_note,
                "commit": commits[s.version],
            }
            for s, _a in available
        ],
    }
    (git_dir / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest
