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

import pandas as pd

from regtrack.analysis import changepoints
from regtrack.analysis.cells import cells
from regtrack.analysis.metrics import HISTORY_METRICS, METRIC_BY_NAME
from regtrack.results.records import HistoryPoint, LoadedRun
from regtrack.workloads import server_config


def run_points(
    loaded: LoadedRun,
    metrics: tuple[str, ...] = HISTORY_METRICS,
    known: pd.DataFrame | None = None,
) -> list[HistoryPoint]:
    """One run's trusted cells, with what identifies their series (records the report
    keeps between runs). ``known``: the run's cells, if computed."""
    found: list[HistoryPoint] = []
    if loaded.trials.empty:
        return found
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
            found.append(
                HistoryPoint(
                    run_id=run.id,
                    created_at=run.created_at,
                    fingerprint=run.fingerprint,
                    comparability=run.comparability,
                    server=server,
                    series=target.series,
                    source_repo=target.source_repo,
                    label=cell.target,
                    commit=target.commit,
                    subject=target.subject,
                    commit_date=target.commit_date,
                    redis_version=target.redis_version,
                    workload=cell.workload,
                    point=cell.point,
                    point_order=int(cell.point_order),
                    metric=name,
                    value=float(cell.value),
                    min=None if cell.min is None else float(cell.min),
                    max=None if cell.max is None else float(cell.max),
                    n_valid=int(cell.n_valid),
                )
            )
    return found


def as_frame(found: Iterable[HistoryPoint]) -> pd.DataFrame:
    """Points as rows, one column per field (empty: no columns)."""
    return pd.DataFrame([point.to_json() for point in found])


def points(runs: Iterable[LoadedRun], metrics: tuple[str, ...] = HISTORY_METRICS) -> pd.DataFrame:
    """Every trusted cell of ``runs`` (results.loaded.runs), with what identifies its series."""
    found: list[HistoryPoint] = []
    for run in runs:
        found += run_points(run, metrics)
    return with_changes(found)


def with_changes(found: Iterable[HistoryPoint]) -> pd.DataFrame:
    """The points of many runs as one frame in time order, change points marked per series."""
    frame = as_frame(found)
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
