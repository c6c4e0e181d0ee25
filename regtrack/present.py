"""Comparison tables for people (terminal, Markdown) and machines (CSV, JSON). Never measures."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

from rich.console import Console
from rich.table import Table

from regtrack.analysis import METRIC_BY_NAME, disagreements

FORMATS = ("table", "markdown", "csv", "json")
UNTRUSTED = "!"


def format_value(value: float | None, unit: str, server_busy_pct: float | None = None) -> str:
    """A cell's value; a throughput with the server's busy share beside it, because it is
    the server's capacity only when the server was the busy side."""
    if value is None:
        return "-"
    if unit == "ops/s":
        busy = "" if server_busy_pct is None else f" (server {server_busy_pct:.0f}%)"
        return f"{value:,.0f}{busy}"
    if unit == "Ir/op":
        return f"{value:,.1f}"
    return f"{value:.3f}"


def change_text(rec: dict[str, Any]) -> str:
    """ "-3.2% [-5.1, -1.2] regression": the estimate, its interval and the verdict."""
    if rec["change_pct"] is None:
        return "-"
    text = f"{rec['change_pct']:+.1f}%"
    if rec["ci_low_pct"] is not None:
        text += f" [{rec['ci_low_pct']:+.1f}, {rec['ci_high_pct']:+.1f}]"
    text += f" {rec['verdict']}"
    if rec["verdict"] == "inconclusive" and rec.get("mde_pct") is not None:
        text += f" (detectable: ±{_mde(rec['mde_pct'])})"
    elif rec.get("extra_repetitions"):
        text += f" (~{rec['extra_repetitions']} more reps)"
    return text


def _mde(pct: float) -> str:
    return "unbounded" if pct == float("inf") else f"{pct:.1f}%"


def _grid(result: dict[str, Any], metric: str) -> tuple[list[str], list[list[str]], list[str]]:
    """Header, rows and footnotes of one metric's table: one row per workload point."""
    unit = METRIC_BY_NAME[metric].unit
    baseline = result["baseline"]
    candidates = [t for t in result["targets"] if t != baseline]
    cells = result["cells"]
    cells = cells[cells["metric"] == metric]
    by_key = {(c.workload, c.point, c.target): c for c in cells.itertuples()}
    changes = {
        (r["workload"], r["point"], r["candidate"]): r
        for r in result["comparisons"]
        if r["metric"] == metric
    }
    workloads = list(dict.fromkeys(cells["workload"]))
    header = (["workload"] if len(workloads) > 1 else []) + ["point"]
    header += [f"{t} {unit}" for t in result["targets"]]
    header += [f"% change {c} vs {baseline}" for c in candidates]
    rows: list[list[str]] = []
    notes: dict[str, None] = {}
    points = cells[["workload", "point", "point_order"]].drop_duplicates()
    for p in points.sort_values(["workload", "point_order"]).itertuples():
        row = ([p.workload] if len(workloads) > 1 else []) + [p.point]
        for target in result["targets"]:
            cell = by_key.get((p.workload, p.point, target))
            if cell is None:
                row.append("-")
                continue
            text = format_value(cell.value, unit, _busy(cell))
            if not cell.trusted:
                text += f" {UNTRUSTED}"
                for problem in cell.problems:
                    notes[f"{target} {p.point}: {problem}"] = None
            row.append(text)
        for candidate in candidates:
            rec = changes.get((p.workload, p.point, candidate))
            text = change_text(rec) if rec else "-"
            if rec and not rec["trusted"]:
                text += f" {UNTRUSTED}"
            row.append(text)
        rows.append(row)
    for workload in workloads:
        pooled = {
            r["candidate"]: r
            for r in result.get("pooled", [])
            if r["metric"] == metric and r["workload"] == workload
        }
        if not pooled:
            continue
        first = next(iter(pooled.values()))
        label = f"pooled ({', '.join(first['points']) or 'no point'})"
        row = ([workload] if len(workloads) > 1 else []) + [label]
        row += ["" for _ in result["targets"]]
        row += [change_text(pooled[c]) if c in pooled else "-" for c in candidates]
        rows.append(row)
        for point, why in first["excluded"].items():
            notes[f"{point} does not gate: {why}"] = None
    return header, rows, list(notes)


def _busy(cell: Any) -> float | None:
    busy = getattr(cell, "server_busy_pct", None)
    return None if busy is None or math.isnan(busy) else float(busy)


def _caption(result: dict[str, Any], metric: str) -> str:
    m = METRIC_BY_NAME[metric]
    better = "higher is better" if m.higher_is_better else "lower is better"
    text = (
        f"run {result['run_id']} · {metric} ({m.unit}, {better}) · median of valid trials · "
        f"baseline {result['baseline']}"
    )
    if m.unit == "ops/s":
        text += " · (server N%): the server's median busy share"
    recs = [r for r in result["comparisons"] if r["metric"] == metric]
    if recs:
        r = recs[0]
        text += (
            f" · change [{100 * r['confidence']:.1f}% interval, {result['method']}] "
            f"and verdict at a {r['threshold_pct']:g}% threshold"
        )
    if m.deterministic:
        cells = result["cells"]
        spreads = cells.loc[cells["metric"] == metric, "spread_pct"].dropna()
        if not spreads.empty:
            text += f" · largest spread between server processes {spreads.max():.2f}%"
    return text


def _disagreement_lines(result: dict[str, Any]) -> list[str]:
    lines = []
    for d in disagreements(result):
        sys_text = (
            f", syscalls/op {d['syscalls_change_pct']:+.1f}%"
            if d["syscalls_change_pct"] is not None
            else ""
        )
        lines.append(
            f"throughput and instructions disagree for {d['candidate']} at {d['point']}: "
            f"throughput {d['throughput_change_pct']:+.1f}% but instructions/op "
            f"{d['instructions_change_pct']:+.1f}%{sys_text}; callgrind does not see kernel "
            "work (syscalls) or memory stalls"
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


def forced_line(differences: list[str] | None) -> str | None:
    """The label of a comparison made with --force between runs measured differently."""
    if not differences:
        return None
    return f"FORCED comparison, not like with like: {'; '.join(differences)}"


def render(result: dict[str, Any], fmt: str, metrics: list[str] | None = None) -> str:
    """Tables of the requested metrics that the run measured (default: all it measured)."""
    metrics = [m for m in (metrics or result["metrics"]) if m in result["metrics"]]
    forced = forced_line(result.get("forced"))
    if fmt == "json":
        records = [_plain(r) for r in result["comparisons"] if r["metric"] in metrics]
        if forced:
            records = [{**r, "forced": result["forced"]} for r in records]
        return json.dumps(records, indent=2)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out)
        if forced:
            writer.writerow(["forced", "; ".join(result["forced"])])
        for i, metric in enumerate(metrics):
            header, rows, _ = _grid(result, metric)
            if i:
                writer.writerow([])
            writer.writerow(["metric", *header])
            writer.writerows([[metric, *row] for row in rows])
        return out.getvalue()
    if fmt == "markdown":
        parts = [f"> **{forced}**\n"] if forced else []
        for metric in metrics:
            header, rows, notes = _grid(result, metric)
            parts.append(f"**{_caption(result, metric)}**\n")
            parts.append("| " + " | ".join(header) + " |")
            parts.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
            parts.extend("| " + " | ".join(row) + " |" for row in rows)
            parts.extend(["", *[f"- {line.strip()}" for line in _footer(notes)], ""])
        parts.extend(f"> {line}" for line in _disagreement_lines(result))
        return "\n".join(parts)
    console = Console(file=io.StringIO(), width=200, force_terminal=False, color_system=None)
    if forced:
        console.print(forced, highlight=False, soft_wrap=True)
    for metric in metrics:
        header, rows, notes = _grid(result, metric)
        console.print(_caption(result, metric))
        table = Table()
        for i, column in enumerate(header):
            table.add_column(column, justify="left" if i == 0 else "right")
        for row in rows:
            table.add_row(*row)
        console.print(table)
        for line in _footer(notes):
            console.print(line, highlight=False, soft_wrap=True)
        console.print()
    for line in _disagreement_lines(result):
        console.print(f"note: {line}", highlight=False, soft_wrap=True)
    return console.file.getvalue()  # type: ignore[attr-defined]


def attribution(tables: list[dict[str, Any]], fmt: str) -> str:
    """The per-function table of `regtrack explain`, reconciled to the total change."""
    if fmt == "json":
        return json.dumps(tables, indent=2)
    out: list[str] = []
    for t in tables:
        header = [
            "function",
            f"{t['baseline']} Ir/op",
            f"{t['candidate']} Ir/op",
            "difference",
            "share of difference",
        ]
        rows = [
            [
                f["function"],
                f"{f['baseline_per_op']:,.1f}",
                f"{f['candidate_per_op']:,.1f}",
                f"{f['diff_per_op']:+,.1f}",
                "-" if f["share_pct"] is None else f"{f['share_pct']:+.1f}%",
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
            ]
        )
        caption = (
            f"{t['workload']} {t['point']}: instructions per op (exclusive), "
            f"{t['candidate']} vs {t['baseline']}: {change} "
            f"(mean of {t['n_baseline']} and {t['n_candidate']} valid trials)"
        )
        if fmt == "markdown":
            out.append(f"**{caption}**\n")
            out.append("| " + " | ".join(header) + " |")
            out.append("|---|" + "---:|" * (len(header) - 1))
            out.extend("| " + " | ".join(r) + " |" for r in rows)
            out.append("")
            continue
        console = Console(file=io.StringIO(), width=200, force_terminal=False, color_system=None)
        console.print(caption, highlight=False)
        table = Table()
        for i, column in enumerate(header):
            table.add_column(column, justify="left" if i == 0 else "right")
        for r in rows:
            table.add_row(*r)
        console.print(table)
        out.append(console.file.getvalue())  # type: ignore[attr-defined]
    return "\n".join(out)


def versions_table(rows: list[dict[str, str]]) -> str:
    """How each spec resolved, one row per version."""
    console = Console(file=io.StringIO(), width=200, force_terminal=False, color_system=None)
    table = Table()
    for column in ("label", "kind", "ref", "commit", "version", "date / path"):
        table.add_column(column)
    for r in rows:
        table.add_row(
            r["label"],
            r["kind"],
            r["ref"],
            r["commit"][:12],
            r["version"],
            r["date"] or r["path"],
        )
    console.print(table)
    repos = sorted({r["source_repo"] for r in rows if r["source_repo"]})
    for repo in repos:
        console.print(f"source repository: {repo}", highlight=False)
    return console.file.getvalue()  # type: ignore[attr-defined]


OUTCOME_HEADLINE = {
    "regression": "❌ Regression",
    "no regression": "✅ No regression",
    "inconclusive": "⚠️ Undecided: no regression found, but the gate could not decide",
    "not measured": "⛔ Could not measure",
}
METRIC_TITLE = {"instructions_per_op": "instructions per op", "throughput": "throughput"}


def _answer(r: dict[str, Any]) -> str:
    """ "instructions per op +0.01% [-0.03, +0.05] no change (detectable ±0.1%)" """
    text = f"{METRIC_TITLE.get(r['metric'], r['metric'])} {change_text(r)}"
    if r["verdict"] != "inconclusive" and r.get("mde_pct") is not None:
        text += f" (detectable: ±{_mde(r['mde_pct'])})"
    return text


def ci_headline(decision: dict[str, Any], context: dict[str, Any]) -> str:
    """The first line: the outcome, each gating answer, and for an undecided gate the
    smallest change this budget could have detected."""
    answers = "; ".join(_answer(r) for r in decision["cells"])
    head = OUTCOME_HEADLINE[decision["outcome"]]
    if context.get("forced"):
        head = f"{head} (FORCED: not like with like)"
    reps = f"{context['repetitions']} repetitions"
    if decision["outcome"] == "inconclusive":
        why = {"budget": "the time budget ran out", "max-repetitions": "--max-repetitions"}
        stop = why.get(context.get("stopped", ""), "the plan ended")
        return f"{head} after {reps} ({stop}): {answers}"
    return f"{head} after {reps}: {answers}"


def ci_annotations(decision: dict[str, Any], forced: list[str] | None = None) -> list[str]:
    """GitHub Actions workflow commands, so an undecided or forced gate is never silently
    green."""
    outcome = decision["outcome"]
    answers = "; ".join(_answer(r) for r in decision["cells"])
    lines = [f"::warning title=regtrack: forced::{forced_line(forced)}"] if forced else []
    if outcome == "regression":
        lines.append(f"::error title=regtrack: regression::{answers}")
    elif outcome == "inconclusive":
        lines.append(f"::warning title=regtrack: undecided::{answers}")
    return lines


def ci_json(
    result: dict[str, Any], decision: dict[str, Any], context: dict[str, Any]
) -> dict[str, Any]:
    """What a machine reads: the outcome, whether it was decided, each gating answer."""
    return {
        "outcome": decision["outcome"],
        "decided": decision["outcome"] in ("regression", "no regression"),
        "headline": ci_headline(decision, context),
        "repetitions": context["repetitions"],
        "stopped": context.get("stopped"),
        "seeds": context.get("seeds"),
        "forced": context.get("forced") or [],
        "gate": [_plain(r) for r in decision["cells"]],
        "pooled": [_plain(r) for r in result.get("pooled", [])],
        "records": [_plain(r) for r in result["comparisons"]],
    }


def _plain(r: dict[str, Any]) -> dict[str, Any]:
    """JSON has no infinity: an unbounded interval end or effect is null."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()}


def ci_summary(result: dict[str, Any], decision: dict[str, Any], context: dict[str, Any]) -> str:
    """The Markdown a CI job shows: the verdict first, then why, then the tables."""
    lines = [
        f"## regtrack: {ci_headline(decision, context)}",
        "",
        f"Candidate `{context['candidate']}` vs baseline `{context['baseline']}` · workload "
        f"`{context['workload']}` · {context['repetitions']} interleaved, seed-matched "
        f"repetitions · run {result['run_id']} · seeds: {context.get('seeds') or 'unknown'}",
        "",
    ]
    if context.get("forced"):
        lines += [f"**{forced_line(context['forced'])}**", ""]
    if not decision["cells"]:
        lines.append("- no gating metric was measured")
    for r in decision["cells"]:
        points = ", ".join(r["points"]) or "no point"
        lines.append(
            f"- **{METRIC_TITLE.get(r['metric'], r['metric'])}** over {points} "
            f"({r['n_blocks']} blocks): {change_text(r)}"
        )
        for point, why in r["excluded"].items():
            lines.append(f"  - {point} does not gate: {why}")
    lines += ["", render(result, "markdown")]
    lines.append(
        f"Method: one pooled change per metric over the gating points (the mean of each "
        f"seed-matched block's log ratios), with a {result['method']} interval that stays "
        f"valid however often the gate looks; family-wise error {100 * result['alpha']:g}% "
        "split over the gating metrics; a point is called only when the pooled change is. "
        "A regression needs the whole interval on the worse side and the estimate beyond "
        "the threshold (docs/methodology.md)."
    )
    if context.get("environment"):
        env = context["environment"]
        lines.append(
            f"Environment: {env.get('cpu_model')}, {env.get('cpu_count')} CPUs, kernel "
            f"{env.get('kernel')}, {env.get('loadgen_version')}, server CPU "
            f"{env.get('server_cpus')}, client CPU {env.get('client_cpus')}."
        )
    return "\n".join(lines) + "\n"
