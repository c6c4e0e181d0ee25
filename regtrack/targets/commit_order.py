"""Measured commits in the order their repository gives them: what a history along commits
is drawn in (analysis.commit_history takes the order from here, and never runs git)."""

from __future__ import annotations

from regtrack.core.errors import RegtrackError
from regtrack.targets.git_command import git
from regtrack.targets.sources import SourceRepo, is_commit


def by_date(_source_repo: str, commits: list[str], dates: dict[str, str]) -> list[str]:
    """``commits`` by commit date (then id): the order where the repository is not here."""
    return sorted(commits, key=lambda c: (dates.get(c) or "", c))


def topological(source_repo: str, commits: list[str], dates: dict[str, str]) -> list[str]:
    """``commits`` oldest first in topological order, from the repository's cached mirror;
    by commit date when the mirror is not on this machine (a database merged elsewhere)."""
    fallback = by_date(source_repo, commits, dates)
    if not all(is_commit(c) for c in commits):
        return fallback  # a stored value that is not a commit id never reaches git
    try:
        mirror = SourceRepo(source_repo).path
    except RegtrackError:
        return fallback
    if not (mirror / "HEAD").is_file():
        return fallback
    argv = ["rev-list", "--topo-order", "--reverse", "--end-of-options", *commits]
    proc = git(["-C", str(mirror), *argv], check=False)
    if proc.returncode != 0:
        return fallback
    wanted = set(commits)
    ordered = [c for c in proc.stdout.split() if c in wanted]
    return ordered if len(ordered) == len(wanted) else fallback
