"""Plotly figures of the report pages, as JSON-ready dicts (the page loads plotly.js once).

Bars on a point are the range of the valid repetitions (min to max): the spread a reader
must see before believing a difference between two lines.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import plotly.graph_objects as go

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b")


def _as_dict(fig: go.Figure) -> dict[str, Any]:
    # plotly's own encoder turns numpy/pandas values into plain JSON.
    return json.loads(fig.to_json())


GRID = {"gridcolor": "#e5e7eb", "zerolinecolor": "#d1d5db", "linecolor": "#9ca3af"}


def _layout(fig: go.Figure, title: str, x_title: str, y_title: str) -> None:
    # Plain colours instead of a named template: resolving "plotly_white" costs ~40 ms per
    # figure and embeds ~10 kB of template in every figure of the page.
    fig.update_layout(
        title={"text": title, "x": 0.0, "xanchor": "left"},
        xaxis={"title": {"text": x_title}, "type": "category", **GRID},
        yaxis={"title": {"text": y_title}, "rangemode": "tozero", **GRID},
        margin={"l": 70, "r": 20, "t": 50, "b": 50},
        height=360,
        legend={"orientation": "h", "y": -0.2},
        plot_bgcolor="white",
        paper_bgcolor="white",
    )


def _measured(mine: pd.DataFrame) -> pd.Series:
    """The cell's value where a valid trial backs it, else None: a gap in the line."""
    return mine["value"].astype(float).where(mine["trusted"].astype(bool))


def _unmeasured(fig: go.Figure, mine: pd.DataFrame, name: str, color: str, unit: str) -> None:
    """Cells with no valid trial, drawn apart: a hollow cross at the invalid trials'
    median, named as such, never joined to the measured line."""
    bad = mine[~mine["trusted"].astype(bool) & mine["value"].notna()]
    if bad.empty:
        return
    fig.add_trace(
        go.Scatter(
            x=bad["point"].tolist(),
            y=bad["value"].astype(float).tolist(),
            name=f"{name}: no valid trial",
            mode="markers",
            marker={"symbol": "x-open", "size": 12, "color": color},
            text=["; ".join(problems) for problems in bad["problems"]],
            hovertemplate=f"%{{x}}: %{{y:,.4g}} {unit}, NO VALID TRIAL: %{{text}}<extra></extra>",
        )
    )


def by_point(cells: pd.DataFrame, title: str, unit: str, targets: list[str]) -> dict[str, Any]:
    """One line per version across the workload points, with min-max bars; a point with
    no valid trial is a separate, labelled marker, not part of the line."""
    fig = go.Figure()
    ordered = cells.sort_values("point_order")
    for i, target in enumerate(targets):
        mine = ordered[ordered["target"] == target]
        if mine.empty:
            continue
        color = PALETTE[i % len(PALETTE)]
        value = _measured(mine)
        fig.add_trace(
            go.Scatter(
                x=mine["point"].tolist(),
                y=value.tolist(),
                name=target,
                mode="lines+markers",
                line={"color": color},
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": (mine["max"].astype(float) - value).fillna(0).tolist(),
                    "arrayminus": (value - mine["min"].astype(float)).fillna(0).tolist(),
                },
                customdata=mine["n_valid"].tolist(),
                hovertemplate=f"%{{x}}: %{{y:,.4g}} {unit} (%{{customdata}} valid)",
            )
        )
        _unmeasured(fig, mine, target, color, unit)
    _layout(fig, title, "workload point", unit)
    return _as_dict(fig)


def latency(p50: pd.DataFrame, p99: pd.DataFrame, targets: list[str]) -> dict[str, Any]:
    """p50 (solid) and p99 (dashed) latency per version across the points."""
    fig = go.Figure()
    for i, target in enumerate(targets):
        color = PALETTE[i % len(PALETTE)]
        for frame, name, dash in ((p50, "p50", "solid"), (p99, "p99", "dash")):
            mine = frame[frame["target"] == target].sort_values("point_order")
            if mine.empty:
                continue
            fig.add_trace(
                go.Scatter(
                    x=mine["point"].tolist(),
                    y=_measured(mine).tolist(),
                    name=f"{target} {name}",
                    mode="lines+markers",
                    line={"color": color, "dash": dash},
                    hovertemplate=f"%{{x}}: %{{y:.3f}} ms ({target} {name})",
                )
            )
            _unmeasured(fig, mine, f"{target} {name}", color, "ms")
    _layout(fig, "Latency p50 and p99", "workload point", "ms")
    return _as_dict(fig)


def history(rows: pd.DataFrame, title: str, unit: str) -> dict[str, Any]:
    """Values over runs, one line per series, change points marked; a click opens the run."""
    fig = go.Figure()
    for i, (name, group) in enumerate(rows.groupby("trace", sort=False)):
        color = PALETTE[i % len(PALETTE)]
        fig.add_trace(
            go.Scatter(
                x=group["created_at"].tolist(),
                y=group["value"].astype(float).tolist(),
                name=str(name),
                mode="lines+markers",
                line={"color": color},
                customdata=group[["url", "run_id", "version"]].values.tolist(),
                hovertemplate="run %{customdata[1]} · %{customdata[2]}<br>%{y:,.4g} "
                + unit
                + "<extra></extra>",
            )
        )
        steps = group[group["change_pct"].notna()]
        if not steps.empty:
            fig.add_trace(
                go.Scatter(
                    x=steps["created_at"].tolist(),
                    y=steps["value"].astype(float).tolist(),
                    name=f"{name}: change point",
                    mode="markers",
                    marker={"symbol": "diamond", "size": 14, "color": "#d62728"},
                    customdata=steps[["url", "run_id", "version"]].values.tolist(),
                    text=[f"{c:+.1f}%" for c in steps["change_pct"].astype(float)],
                    hovertemplate="change point at run %{customdata[1]}: %{text}<extra></extra>",
                )
            )
    _layout(fig, title, "run date", unit)
    fig.update_layout(xaxis={"type": "date"})
    return _as_dict(fig)
