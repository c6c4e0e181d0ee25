"""What each page shows, gathered from the store through analysis: plain dicts for templates.

The comparison table of a run page is ``comparison.compare`` of that run with the default
baseline and thresholds, the very records ``regtrack compare --format json`` prints.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pandas as pd

from regtrack.analysis import attribution, comparison, metrics
from regtrack.analysis.records import ComparisonResult
from regtrack.core.errors import BadInput
from regtrack.core.records import reasons_text
from regtrack.core.settings import Thresholds
from regtrack.output import tables
from regtrack.output.report import figures
from regtrack.results import loaded
from regtrack.results.records import LoadedRun
from regtrack.results.store import Store
from regtrack.targets.make_flags import flags_text
from regtrack.workloads import server_config

CHART_METRICS = ("throughput", "instructions_per_op", "syscalls_per_op")
ATTRIBUTION_TOP = 10
# What load generators and regtrack send around the workload itself (redis-benchmark asks
# CONFIG GET save/appendonly per run): left out of the per-command breakdown.
TOOLING_COMMANDS = frozenset(
    {"config|get", "config", "info", "ping", "hello", "select", "client|setname",
     "client|list", "command", "command|docs", "command|count"}
)  # fmt: skip
SLUG_RE = re.compile(r"[^A-Za-z0-9_.-]+")


def run_file(run_id: int) -> str:
    return f"run-{run_id}.html"


def _verdict_counts(result: ComparisonResult | None) -> dict[str, int]:
    if result is None:
        return {}
    return dict(Counter(r.verdict for r in result.comparisons if r.metric in metrics.GATING))


def safe_compare(
    run: LoadedRun, baseline: str | None, thresholds: Thresholds
) -> ComparisonResult | None:
    """The run's comparison as its command printed it (comparison.comparison_settings)."""
    try:
        return comparison.compare(run, baseline, thresholds)
    except BadInput:
        return None  # a run without trials (failed before measuring)


def run_summary(
    store: Store, run: dict[str, Any], result: ComparisonResult | None, trials: list[dict]
) -> dict:
    """One row of the index; ``trials`` are the run's stored trials (read once by the caller)."""
    targets = store.targets(run["id"])
    workloads = sorted({t["workload"] for t in trials})
    invalid = sum(1 for t in trials if not t["valid"])
    warnings = []
    if invalid:
        warnings.append(f"{invalid} of {len(trials)} trials invalid")
    if run["status"] != "complete":
        warnings.append(f"{run['status']}: {run.get('status_detail') or ''}".strip(": "))
    forced = ((run.get("config") or {}).get("comparison") or {}).get("forced")
    if forced:  # a ci gate against a stored baseline not measured alike (--force)
        warnings.append(tables.forced_line(forced) or "")
    return {
        "id": run["id"],
        "file": run_file(run["id"]),
        "created_at": run["created_at"],
        "status": run["status"],
        "versions": [
            {"label": t["label"], "version": t.get("redis_version") or "", "spec": t["spec"]}
            for t in targets
        ],
        "workloads": workloads,
        "metric": (run.get("config") or {}).get("metric", "throughput"),
        "runtime": (run.get("config") or {}).get("runtime", "native"),
        "n_trials": len(trials),
        "verdicts": _verdict_counts(result),
        "warnings": warnings,
        "server": tables.server_caption(
            comparison.server_facts(loaded.stored_run(store, run["id"]))
        ),
    }


def _comparison_rows(result: ComparisonResult) -> list[dict[str, Any]]:
    order = {m.name: i for i, m in enumerate(metrics.METRICS)}
    records = sorted(
        result.comparisons, key=lambda r: (order.get(r.metric, 99), r.workload, r.candidate)
    )
    return [
        {
            **r.to_json(),
            "baseline_text": tables.format_value(
                r.baseline_value, r.unit, r.server_busy_pct_baseline
            ),
            "candidate_text": tables.format_value(
                r.candidate_value, r.unit, r.server_busy_pct_candidate
            ),
            "change_text": tables.change_text(r),
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


def _invalid_trials(trials: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "seq": t["seq"],
            "repetition": t["repetition"] + 1,
            "target": t["target"],
            "workload": t["workload"],
            "point": t["point"],
            "mode": t["mode"],
            "ops_per_sec": t["ops_per_sec"],
            "reason": reasons_text(t["reasons"]),
        }
        for t in trials
        if not t["valid"]
    ]


def _commands(store: Store, run_id: int) -> list[dict[str, Any]]:
    """Per-command breakdown of throughput trials: calls, share, cost per call.

    Valid trials only, except in a cell with none (the built-in driver's throughput is never
    valid): the server's counts are still right there, and the row says it is untrusted.
    """
    frame = pd.DataFrame(store.command_stats(run_id))
    if frame.empty:
        return []
    frame = frame[frame["mode"] == "throughput"]
    cell = ["workload", "point", "target"]
    frame["cell_has_valid"] = frame.groupby(cell)["valid"].transform("any")
    frame = frame[frame["valid"] | ~frame["cell_has_valid"]]
    server = frame[(frame["source"] == "server") & ~frame["command"].isin(TOOLING_COMMANDS)]
    per_cell = server.groupby(["workload", "point", "target"])["command"].nunique()
    if server.empty or per_cell.max() < 2:
        return []  # a single-command sweep: nothing to break down
    loadgen = frame[frame["source"] == "loadgen"].set_index(
        ["workload", "point", "target", "command"]
    )
    totals = server.groupby(cell)["calls"].sum()
    rows = []
    keys = ["workload", "point", "point_order", "target", "command"]
    for (workload, point, order, target, command), group in server.groupby(keys, sort=True):
        calls = float(group["calls"].sum())
        usec = float(group["usec"].sum())
        total = float(totals[(workload, point, target)])
        client = (
            loadgen.loc[[(workload, point, target, command)]]
            if (workload, point, target, command) in loadgen.index
            else None
        )
        rows.append(
            {
                "workload": workload,
                "point": point,
                "point_order": order,
                "target": target,
                "command": command,
                "calls": calls,
                "share_pct": 100.0 * calls / total if total else None,
                "usec_per_call": usec / calls if calls else None,
                "failed_calls": float(group["failed_calls"].fillna(0).sum()),
                "trusted": bool(group["valid"].all()),
                "client_p99_ms": (
                    float(client["p99_ms"].median())
                    if client is not None and client["p99_ms"].notna().any()
                    else None
                ),
            }
        )
    return sorted(rows, key=lambda r: (r["workload"], r["point_order"], r["target"], -r["calls"]))


def _attribution(store: Store, run_id: int, result: ComparisonResult) -> list[dict[str, Any]]:
    costs = loaded.costs(store, run_id)
    if costs.costs.empty:
        return []
    attributions = []
    for candidate in result.targets:
        if candidate == result.baseline:
            continue
        try:
            attributions += attribution.attribute(
                costs, result.baseline, candidate, None, ATTRIBUTION_TOP
            )
        except BadInput:
            continue  # a side without valid instruction trials: the table says why
    return attributions


def _commit(target: dict[str, Any]) -> str:
    """The exact commit, else the git sha the server was built with (0 when unknown)."""
    if target.get("commit_sha"):
        return str(target["commit_sha"])
    sha = str((target.get("server_info") or {}).get("redis_git_sha1") or "")
    return "" if not sha.strip("0") else sha


def _environment(run: dict[str, Any], targets: list[dict[str, Any]]) -> dict[str, Any]:
    env = dict(run.get("environment") or {})
    loadgen = run.get("loadgen") or {}
    table = ((run.get("config") or {}).get("workload") or {}).get("server") or {}
    versions = []
    for t in targets:
        build = (t.get("details") or {}).get("build") or {}
        docker = (t.get("details") or {}).get("docker") or {}
        applied = (t.get("details") or {}).get("server_config", table)
        versions.append(
            {
                "label": t["label"],
                "spec": t["spec"],
                "kind": t["kind"],
                "redis_version": t.get("redis_version") or "",
                "commit": _commit(t),
                "build_flags": flags_text(build)
                if build.get("flags") or build.get("environment")
                else "(default)",
                "compiler": build.get("compiler", ""),
                "image": docker.get("image", ""),
                "binary_sha256": (t.get("binary_sha256") or "")[:16],
                # What this version's servers ran with: the run's settings, less optional
                # ones it did not know.
                "server": ", ".join(f"{k.removesuffix('?')} {v}" for k, v in applied.items())
                or "defaults",
                "server_without": ", ".join(server_config.skipped(table, applied)),
            }
        )
    data = (run.get("config") or {}).get("server_data") or {}
    shown = {k: data.get(k) for k in ("dir", "mount", "filesystem", "device") if data.get(k)}
    return {
        "machine": env,
        "loadgen": loadgen,
        "versions": versions,
        "server_data": shown if data.get("persistent") else {},
    }


def _seeds(run: dict[str, Any], trials: list[dict[str, Any]]) -> dict[str, Any]:
    """How the servers' hash seeds were chosen, and each repetition's seed."""
    by_rep = {t["repetition"] + 1: t.get("seed") for t in trials if t.get("seed")}
    control = (run.get("config") or {}).get("seeds") or "not recorded (Redis's own)"
    return {"control": control, "by_repetition": sorted(by_rep.items())}


def run_page(
    store: Store,
    run: dict[str, Any],
    result: ComparisonResult | None,
    history_links: dict,
    summary: dict[str, Any],
    trials: list[dict[str, Any]],
) -> dict[str, Any]:
    """Everything the run page shows; ``result`` is this run's comparison (or None),
    ``summary`` its index row and ``trials`` its stored trials."""
    run_id = run["id"]
    targets = store.targets(run_id)
    page: dict[str, Any] = {
        "run": run,
        "summary": summary,
        "environment": _environment(run, targets),
        "invalid": _invalid_trials(trials),
        "seeds": _seeds(run, trials),
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
        charts=_charts(result),
        comparisons=_comparison_rows(result),
        pooled=[
            {
                **p.to_json(),
                "change_text": tables.change_text(p),
                "verdict_class": "v-" + p.verdict.replace(" ", "-"),
            }
            for p in result.pooled
        ],
        baseline=result.baseline,
        markdown=tables.render(result, "markdown"),
        disagreements=list(result.disagreements),
        attribution=_attribution(store, run_id, result),
        commands=_commands(store, run_id),
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


# A history page's table lists the newest values; its charts draw all of them. A tracked
# branch has thousands, and rendering every row is most of an end-of-run report's time.
