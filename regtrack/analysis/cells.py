"""From a run's trials (a LoadedRun's frame) to cells: one target at one point, one metric.

Invalid trials never enter a cell's value while a valid one exists. A cell with no valid
trial still shows the median of its invalid ones, flagged, so the user sees the number and
why it cannot be trusted instead of a silent gap.
"""

from __future__ import annotations

import pandas as pd

from regtrack.analysis.metrics import Metric
from regtrack.core.records import InvalidReason


def _reasons(group: pd.DataFrame) -> list[str]:
    """One line per kind of problem (its code's label: the figures differ trial to trial)."""
    kinds: dict[str, int] = {}
    for reasons in group.loc[~group["valid"], "reasons"]:
        for reason in reasons:
            # Text stored before the codes has no kind but itself.
            kind = reason.text if reason.code is InvalidReason.OTHER else reason.code.label
            kinds[kind] = kinds.get(kind, 0) + 1
    return [f"{kind} ({n}x)" for kind, n in kinds.items()]


def rows_for(frame: pd.DataFrame, metric: Metric) -> pd.DataFrame:
    for mode in metric.modes:
        rows = frame[frame["mode"] == mode]
        if not rows.empty and rows[metric.column].notna().any():
            return rows
    return frame.iloc[0:0]


def cells(frame: pd.DataFrame, metric: Metric) -> pd.DataFrame:
    """One row per (workload, point, target): median of valid trials, counts, spread, and
    the valid values by repetition (what paired intervals are built from)."""
    out = []
    rows = rows_for(frame, metric)
    for (workload, point, target), group in rows.groupby(
        ["workload", "point", "target"], sort=False
    ):
        valid = group[group["valid"]]
        source = valid if not valid.empty else group
        values = source[metric.column].dropna()
        value = float(values.median()) if not values.empty else None
        spread = (
            100.0 * (values.max() - values.min()) / value if value and len(values) > 1 else None
        )
        by_rep = {
            int(r): float(v)
            for r, v in zip(valid["repetition"], valid[metric.column], strict=True)
            if pd.notna(v)
        }
        busy = (
            source["server_cpu_pct"].dropna()
            if "server_cpu_pct" in source
            else pd.Series(dtype=float)
        )
        out.append(
            {
                "workload": workload,
                "point": point,
                "point_order": int(group["point_order"].iloc[0]),
                "target": target,
                "metric": metric.name,
                "value": value,
                "min": float(values.min()) if not values.empty else None,
                "max": float(values.max()) if not values.empty else None,
                "spread_pct": spread,
                "n_valid": len(valid),
                "n_invalid": int(len(group) - len(valid)),
                "trusted": not valid.empty,
                "problems": _reasons(group),
                "by_rep": by_rep,
                # how busy the server was (median share of its CPU): a throughput is the
                # server's capacity only when this is near 100%
                "server_busy_pct": float(busy.median()) if not busy.empty else None,
            }
        )
    return pd.DataFrame(out)
