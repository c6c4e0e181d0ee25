"""One workload point's values over many runs: the data behind the history pages.

A series is one version spec (a branch such as ``unstable``, a tag, a binary path), from
one source repository, measured alike (one comparability key: machine, runtime, CPUs,
load generator, workload settings): values measured differently are never drawn as one
line, nor searched for change points together, because their difference is the setup's.
Each run contributes the cell value of ``analysis.cells.cells`` (median of valid trials), so a
history point is the same number as that run's ``regtrack compare`` shows.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

from regtrack.analysis import changepoints
from regtrack.analysis.cells import cells
from regtrack.analysis.metrics import HISTORY_METRICS, METRIC_BY_NAME
from regtrack.results.records import LoadedRun
from regtrack.workloads import server_config


def run_points(
    loaded: LoadedRun,
    metrics: tuple[str, ...] = HISTORY_METRICS,
    known: pd.DataFrame | None = None,
) -> list[dict[str, Any]]:
    """One run's trusted cells, with what identifies their series (plain JSON values, so
    the report can keep them between runs). ``known``: the run's cells, if computed."""
    rows: list[dict[str, Any]] = []
    if loaded.trials.empty:
        return rows
    run = loaded.run
    server = server_config.caption(
        run.server, run.server_data.to_json() if run.server_data else None
    ).removeprefix("server: ")
    for name in metrics:
        if known is not None:
            run_cells = known[known["metric"] == name]
        else:
            run_cells = cells(loaded.trials, METRIC_BY_NAME[name])
        for cell in run_cells.itertuples():
            if not cell.trusted or cell.value is None:
                continue
            target = run.target(cell.target)
            rows.append(
                {
                    "run_id": run.id,
                    "created_at": run.created_at,
                    "fingerprint": run.fingerprint,
                    "comparability": run.comparability,
                    "server": server,  # what the servers ran with, to tell series apart
                    "series": target.series,
                    "source_repo": target.source_repo,
                    "label": cell.target,
                    "commit": target.commit,
                    "subject": target.subject,
                    "commit_date": target.commit_date,
                    "redis_version": target.redis_version,
                    "workload": cell.workload,
                    "point": cell.point,
                    "point_order": int(cell.point_order),
                    "metric": name,
                    "value": float(cell.value),
                    "min": None if cell.min is None else float(cell.min),
                    "max": None if cell.max is None else float(cell.max),
                    "n_valid": int(cell.n_valid),
                }
            )
    return rows


def points(runs: Iterable[LoadedRun], metrics: tuple[str, ...] = HISTORY_METRICS) -> pd.DataFrame:
    """Every trusted cell of ``runs`` (results.loaded.runs), with what identifies its series."""
    rows: list[dict[str, Any]] = []
    for run in runs:
        rows += run_points(run, metrics)
    return with_changes(rows)


def with_changes(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The rows of many runs as one frame in time order, change points marked per series."""
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame = frame.sort_values(["created_at", "run_id"]).reset_index(drop=True)
    frame["change_pct"] = None
    frame["step_before"] = None
    frame["step_after"] = None
    keys = ["workload", "point", "metric", "series", "source_repo", "comparability"]
    for _, group in frame.groupby(keys, sort=False):
        for cp in changepoints.detect(group["value"].tolist()):
            row = group.index[cp.index]
            frame.at[row, "change_pct"] = cp.change_pct
            frame.at[row, "step_before"] = cp.before
            frame.at[row, "step_after"] = cp.after
    return frame
