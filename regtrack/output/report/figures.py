"""Plotly figures of the report pages, as JSON-ready dicts (the page loads plotly.js once).

Bars on a point are the range of the valid repetitions (min to max): the spread a reader
must see before believing a difference between two lines.

plotly.js reads a few HTML tags in every text it draws (titles, names, axis labels, hover
text: ``<a href>`` makes a link), and labels, points and subjects are a pull request's
text: each goes in as text (``shown``: ``<`` as ``&lt;``, which plotly draws as ``<``).
The page embeds figures with ``tojson``, which escapes ``<``, so a ``</script>`` in a
label cannot end the script (render.py).
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b")


def shown(value: Any) -> Any:
    """A value plotly draws as text: a string with its HTML characters escaped, lists
    and tuples item by item, anything else (a number) as it is."""
    if isinstance(value, str):
        return html.escape(value, quote=False)
    if isinstance(value, list | tuple):
        return [shown(v) for v in value]
    return value


def _texts(values: Iterable[Any]) -> list[Any]:
    return [shown(v) for v in values]


def _as_dict(fig: go.Figure) -> dict[str, Any]:
    # plotly's own encoder turns numpy/pandas values into plain JSON.
    return json.loads(fig.to_json())


def _with_traces(fig: go.Figure, traces: list[dict[str, Any]]) -> dict[str, Any]:
    """A figure whose traces are plain dicts: a history of 1,000 runs spends ~0.1 s per
    figure in plotly's validation of go.Scatter lists, and the end-of-run report draws a
    few dozen such figures. The layout still goes through plotly (it is small)."""
    figure = _as_dict(fig)
    figure["data"] = json.loads(pio.json.to_json_plotly(traces))
    return figure


GRID = {"gridcolor": "#e5e7eb", "zerolinecolor": "#d1d5db", "linecolor": "#9ca3af"}


def _layout(fig: go.Figure, title: str, x_title: str, y_title: str) -> None:
    # Plain colours instead of a named template: resolving "plotly_white" costs ~40 ms per
    # figure and embeds ~10 kB of template in every figure of the page.
    fig.update_layout(
        title={"text": shown(title), "x": 0.0, "xanchor": "left"},
        xaxis={"title": {"text": shown(x_title)}, "type": "category", **GRID},
        yaxis={"title": {"text": shown(y_title)}, "rangemode": "tozero", **GRID},
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
            x=_texts(bad["point"]),
            y=bad["value"].astype(float).tolist(),
            name=shown(f"{name}: no valid trial"),
            mode="markers",
            marker={"symbol": "x-open", "size": 12, "color": color},
            text=[shown("; ".join(problems)) for problems in bad["problems"]],
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
                x=_texts(mine["point"]),
                y=value.tolist(),
                name=shown(target),
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
                    x=_texts(mine["point"]),
                    y=_measured(mine).tolist(),
                    name=shown(f"{target} {name}"),
                    mode="lines+markers",
                    line={"color": color, "dash": dash},
                    hovertemplate=f"%{{x}}: %{{y:.3f}} ms ({shown(target)} {name})",
                )
            )
            _unmeasured(fig, mine, f"{target} {name}", color, "ms")
    _layout(fig, "Latency p50 and p99", "workload point", "ms")
    return _as_dict(fig)


def _series(
    rows: pd.DataFrame,
    x: str,
    points: tuple[list[str], str],
    steps: tuple[str, list[str], str],
) -> list[dict[str, Any]]:
    """One line per series and its steps as red diamonds, for both history charts.

    ``points`` is (customdata columns, hover template) of a point; ``steps`` is (the column
    that marks a step, customdata columns, hover template) of a step, whose text is
    ``step_text`` when the rows carry one, else the step's % change.
    """
    columns, hover = points
    marks, step_columns, step_hover = steps
    traces: list[dict[str, Any]] = []
    for i, (name, group) in enumerate(rows.groupby("trace", sort=False)):
        traces.append(
            {
                "type": "scatter",
                "x": group[x].tolist(),
                "y": group["value"].astype(float).tolist(),
                "name": shown(str(name)),
                "mode": "lines+markers",
                "line": {"color": PALETTE[i % len(PALETTE)]},
                "customdata": _texts(group[columns].values.tolist()),
                "hovertemplate": hover,
            }
        )
        found = group[group[marks].notna()]
        if "commit" in found:
            found = found.drop_duplicates("commit")
        if found.empty:
            continue
        if "step_text" in found:
            text = found["step_text"].tolist()
        else:
            text = [f"{c:+.1f}%" for c in found[marks].astype(float)]
        traces.append(
            {
                "type": "scatter",
                "x": found[x].tolist(),
                "y": found["value"].astype(float).tolist(),
                "name": shown(f"{name}: step"),
                "mode": "markers",
                "marker": {"symbol": "diamond", "size": 14, "color": "#d62728"},
                "customdata": _texts(found[step_columns].values.tolist()),
                "text": _texts(text),
                "hovertemplate": step_hover,
            }
        )
    return traces


def history(rows: pd.DataFrame, title: str, unit: str) -> dict[str, Any]:
    """Values over runs, one line per series, change points marked; a click opens the run."""
    traces = _series(
        rows,
        "created_at",
        (
            ["url", "run_id", "version"],
            f"run %{{customdata[1]}} · %{{customdata[2]}}<br>%{{y:,.4g}} {unit}<extra></extra>",
        ),
        (
            "change_pct",
            ["url", "run_id", "version"],
            "change point at run %{customdata[1]}: %{text}<extra></extra>",
        ),
    )
    fig = go.Figure()
    _layout(fig, title, "run date", unit)
    fig.update_layout(xaxis={"type": "date"}, yaxis={"rangemode": "normal"})  # fit the data
    return _with_traces(fig, traces)


def history_by_commit(rows: pd.DataFrame, title: str, unit: str) -> dict[str, Any]:
    """Values against commits in topological order (short SHA and subject on the axis),
    every run of a commit shown, steps marked at the first commit after them."""
    rows = rows.copy()
    rows["step_text"] = [
        None if pd.isna(c) else f"step {c:+.1f}% between {str(b)[:7]} and {str(a)[:7]}"
        for c, b, a in zip(rows["step_pct"], rows["step_from"], rows["commit"], strict=True)
    ]
    traces = _series(
        rows,
        "position",
        (
            ["url", "run_id", "tick", "vs_first_pct"],
            f"%{{customdata[2]}} · run %{{customdata[1]}}<br>%{{y:,.4g}} {unit}"
            " (%{customdata[3]:+.2f}% vs first)<extra></extra>",
        ),
        ("step_pct", ["url", "run_id", "tick"], "%{text}<extra></extra>"),
    )
    ticks = rows.drop_duplicates("position").sort_values("position")
    fig = go.Figure()
    _layout(fig, title, "commit (topological order)", unit)
    fig.update_layout(
        xaxis={
            "type": "linear",
            "tickmode": "array",
            "tickvals": ticks["position"].tolist(),
            "ticktext": _texts(ticks["tick"]),
            "tickangle": -40,
        },
        yaxis={"rangemode": "normal"},
        margin={"b": 140},
        height=460,
    )
    return _with_traces(fig, traces)


def _log_layout(fig: go.Figure, title: str, x_title: str, x: dict[str, Any]) -> None:
    _layout(fig, title, x_title, "ms")
    fig.update_layout(xaxis={**x, **GRID}, yaxis={"type": "log", "title": {"text": "ms"}, **GRID})


def _slo_line(fig: go.Figure, slo_ms: float | None, text: str) -> None:
    if slo_ms is not None:
        fig.add_hline(y=slo_ms, line={"color": "#111827", "dash": "dot"},
                      annotation_text=shown(text), annotation_position="top left")  # fmt: skip


def latency_by_rate(
    rows: list[dict[str, Any]], targets: list[str], slo_ms: float | None, slo_text: str,
    tasks: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """Open-loop latency against the offered rate, per version: p50 (solid), p99 (dash),
    p99.9 (dot), log scale, with the SLO line. ``rows``: version, rate, p50, p99, p999.
    ``tasks``: a task lifecycle's (enqueue to done, against the tasks/s offered)."""
    fig = go.Figure()
    for i, target in enumerate(targets):
        mine = sorted((r for r in rows if r["target"] == target), key=lambda r: r["rate"])
        if not mine:
            continue
        color = PALETTE[i % len(PALETTE)]
        for key, name, dash in (("p50", "p50", "solid"), ("p99", "p99", "dash"),
                                ("p999", "p99.9", "dot")):  # fmt: skip
            fig.add_trace(
                go.Scatter(
                    x=[r["rate"] for r in mine],
                    y=[r[key] for r in mine],
                    name=shown(f"{target} {name}"),
                    mode="lines+markers",
                    line={"color": color, "dash": dash},
                    hovertemplate=f"%{{x:,.0f}}/s: %{{y:.3f}} ms ({shown(target)} {name})",
                )
            )
    title = (
        "Task latency (enqueue to done) against arrival rate"
        if tasks
        else ("Open-loop latency against offered rate")
    )
    unit = "offered tasks/s" if tasks else "offered requests/s"
    _log_layout(fig, title, unit, {"type": "linear", "title": {"text": unit}})
    _slo_line(fig, slo_ms, slo_text)
    return _as_dict(fig)


def percentile_distribution(
    curves: list[dict[str, Any]], title: str, slo_ms: float | None, slo_text: str
) -> dict[str, Any]:
    """Each version's latency by percentile from its merged HDR histogram, on the
    "nines" axis (1 / (1 - percentile), log) HdrHistogram's plotter uses; ``curves``:
    target, percentiles (0-100) and their latencies (ms)."""
    fig = go.Figure()
    for i, curve in enumerate(curves):
        nines = [1 / (1 - p / 100) for p in curve["percentiles"]]
        fig.add_trace(
            go.Scatter(
                x=nines,
                y=curve["ms"],
                name=shown(curve["target"]),
                mode="lines",
                line={"color": PALETTE[i % len(PALETTE)], "shape": "hv"},
                customdata=curve["percentiles"],
                hovertemplate="p%{customdata:.4g}: %{y:.3f} ms",
            )
        )
    ticks = [1, 2, 10, 100, 1000, 10000, 100000]
    labels = ["0%", "50%", "90%", "99%", "99.9%", "99.99%", "99.999%"]
    _log_layout(fig, title, "percentile", {
        "type": "log", "tickvals": ticks, "ticktext": labels, "title": {"text": "percentile"},
    })  # fmt: skip
    _slo_line(fig, slo_ms, slo_text)
    return _as_dict(fig)
