"""Comparison tables for people (terminal, Markdown) and machines (CSV, JSON). Never measures."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from regtrack.analysis import syscall_breakdown
from regtrack.analysis.bisect_records import Attribution, FunctionShare
from regtrack.analysis.metrics import METRIC_BY_NAME
from regtrack.analysis.records import (
    ComparisonResult,
    PointComparison,
    PooledComparison,
)
from regtrack.core.text import printable
from regtrack.output import markdown
from regtrack.output.answer_text import (
    UNTRUSTED,
    change_text,
    forced_line,
    format_value,
    server_caption,
    shift_text,
)
from regtrack.output.console import UNWRAPPED, ShownConsole, table_width

FORMATS = ("table", "markdown", "csv", "json")


@dataclass(frozen=True)
class Quoting:
    """How one format shows stored text (labels, workload and point names, reasons): in a
    table's cell, and in running text. Any of it may be a pull request's choice."""

    cell: Callable[[object], str]
    prose: Callable[[object], str]


TERMINAL = Quoting(printable, printable)
MARKDOWN = Quoting(markdown.cell, markdown.inline)


def _grid(
    result: ComparisonResult, metric: str, q: Quoting
) -> tuple[list[str], list[list[str]], list[str]]:
    """Header, rows and footnotes of one metric's table: one row per workload point."""
    unit = METRIC_BY_NAME[metric].unit
    baseline = result.baseline
    candidates = [t for t in result.targets if t != baseline]
    cells = result.cells
    cells = cells[cells["metric"] == metric]
    by_key = {(c.workload, c.point, c.target): c for c in cells.itertuples()}
    changes: dict[tuple[str, str, str], PointComparison] = {
        (r.workload, r.point, r.candidate): r for r in result.points_of(metric)
    }
    workloads = list(dict.fromkeys(cells["workload"]))
    header = (["workload"] if len(workloads) > 1 else []) + ["point"]
    header += [f"{q.cell(t)} {unit}" for t in result.targets]
    header += [f"% change {q.cell(c)} vs {q.cell(baseline)}" for c in candidates]
    rows: list[list[str]] = []
    notes: dict[str, None] = {}
    points = cells[["workload", "point", "point_order"]].drop_duplicates()
    for p in points.sort_values(["workload", "point_order"]).itertuples():
        row = ([q.cell(p.workload)] if len(workloads) > 1 else []) + [q.cell(p.point)]
        for target in result.targets:
            cell = by_key.get((p.workload, p.point, target))
            if cell is None:
                row.append("-")
                continue
            text = format_value(cell.value, unit, _busy(cell))
            if not cell.trusted:
                text += f" {UNTRUSTED}"
                for problem in cell.problems:
                    notes[f"{q.prose(target)} {q.prose(p.point)}: {q.prose(problem)}"] = None
            row.append(text)
        for candidate in candidates:
            rec = changes.get((p.workload, p.point, candidate))
            text = change_text(rec) if rec else "-"
            if rec and not rec.trusted:
                text += f" {UNTRUSTED}"
            row.append(text)
        rows.append(row)
    for workload in workloads:
        pooled: dict[str, PooledComparison] = {
            r.candidate: r for r in result.pooled if r.metric == metric and r.workload == workload
        }
        if not pooled:
            continue
        first = next(iter(pooled.values()))
        label = f"pooled ({', '.join(q.cell(p) for p in first.points) or 'no point'})"
        row = ([q.cell(workload)] if len(workloads) > 1 else []) + [label]
        row += ["" for _ in result.targets]
        row += [change_text(pooled[c]) if c in pooled else "-" for c in candidates]
        rows.append(row)
        for point, why in first.excluded.items():
            notes[f"{q.prose(point)} does not gate: {q.prose(why)}"] = None
    return header, rows, list(notes)


def _busy(cell: Any) -> float | None:
    busy = getattr(cell, "server_busy_pct", None)
    return None if busy is None or math.isnan(busy) else float(busy)


def _caption(result: ComparisonResult, metric: str, quote: Callable[[object], str]) -> str:
    m = METRIC_BY_NAME[metric]
    better = "higher is better" if m.higher_is_better else "lower is better"
    text = (
        f"run {result.run_id} · {metric} ({m.unit}, {better}) · median of valid trials · "
        f"baseline {quote(result.baseline)}"
    )
    if m.unit == "ops/s":
        text += " · (server N%): the server's median busy share"
    text += f" · {server_caption(result.server, quote)}"
    recs = result.points_of(metric)
    if recs:
        r = recs[0]
        text += (
            f" · change [{100 * r.confidence:.1f}% interval, {result.method}] "
            f"and verdict at a {r.threshold_pct:g}% threshold"
        )
    shift = (result.run_shifts or {}).get(metric)
    if shift and result.baseline_run_id is not None:
        text += " · " + shift_text(result.baseline_run_id, shift, quote)
    if len(result.hosts) > 1:
        text += (
            f" · merged from {len(result.hosts)} hosts: each block compared on its own host, "
            "hosts a level of the model"
        )
    if m.deterministic:
        cells = result.cells
        spreads = cells.loc[cells["metric"] == metric, "spread_pct"].dropna()
        if not spreads.empty:
            text += f" · largest spread between server processes {spreads.max():.2f}%"
    return text


def _disagreement_lines(result: ComparisonResult, quote: Callable[[object], str]) -> list[str]:
    lines = []
    for d in result.disagreements:
        sys_text = (
            f", syscalls/op {d.syscalls_change_pct:+.1f}%"
            if d.syscalls_change_pct is not None
            else ""
        )
        lines.append(
            f"throughput and instructions disagree for {quote(d.candidate)} at "
            f"{quote(d.point)}: "
            f"throughput {d.throughput_change_pct:+.1f}% but instructions/op "
            f"{d.instructions_change_pct:+.1f}%{sys_text}; callgrind does not see kernel "
            "work (syscalls) or memory stalls"
        )
    return lines


def syscall_lines(result: ComparisonResult, quote: Callable[[object], str]) -> list[str]:
    """Per candidate, the syscalls that moved per op, largest first (counted by name)."""
    lines = []
    for b in result.syscalls:
        if b.moved():
            moved = ", ".join(quote(syscall_breakdown.text(c)) for c in b.moved()[:5])
            lines.append(
                f"syscalls per op by call, {quote(b.candidate)} vs {quote(b.baseline)}: {moved}"
            )
    return lines


def _footer(notes: list[str]) -> list[str]:
    if not notes:
        return []
    return [
        f"{UNTRUSTED} no valid trial in this cell; the value is the median of invalid trials "
        "and must not be trusted (and points that do not gate):",
        *[f"  {n}" for n in notes],
    ]


def render(result: ComparisonResult, fmt: str, metrics: list[str] | None = None) -> str:
    """Tables of the requested metrics that the run measured (default: all it measured)."""
    metrics = [m for m in (metrics or result.metrics) if m in result.metrics]
    if fmt == "json":
        return json.dumps(result.to_json(metrics), indent=2)
    if fmt == "csv":
        return _csv(result, metrics)
    if fmt == "markdown":
        forced = forced_line(list(result.forced), MARKDOWN.prose)
        parts = [f"> **{forced}**\n"] if forced else []
        for metric in metrics:
            header, rows, notes = _grid(result, metric, MARKDOWN)
            parts.append(f"**{_caption(result, metric, MARKDOWN.prose)}**\n")
            parts.extend(_markdown_table(header, rows))
            parts.extend(["", *[f"- {line.strip()}" for line in _footer(notes)], ""])
            if metric == "syscalls_per_op":
                parts.extend([*[f"- {line}" for line in syscall_lines(result, MARKDOWN.prose)], ""])
        parts.extend(f"> {line}" for line in _disagreement_lines(result, MARKDOWN.prose))
        return "\n".join(parts)
    forced = forced_line(list(result.forced))
    console = _canvas()
    if forced:
        _prose(console, forced)
    for metric in metrics:
        header, rows, notes = _grid(result, metric, TERMINAL)
        _prose(console, _caption(result, metric, TERMINAL.prose))
        console.print(_numbers_table(header, rows))
        for line in _footer(notes):
            _prose(console, line)
        if metric == "syscalls_per_op":
            for line in syscall_lines(result, TERMINAL.prose):
                _prose(console, line)
        console.print()
    for line in _disagreement_lines(result, TERMINAL.prose):
        _prose(console, f"note: {line}")
    return console.file.getvalue()  # type: ignore[attr-defined]


def attribution(tables: Sequence[Attribution], fmt: str) -> str:
    """The per-function table of `regtrack explain`, reconciled to the total change."""
    if fmt == "json":
        return json.dumps(tables, indent=2)
    out: list[str] = []
    q = MARKDOWN if fmt == "markdown" else TERMINAL
    for t in tables:
        cycles = t.get("metric") == "cycles"
        unit = "cycles/op" if cycles else "Ir/op"
        header = [
            "function",
            f"{q.cell(t['baseline'])} {unit}",
            f"{q.cell(t['candidate'])} {unit}",
            "difference",
            "share of difference",
            *(MISS_HEADERS if cycles else ()),
        ]
        rows = [
            [
                q.cell(f["function"]),
                f"{f['baseline_per_op']:,.1f}",
                f"{f['candidate_per_op']:,.1f}",
                f"{f['diff_per_op']:+,.1f}",
                "-" if f["share_pct"] is None else f"{f['share_pct']:+.1f}%",
                *(_misses(f) if cycles else ()),
            ]
            for f in t["functions"]
        ]
        change = "-" if t["change_pct"] is None else f"{t['change_pct']:+.2f}%"
        rows.append(
            [
                "total",
                f"{t['baseline_total']:,.1f}",
                f"{t['candidate_total']:,.1f}",
                f"{t['diff_total']:+,.1f}",
                "100.0%" if t["diff_total"] else "-",
                *(["" for _ in MISS_HEADERS] if cycles else ()),
            ]
        )
        what = "simulated cycles per op" if cycles else "instructions per op"
        caption = (
            f"{q.prose(t['workload'])} {q.prose(t['point'])}: {what} (exclusive), "
            f"{q.prose(t['candidate'])} vs {q.prose(t['baseline'])}: {change} "
            f"(mean of {t['n_baseline']} and {t['n_candidate']} valid trials)"
        )
        if fmt == "markdown":
            out.append(f"**{caption}**\n")
            out.extend(_markdown_table(header, rows))
            out.append("")
            continue
        console = _canvas()
        console.print(caption)
        console.print(_numbers_table(header, rows))
        out.append(console.file.getvalue())  # type: ignore[attr-defined]
    return "\n".join(out)


# explain --metric cycles: how each function's misses per op moved.
MISS_HEADERS = ("Δ L1 misses/op", "Δ LL misses/op", "Δ mispredicts/op")


def _misses(f: FunctionShare) -> list[str]:
    moved = f.get("misses_diff_per_op")
    if moved is None:
        return ["" for _ in MISS_HEADERS]
    return [f"{moved.get(m, 0.0):+,.3f}" for m in ("l1_misses", "ll_misses", "branch_misses")]


def versions_table(rows: list[dict[str, str]]) -> str:
    """How each spec resolved, one row per version (every field text a spec, a repository
    or a commit chose, shown as text)."""
    console = _canvas()
    table = Table()
    subjects = any(r.get("subject") for r in rows)
    for column in ("label", "kind", "ref", "commit", "version", "date / path"):
        table.add_column(column)
    if subjects:
        table.add_column("subject", overflow="ellipsis", max_width=60)
    for r in rows:
        cells = [r["label"], r["kind"], r["ref"], r["commit"][:12], r["version"]]
        cells.append(r["date"] or r["path"])
        cells += [r.get("subject") or ""] if subjects else []
        table.add_row(*map(printable, cells))
    console.print(table)
    repos = sorted({r["source_repo"] for r in rows if r["source_repo"]})
    for repo in repos:
        console.print(f"source repository: {printable(repo)}")
    return console.file.getvalue()  # type: ignore[attr-defined]


def _markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table's lines: the first column a name, the others numbers (right)."""
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def _numbers_table(header: list[str], rows: list[list[str]]) -> Table:
    """The terminal's table: the first column a name, the others numbers (right)."""
    table = Table()
    for i, column in enumerate(header):
        table.add_column(column, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*row)
    return table


def _prose(console: Console, text: str) -> None:
    """A caption or note: wrapped at a terminal's width, whole on one line in a log."""
    console.print(text, soft_wrap=console.width >= UNWRAPPED)


def _canvas() -> Console:
    """A console that draws a table into text, as wide as the terminal (console.table_width):
    no colour, and text shown as it is (console.ShownConsole: no markup, no emoji codes)."""
    return ShownConsole(
        file=io.StringIO(), width=table_width(), force_terminal=False, color_system=None
    )


CSV_COLUMNS = (
    "workload", "point", "metric", "unit", "baseline", "candidate", "baseline_value",
    "candidate_value", "change_pct", "ci_low_pct", "ci_high_pct", "mde_pct", "threshold_pct",
    "verdict", "n", "gating", "trusted", "forced",
)  # fmt: skip


def _csv(result: ComparisonResult, metrics: list[str]) -> str:
    """One row per point record and per pooled answer (point "pooled"), numbers as numbers
    (empty where there is none) and the verdict in a field of its own, for scripts."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    forced = "; ".join(result.forced)
    for r in (*result.comparisons, *result.pooled):
        if r.metric not in metrics:
            continue
        point = isinstance(r, PointComparison)
        row = [
            r.workload, r.point, r.metric, r.unit, r.baseline, r.candidate,
            r.baseline_value if point else None, r.candidate_value if point else None,
            r.change_pct, r.ci_low_pct, r.ci_high_pct, r.mde_pct, r.threshold_pct, r.verdict,
            r.n, int(r.gating), int(r.trusted if point else True), forced,
        ]  # fmt: skip
        writer.writerow([_csv_value(v) for v in row])
    return out.getvalue()


def _csv_value(value: Any) -> Any:
    """A CSV field: text as stored but for control characters, shown as escapes (a CSV
    printed to a terminal must not drive it); None as an empty field."""
    if value is None:
        return ""
    return printable(value, None) if isinstance(value, str) else value
