"""`regtrack history` on a terminal: one point's values along commits (or runs), the steps.

Names, labels, subjects and settings are stored text, each shown printable (core/text.py).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from regtrack.analysis.commit_history import CommitStep
from regtrack.core.text import printable

SHORT = 7


def _fmt(value: float) -> str:
    return f"{value:,.1f}" if abs(value) < 1e5 else f"{value:,.0f}"


def _server(group: pd.DataFrame) -> str:
    """What the servers of one series ran with (one setup: one value), as a caption."""
    if "server" not in group or group["server"].isna().all():
        return ""  # rows cached before settings were recorded
    return f" · server: {printable(group['server'].dropna().iloc[0])}"


def _heading(key: tuple[Any, ...], unit: str, group: pd.DataFrame) -> str:
    """A series' first line: workload, point, metric, the series (a source repository or a
    version line), its setup and its servers' settings."""
    workload, point, metric, series, setup = (printable(k) for k in key)
    return (
        f"{workload} · {point} · {metric} ({unit}) · {series} · setup {setup[:8]}{_server(group)}"
    )


def by_commit(rows: pd.DataFrame, steps: list[CommitStep], unit: str) -> str:
    """One line per commit, oldest first: every run's value, % against the first commit."""
    out: list[str] = []
    keys = ["workload", "point", "metric", "source_repo", "comparability"]
    for key, group in rows.groupby(keys, sort=False):
        out.append(_heading(key, unit, group))
        out.append(
            f"  {'#':>3}  {'commit':<12}  {'subject':<40}  {'value':>12}  {'vs first':>9}  runs"
        )
        for position, commit_rows in group.groupby("position", sort=True):
            first = commit_rows.iloc[0]
            values = " ".join(_fmt(float(v)) for v in commit_rows["value"])
            runs = ",".join(str(r) for r in commit_rows["run_id"])
            vs_first = float(commit_rows["vs_first_pct"].median())
            commit, subject = printable(first["commit"][:12]), printable(first["subject"][:40], 40)
            out.append(
                f"  {position:>3}  {commit:<12}  {subject:<40}  "
                f"{values:>12}  {vs_first:>+8.2f}%  {runs}"
            )
        mine = [s for s in steps if tuple(getattr(s, k) for k in keys) == key]
        for s in mine:
            out.append(
                f"  step {s.change_pct:+.2f}% between {printable(s.before[:SHORT])} and "
                f"{printable(s.after[:SHORT])} ({printable(s.subject)})"
            )
        if not mine:
            out.append("  no step found")
        out.append("")
    return "\n".join(out)


def by_run(rows: pd.DataFrame, unit: str) -> str:
    """One line per run and version, oldest first, change points marked."""
    out: list[str] = []
    keys = ["workload", "point", "metric", "series", "comparability"]
    for key, group in rows.groupby(keys, sort=False):
        out.append(_heading(key, unit, group))
        for r in group.itertuples():
            mark = f"  <- change point {r.change_pct:+.2f}%" if pd.notna(r.change_pct) else ""
            label = printable(r.label)
            out.append(
                f"  run {r.run_id:>4}  {printable(r.created_at)}  {label:<16} "
                f"{_fmt(r.value):>12}{mark}"
            )
        out.append("")
    return "\n".join(out)
