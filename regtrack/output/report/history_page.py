"""The history pages: one per (workload, point, metric) that some run measured, its
values over runs and along commits, and the change points found in them."""

from __future__ import annotations

import hashlib
from typing import Any

import pandas as pd

from regtrack.analysis import metrics
from regtrack.analysis.commit_history import CommitStep
from regtrack.output.report import figures
from regtrack.output.report.pages import SLUG_RE, run_file


def history_file(workload: str, point: str, metric: str) -> str:
    key = hashlib.sha256(f"{workload}\0{point}\0{metric}".encode()).hexdigest()[:6]
    slug = SLUG_RE.sub("_", f"{workload}-{point}-{metric}")[:80]
    return f"history-{slug}-{key}.html"


VALUES_SHOWN = 200


def _trace(series: str, server: str, setup: str) -> str:
    """A history line's name when several setups share a page: the spec, what its servers
    ran with (the usual difference: AOF or not), and the setup's digest."""
    shown = f"{series} · {server}" if server else series
    return f"{shown} (setup {setup[:8]})"


def _shown(frame: pd.DataFrame, setups: int) -> pd.DataFrame:
    """``frame`` with what a point is shown by: its run page, its version, its line."""
    frame = frame.copy()
    frame["url"] = frame["run_id"].map(run_file)
    frame["version"] = [
        f"{label} {version}".strip() + (f" @ {commit[:10]}" if commit else "")
        for label, version, commit in zip(
            frame["label"], frame["redis_version"], frame["commit"], strict=True
        )
    ]
    servers = frame["server"].fillna("") if "server" in frame else pd.Series("", frame.index)
    frame["trace"] = [
        series if setups == 1 else _trace(series, server, setup)
        for series, server, setup in zip(
            frame["series"], servers, frame["comparability"], strict=True
        )
    ]
    return frame


def history_pages(
    frame: pd.DataFrame, by_commit: pd.DataFrame, commit_steps: list[CommitStep]
) -> list[dict[str, Any]]:
    """One page per (workload, point, metric) that some run measured: ``frame`` holds the
    history points with their changes, ``by_commit`` and ``commit_steps`` the same along
    commits (analysis.commit_history)."""
    if frame.empty:
        return []
    setups = frame["comparability"].nunique()  # one line per series measured alike
    frame = _shown(frame, setups)
    by_commit = by_commit if by_commit.empty else _shown(by_commit, setups)
    pages = []
    for key, group in frame.groupby(["workload", "point", "metric"], sort=True):
        workload, point, metric = key
        unit = metrics.METRIC_BY_NAME[metric].unit
        title = f"{workload} · {point} · {metric.replace('_', ' ')}"
        steps = group[group["change_pct"].notna()]
        commits = (
            by_commit[
                (by_commit["workload"] == workload)
                & (by_commit["point"] == point)
                & (by_commit["metric"] == metric)
            ]
            if not by_commit.empty
            else by_commit
        )
        several = not commits.empty and commits["commit"].nunique() > 1
        pages.append(
            {
                "by_commit": figures.history_by_commit(commits, f"{title} · by commit", unit)
                if several
                else None,
                "commit_steps": [
                    s for s in commit_steps if several and (s.workload, s.point, s.metric) == key
                ],
                "file": history_file(workload, point, metric),
                "workload": workload,
                "point": point,
                "metric": metric,
                "unit": unit,
                "title": title,
                "figure": figures.history(group, title, unit),
                "rows": group.sort_values(["created_at", "run_id"], ascending=False)
                .head(VALUES_SHOWN)
                .to_dict("records"),
                "rows_total": len(group),
                "changes": steps.to_dict("records"),
            }
        )
    return pages
