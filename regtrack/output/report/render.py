"""Write the report folder: index.html, run-N.html, history-*.html and one plotly.min.js.

Templates autoescape everything: labels, specs, commit subjects and workload names are
user input and render as text. Figures are embedded with ``tojson``, which escapes ``<``,
so a ``</script>`` inside a label cannot end the script block. Pages load plotly.js from
the folder, not a CDN, so a report works offline and from ``file://``.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from regtrack import __version__
from regtrack.analysis import comparison, history
from regtrack.analysis.records import ComparisonResult
from regtrack.core.errors import BadInput
from regtrack.core.settings import load_thresholds
from regtrack.output import tables
from regtrack.output.report import bisect_page, history_page, pages
from regtrack.results import analysis_cache, bisections, comparability, loaded
from regtrack.results.store import Store

PLOTLY_JS = "plotly.min.js"


@dataclass
class ReportFiles:
    folder: Path
    index: Path
    runs: dict[int, Path] = field(default_factory=dict)
    histories: list[Path] = field(default_factory=list)
    bisections: list[Path] = field(default_factory=list)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("regtrack.output.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _num
    env.filters["pct"] = lambda v: "-" if v is None else f"{float(v):+.1f}%"
    env.filters["interval"] = lambda rec: tables.interval_text(
        rec.get("ci_low_pct"), rec.get("ci_high_pct")
    )
    return env


def _num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    try:
        return f"{float(value):,.{digits}f}"
    except (TypeError, ValueError):
        return str(value)


def _write(path: Path, text: str) -> None:
    """Atomic: a browser (or a second regtrack) never sees half a page."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the page from a web server
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _plotly_js(folder: Path) -> None:
    from plotly.offline import get_plotlyjs

    text = get_plotlyjs()
    target = folder / PLOTLY_JS
    digest = hashlib.sha256(text.encode()).hexdigest()
    if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == digest:
        target.chmod(0o644)
        return
    _write(target, text)


def write_report(store: Store, folder: str | Path, run_ids: list[int] | None = None) -> ReportFiles:
    """Write (or refresh) the report: the index and history pages always, run pages for
    ``run_ids`` (default: every run)."""
    out = Path(folder)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"cannot create the report folder {out}: {exc.strerror}") from None
    env = _environment()
    thresholds = load_thresholds(None)
    runs = store.runs()
    known = {r["id"] for r in runs}
    for run_id in run_ids or []:
        if run_id not in known:
            raise BadInput(f"run {run_id} is not in {store.path}: `regtrack compare --list`")
    wanted = set(run_ids) if run_ids else known
    common = {"version": __version__, "database": str(store.path), "plotly": PLOTLY_JS}
    _plotly_js(out)

    # One comparison per run feeds its index row, its run page and its history points; a
    # run whose trials and settings did not change since the last report is read back
    # from the store (results.analysis_cache) instead of being compared again.
    cached, marks = analysis_cache.load(store), analysis_cache.trial_marks(store)
    fresh: dict[int, tuple[ComparisonResult | None, list[dict], dict[str, Any]]] = {}
    summaries, rows = [], []
    for run in runs:
        settings = comparison.comparison_settings(run, None, None, thresholds)
        key = _cache_key(run, marks.get(run["id"]), settings)
        if run["id"] in cached and cached[run["id"]][0] == key and run["id"] not in wanted:
            _, summary, points = cached[run["id"]]
        else:
            measured = loaded.run(store, run["id"])
            result = pages.safe_compare(measured, *settings)
            trials = store.trials(run["id"])
            summary = pages.run_summary(store, run, result, trials)
            known = result.cells if result is not None else None
            points = history.run_points(measured, known=known)
            analysis_cache.save(store, run["id"], key, summary, points)
            fresh[run["id"]] = (result, trials, summary)
        summaries.append(summary)
        rows += points
    histories = history_page.history_pages(store, history.with_changes(rows))
    links = {(h["workload"], h["point"], h["metric"]): h["file"] for h in histories}
    files = ReportFiles(folder=out, index=out / "index.html")
    for run in runs:
        if run["id"] in wanted:
            result, trials, summary = fresh[run["id"]]
            page = pages.run_page(store, run, result, links, summary, trials)
            path = out / pages.run_file(run["id"])
            _write(path, env.get_template("run.html.j2").render(page=page, **common))
            files.runs[run["id"]] = path
    for shown in histories:
        path = out / shown["file"]
        _write(path, env.get_template("history.html.j2").render(page=shown, **common))
        files.histories.append(path)
    bisects = [
        bisect_page.page(b, bisections.runs(store, b["id"])) for b in bisections.all_of(store)
    ]
    for shown in bisects:
        path = out / shown["file"]
        _write(path, env.get_template("bisect.html.j2").render(page=shown, **common))
        files.bisections.append(path)
    workloads = sorted({w for s in summaries for w in s["workloads"]})
    _write(
        files.index,
        env.get_template("index.html.j2").render(
            runs=summaries,
            workloads=workloads,
            histories=histories,
            bisections=bisects,
            **common,
        ),
    )
    return files


# Bumped when what a run's index row or history points contain changes.
CACHE_FORMAT = 2  # 2: index rows say what the servers ran with


def _cache_key(run: dict[str, Any], marks: tuple[int, int] | None, settings: Any) -> str:
    """Everything a run's derived data depends on: its trials, status and comparison
    settings, its comparability key as derived now (a fact added to the key later moves
    its history series) and the regtrack that derived it."""
    baseline, thresholds = settings
    facts = [
        CACHE_FORMAT,
        __version__,
        run["status"],
        list(marks or (0, 0)),
        baseline,
        thresholds.model_dump(),
        comparability.of_run(run),
    ]
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()
