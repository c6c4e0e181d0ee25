"""One workload point's values against commits: every measured commit of one repository, in
topological order, with the steps located at commits.

Run dates say when something was measured, not which code changed: a branch tracked
commit by commit (ranges A..B, bisections) is read along its history instead. Every run
of a commit is kept (several values at one commit show the noise); the change-point
search runs on the per-commit medians, so a step is reported as "between commit X and
commit Y", the last commit before it and the first after it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from regtrack.analysis import changepoints

SHORT = 7
SERIES = ["workload", "point", "metric", "source_repo", "comparability"]


# How a series' commits are put in order: (source repository, commits, commit dates) ->
# the commits oldest first (targets.commit_order: topological from git, or by date).
Order = Callable[[str, list[str], dict[str, str]], list[str]]


def series(points: pd.DataFrame, order: Order) -> pd.DataFrame:
    """The rows of ``history.points`` that have a commit, with their commit's position in
    its series (``order``), a tick label (short SHA and subject), the % change against the series'
    first commit, and the steps: ``step_pct`` on the first commit after a step, with
    ``step_from`` naming the last commit before it."""
    if points.empty or "commit" not in points:
        return pd.DataFrame()
    rows = points[points["commit"].astype(bool)].copy()
    if rows.empty:
        return rows
    rows["position"], rows["tick"], rows["vs_first_pct"] = 0, "", 0.0
    rows["step_pct"], rows["step_from"] = None, None
    for _, group in rows.groupby(SERIES, sort=False):
        commits = list(dict.fromkeys(group["commit"]))
        dates = dict(zip(group["commit"], group["commit_date"], strict=True))
        ordered = order(group["source_repo"].iloc[0], commits, dates)
        position = {c: i for i, c in enumerate(ordered)}
        rows.loc[group.index, "position"] = group["commit"].map(position)
        rows.loc[group.index, "tick"] = [
            f"{c[:SHORT]} {s}"[:48].rstrip()
            for c, s in zip(group["commit"], group["subject"], strict=True)
        ]
        medians = group.groupby("commit")["value"].median()
        levels = [float(medians[c]) for c in ordered]
        rows.loc[group.index, "vs_first_pct"] = 100.0 * (group["value"] / levels[0] - 1.0)
        for cp in changepoints.detect(levels):
            after, before = ordered[cp.index], ordered[cp.index - 1]
            first = group.index[group["commit"] == after]
            rows.loc[first, "step_pct"] = cp.change_pct
            rows.loc[first, "step_from"] = before
    return rows.sort_values([*SERIES, "position", "run_id"]).reset_index(drop=True)


@dataclass(frozen=True)
class CommitStep:
    """A step of one series along commits: between which commits, and how large (the
    per-commit medians' change)."""

    workload: str
    point: str
    metric: str
    source_repo: str
    comparability: str
    before: str  # the last commit before the step
    after: str  # the first commit after it
    subject: str  # ``after``'s subject line
    change_pct: float

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def steps(rows: pd.DataFrame) -> list[CommitStep]:
    """Each step once: between which commits, and how large (per-commit medians)."""
    if rows.empty:
        return []
    found = rows[rows["step_pct"].notna()].drop_duplicates([*SERIES, "commit"])
    return [
        CommitStep(
            **{k: r[k] for k in SERIES},
            before=r["step_from"],
            after=r["commit"],
            subject=r["subject"],
            change_pct=float(r["step_pct"]),
        )
        for _, r in found.iterrows()
    ]
