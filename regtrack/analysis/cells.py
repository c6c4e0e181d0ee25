"""From a run's trials (a LoadedRun's frame) to cells: one target at one point, one metric.

Invalid trials never enter a cell's value while a valid one exists. A cell with no valid
trial still shows the median of its invalid ones, flagged, so the user sees the number and
why it cannot be trusted instead of a silent gap.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping

import pandas as pd

from regtrack.analysis.metrics import Metric
from regtrack.core.records import InvalidReason


def _reasons(invalid: list[tuple]) -> list[str]:
    """One line per kind of problem of the invalid trials' reasons (its code's label: the
    figures differ trial to trial)."""
    kinds: dict[str, int] = {}
    for reasons in invalid:
        for reason in reasons:
            # Text stored before the codes has no kind but itself.
            kind = reason.text if reason.code is InvalidReason.OTHER else reason.code.label
            kinds[kind] = kinds.get(kind, 0) + 1
    return [f"{kind} ({n}x)" for kind, n in kinds.items()]


def by_mode(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The frame's trials split by mode once (a comparison reads each mode's for every
    metric: a boolean mask over every column each time cost more than the analysis)."""
    return {str(mode): part for mode, part in frame.groupby("mode", sort=False)}


def rows_for(modes: Mapping[str, pd.DataFrame], metric: Metric) -> pd.DataFrame:
    """The trials ``metric`` is read from: those of its first mode that measured it."""
    for mode in metric.modes:
        rows = modes.get(mode)
        if rows is not None and not rows.empty and rows[metric.column].notna().any():
            return rows
    return _EMPTY


_EMPTY = pd.DataFrame()


def cells(frame: pd.DataFrame | Mapping[str, pd.DataFrame], metric: Metric) -> pd.DataFrame:
    """One row per (workload, point, target): median of valid trials, counts, spread, and
    the valid values by repetition (what paired intervals are built from).

    Plain Python over the columns, not a groupby: a run's frame is tens to thousands of
    rows, and a report or a bisection asks for thousands of these tables, where pandas'
    per-group overhead was most of the time."""
    rows = rows_for(by_mode(frame) if isinstance(frame, pd.DataFrame) else frame, metric)
    if rows.empty:
        return pd.DataFrame([])
    workload, point, target = (rows[c].tolist() for c in ("workload", "point", "target"))
    valid, repetition = rows["valid"].tolist(), rows["repetition"].tolist()
    order, reasons = rows["point_order"].tolist(), rows["reasons"].tolist()
    values = rows[metric.column].astype("float64").tolist()
    busy = (
        rows["server_cpu_pct"].astype("float64").tolist()
        if "server_cpu_pct" in rows
        else [math.nan] * len(rows)
    )
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, key in enumerate(zip(workload, point, target, strict=True)):
        groups.setdefault(key, []).append(i)
    out = []
    for (w, p, t), members in groups.items():
        good = [i for i in members if valid[i]]
        source = good or members
        measured = [values[i] for i in source if not math.isnan(values[i])]
        value = statistics.median(measured) if measured else None
        shares = [busy[i] for i in source if not math.isnan(busy[i])]
        out.append(
            {
                "workload": w,
                "point": p,
                "point_order": int(order[members[0]]),
                "target": t,
                "metric": metric.name,
                "value": value,
                "min": min(measured) if measured else None,
                "max": max(measured) if measured else None,
                "spread_pct": 100.0 * (max(measured) - min(measured)) / value
                if value and len(measured) > 1
                else None,
                "n_valid": len(good),
                "n_invalid": len(members) - len(good),
                "trusted": bool(good),
                "problems": _reasons([reasons[i] for i in members if not valid[i]]),
                "by_rep": {
                    int(repetition[i]): values[i] for i in good if not math.isnan(values[i])
                },
                # how busy the server was (median share of its CPU): a throughput is the
                # server's capacity only when this is near 100%
                "server_busy_pct": statistics.median(shares) if shares else None,
            }
        )
    return pd.DataFrame(out)
