"""What each page shows, as plain dicts for templates, from what flows/report.py derived.

The comparison table of a run page is ``comparison.compare`` of that run with the default
baseline and thresholds, the very records ``regtrack compare --format json`` prints.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from regtrack.analysis import histograms, metrics
from regtrack.analysis.records import ComparisonResult
from regtrack.analysis.report_data import RunPage, RunSummary
from regtrack.core.records import reasons_text
from regtrack.output import answer_text, latency_text, tables
from regtrack.output.report import figures
from regtrack.plan.latency_plan import TASK_LATENCY
from regtrack.results.records import LoadedRun, RunTarget, StoredRun
from regtrack.targets.make_flags import flags_text
from regtrack.workloads import server_config

if TYPE_CHECKING:
    import pandas as pd

CHART_METRICS = (
    "throughput", "instructions_per_op", "cycles_per_op", "syscalls_per_op", "tasks_per_sec",
    "enqueue_per_sec", "server_cpu_per_task", "commands_per_task", "round_trips_per_task",
)  # fmt: skip
SLUG_RE = re.compile(r"[^A-Za-z0-9_.-]+")


def run_file(run_id: int) -> str:
    return f"run-{run_id}.html"


def run_summary(summary: RunSummary) -> dict[str, Any]:
    """One row of the index."""
    warnings = []
    if summary.n_invalid:
        warnings.append(f"{summary.n_invalid} of {summary.n_trials} trials invalid")
    if summary.status != "complete":
        warnings.append(f"{summary.status}: {summary.status_detail}".strip(": "))
    if summary.forced:  # a ci gate against a stored baseline not measured alike (--force)
        warnings.append(answer_text.forced_line(summary.forced) or "")
    return {
        "id": summary.id,
        "file": run_file(summary.id),
        "created_at": summary.created_at,
        "status": summary.status,
        "versions": summary.versions,
        "workloads": summary.workloads,
        "metric": summary.metric,
        "runtime": summary.runtime,
        "n_trials": summary.n_trials,
        "verdicts": summary.verdicts,
        "warnings": warnings,
        "server": answer_text.server_caption(summary.server),
    }


def _comparison_rows(result: ComparisonResult) -> list[dict[str, Any]]:
    order = {m.name: i for i, m in enumerate(metrics.METRICS)}
    records = sorted(
        result.comparisons, key=lambda r: (order.get(r.metric, 99), r.workload, r.candidate)
    )
    return [
        {
            **r.to_json(),
            "baseline_text": answer_text.format_value(
                r.baseline_value, r.unit, r.server_busy_pct_baseline
            ),
            "candidate_text": answer_text.format_value(
                r.candidate_value, r.unit, r.server_busy_pct_candidate
            ),
            "change_text": answer_text.change_text(r),
            "verdict_class": "v-" + r.verdict.replace(" ", "-"),
        }
        for r in records
    ]


def _charts(result: ComparisonResult) -> list[dict[str, Any]]:
    cells = result.cells
    targets = list(result.targets)
    out = []
    for workload in dict.fromkeys(cells["workload"]):
        mine = cells[cells["workload"] == workload]
        for name in CHART_METRICS:
            metric = metrics.METRIC_BY_NAME[name]
            data = mine[(mine["metric"] == name) & mine["value"].notna()]
            if data.empty:
                continue
            title = f"{workload}: {name.replace('_', ' ')} ({metric.unit})"
            out.append(figures.by_point(data, title, metric.unit, targets))
        p50 = mine[(mine["metric"] == "latency_p50") & mine["value"].notna()]
        p99 = mine[(mine["metric"] == "latency_p99") & mine["value"].notna()]
        if not p50.empty or not p99.empty:
            out.append(figures.latency(p50, p99, targets))
    return out


def _number(value: Any) -> float | None:
    """A frame's number, None where it has none (NaN, None)."""
    return None if value is None or math.isnan(value) else float(value)


def _invalid_trials(trials: pd.DataFrame) -> list[dict[str, Any]]:
    if trials.empty:
        return []
    return [
        {
            "seq": int(t.seq),
            "repetition": int(t.repetition) + 1,
            "target": t.target,
            "workload": t.workload,
            "point": t.point,
            "mode": t.mode,
            "ops_per_sec": _number(t.ops_per_sec),
            "reason": reasons_text(t.reasons),
        }
        for t in trials[~trials["valid"]].itertuples()
    ]


def _version(target: RunTarget, table: Mapping[str, Any]) -> dict[str, Any]:
    build = target.build
    # What this version's servers ran with: the run's settings, less optional ones it did
    # not know.
    applied = table if target.server_config is None else target.server_config
    return {
        "label": target.label,
        "spec": target.spec,
        "kind": target.kind,
        "redis_version": target.redis_version,
        # The exact commit, else the git sha the server was built with.
        "commit": target.commit or target.built_sha,
        "build_flags": flags_text(build.flags, build.environment)
        if build is not None and (build.flags or build.environment)
        else "(default)",
        "compiler": (build.compiler or "") if build is not None else "",
        "image": target.image,
        "binary_sha256": target.binary_sha256[:16],
        "server": ", ".join(f"{k.removesuffix('?')} {v}" for k, v in applied.items()) or "defaults",
        "server_without": ", ".join(server_config.skipped(table, applied)),
    }


def _environment(run: StoredRun) -> dict[str, Any]:
    data = run.server_data.to_json() if run.server_data else {}
    shown = {k: data.get(k) for k in ("dir", "mount", "filesystem", "device") if data.get(k)}
    return {
        "machine": run.environment.shown(),
        "loadgen": run.loadgen.shown(),
        "versions": [_version(t, run.server) for t in run.targets],
        "server_data": shown if data.get("persistent") else {},
    }


def _seeds(run: LoadedRun) -> dict[str, Any]:
    """How the servers' hash seeds were chosen, and each repetition's seed."""
    trials = run.trials
    by_rep: dict[int, str] = {}
    if not trials.empty and "seed" in trials:
        by_rep = {
            int(t.repetition) + 1: t.seed
            for t in trials.itertuples()
            if isinstance(t.seed, str) and t.seed
        }
    control = run.run.seeds or "not recorded (Redis's own)"
    return {"control": control, "by_repetition": sorted(by_rep.items())}


def _latency_charts(shown: RunPage) -> list[dict[str, Any]]:
    """Open-loop latency against offered rate, and each point's percentile distributions,
    with the SLO line."""
    if not shown.latency:
        return []
    slo_ms, slo_text = (shown.slo[0].limit_ms, shown.slo[0].text) if shown.slo else (None, "")
    targets = list(dict.fromkeys(d.target for d in shown.latency))
    rows = [
        {"target": d.target, "rate": d.offered_rate, **{
            key: dict(d.percentiles_ms)[p] for key, p in (("p50", 50.0), ("p99", 99.0),
                                                          ("p999", 99.9))
        }}
        for d in shown.latency
    ]  # fmt: skip
    trials = shown.run.trials
    tasks = bool(not trials.empty and (trials["mode"] == TASK_LATENCY).any())
    charts = [figures.latency_by_rate(rows, targets, slo_ms, slo_text, tasks)]
    for point in dict.fromkeys(d.point for d in shown.latency):
        curves = []
        for d in shown.latency:
            if d.point == point:
                percentiles, ms = histograms.curve(d)
                curves.append({"target": d.target, "percentiles": percentiles, "ms": ms})
        what = "Task latency" if tasks else "Latency"
        title = f"{what} by percentile at {point} (merged HDR histograms)"
        charts.append(figures.percentile_distribution(curves, title, slo_ms, slo_text))
    return charts


def run_page(shown: RunPage, history_links: dict, summary: dict[str, Any]) -> dict[str, Any]:
    """Everything the run page shows; ``summary`` is its index row."""
    run, result = shown.run, shown.result
    page: dict[str, Any] = {
        "run": run.run,
        "summary": summary,
        "environment": _environment(run.run),
        "invalid": _invalid_trials(run.trials),
        "seeds": _seeds(run),
        "pooled": [],
        "charts": [],
        "comparisons": [],
        "markdown": "",
        "disagreements": [],
        "attribution": [],
        "commands": [],
        "history": [],
    }
    if result is None:
        return page
    page.update(
        charts=_charts(result) + _latency_charts(shown),
        slo=latency_text.slo_lines(*shown.slo) if shown.slo else "",
        comparisons=_comparison_rows(result),
        pooled=[
            {
                **p.to_json(),
                "change_text": answer_text.change_text(p),
                "verdict_class": "v-" + p.verdict.replace(" ", "-"),
            }
            for p in result.pooled
        ],
        baseline=result.baseline,
        markdown=tables.render(result, "markdown"),
        disagreements=list(result.disagreements),
        attribution=shown.attribution,
        commands=[dataclasses.asdict(c) for c in shown.commands],
    )
    cells = result.cells
    page["history"] = sorted(
        {
            (c.workload, c.point, c.metric, history_links[(c.workload, c.point, c.metric)])
            for c in cells.itertuples()
            if (c.workload, c.point, c.metric) in history_links
        }
    )
    return page
