"""Write the report folder: index.html, run-N.html, history-*.html and one plotly.min.js.

Templates autoescape everything: labels, specs, commit subjects and workload names are
user input and render as text. Figures are embedded with ``tojson``, which escapes ``<``,
so a ``</script>`` inside a label cannot end the script block. Pages load plotly.js from
the folder, not a CDN, so a report works offline and from ``file://``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from regtrack import __version__
from regtrack.analysis.report_data import ReportData
from regtrack.core import writes
from regtrack.output import answer_text
from regtrack.output.report import bisect_page, history_page, pages

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
    env.filters["interval"] = lambda rec: answer_text.interval_text(
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
    """Atomic (a browser, or a second regtrack, never sees half a page), and never through
    a link regtrack did not make (core/writes.py)."""
    writes.replace_text(path, text, "report page")


def _plotly_js(folder: Path) -> None:
    from plotly.offline import get_plotlyjs

    text = get_plotlyjs()
    target = folder / PLOTLY_JS
    digest = hashlib.sha256(text.encode()).hexdigest()
    kept = target.is_file() and not target.is_symlink() and target.stat().st_mode & 0o777 == 0o644
    if kept and hashlib.sha256(target.read_bytes()).hexdigest() == digest:
        return  # else written again: a copy mkstemp left 0600 is hidden from a web server
    _write(target, text)


def write_report(data: ReportData, folder: str | Path) -> ReportFiles:
    """Write (or refresh) the report: the index and history pages always, the run pages
    ``data`` holds (flows/report.py derived them)."""
    out = Path(folder)
    writes.make_dirs(out, "report folder")
    env = _environment()
    common = {"version": __version__, "database": data.database, "plotly": PLOTLY_JS}
    _plotly_js(out)
    summaries = {s.id: pages.run_summary(s) for s in data.summaries}
    histories = history_page.history_pages(data.history, data.by_commit, data.commit_steps)
    links = {(h["workload"], h["point"], h["metric"]): h["file"] for h in histories}
    files = ReportFiles(folder=out, index=out / "index.html")
    for shown in data.pages:
        run_id = shown.summary.id
        page = pages.run_page(shown, links, summaries[run_id])
        path = out / pages.run_file(run_id)
        _write(path, env.get_template("run.html.j2").render(page=page, **common))
        files.runs[run_id] = path
    for shown in histories:
        path = out / shown["file"]
        _write(path, env.get_template("history.html.j2").render(page=shown, **common))
        files.histories.append(path)
    bisects = [bisect_page.page(b) for b in data.bisections]
    for shown in bisects:
        path = out / shown["file"]
        _write(path, env.get_template("bisect.html.j2").render(page=shown, **common))
        files.bisections.append(path)
    rows = list(summaries.values())
    workloads = sorted({w for s in rows for w in s["workloads"]})
    _write(
        files.index,
        env.get_template("index.html.j2").render(
            runs=rows,
            workloads=workloads,
            histories=histories,
            bisections=bisects,
            **common,
        ),
    )
    return files
