"""Commands that read the database: compare, explain, report, and versions (which resolves)."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING

import click

from regtrack.analysis.metrics import HISTORY_METRICS, METRICS
from regtrack.cli.options import (
    EXIT_CODES_HELP,
    cli,
    db_option,
    range_options,
    source_repo_option,
    threshold_option,
)
from regtrack.output import tables

if TYPE_CHECKING:
    from regtrack.flows.readout import RunLine

# Each command imports the analysis it runs when it runs: `--help` must not pay for pandas.


@cli.command(epilog=EXIT_CODES_HELP)
@click.option(
    "--run", "run_ids", type=int, multiple=True, help="Run page(s) to write (default: every run)."
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    help="Report folder (default: the database's folder, reports/ for the default database).",
)
@db_option
def report(run_ids: tuple[int, ...], out: str | None, db: str | None) -> None:
    """Write HTML pages: every run, each run's charts and tables, history with change points."""
    from regtrack.core.settings import load_settings
    from regtrack.flows import report as derived
    from regtrack.output.report import write_report
    from regtrack.results.store import Store

    store = Store.open(db or load_settings().database, create=False)
    data = derived.gather(store, list(run_ids) or None)
    files = write_report(data, out or store.path.parent)
    for path in files.runs.values():
        click.echo(f"Run page: {path}")
    click.echo(f"{len(files.histories)} history pages; index: {files.index}")


@cli.command(name="versions", epilog=EXIT_CODES_HELP)
@click.argument("specs")
@source_repo_option
@range_options
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
def versions_command(
    specs: str, source_repo: str | None, every: int | None, max_commits: int | None, fmt: str
) -> None:
    """Show how version SPECS resolve (label, kind, exact commit, ref) without building.

    A range A..B lists the first-parent commits it measures, with dates and subjects."""
    from regtrack.targets import versions

    parsed = versions.parse_specs(specs)
    targets = versions.resolve(parsed, source_repo, every=every, most=max_commits)
    rows = [
        {
            "label": t.label,
            "kind": t.kind,
            "commit": t.commit or "",
            "ref": t.ref or "",
            "version": t.source_version or "",
            "date": t.commit_date or "",
            "subject": t.subject or "",
            "path": t.binary or t.tree or "",
            "sha256": t.binary_sha256 or "",
            "source_repo": t.source_repo or "",
        }
        for t in targets
    ]
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(tables.versions_table(rows))


@cli.command(epilog=EXIT_CODES_HELP, renamed={"--metric": "--show"})
@click.option("--run", "run_id", type=int, help="Run to compare (default: the newest).")
@click.option("--baseline", help="Version label to compare against (default: the first).")
@click.option("--format", "fmt", type=click.Choice(tables.FORMATS), default="table")
@click.option(
    "--show",
    "metrics",
    multiple=True,
    type=click.Choice([m.name for m in METRICS]),
    help="Metrics to show (repeatable; default: all).",
)
@click.option("--list", "list_runs", is_flag=True, help="List the runs in the database.")
@threshold_option("compare")
@click.option(
    "--baseline-run",
    type=int,
    help="Compare --run's --candidate with --baseline of this other run (unpaired).",
)
@click.option("--candidate", help="With --baseline-run: the version of --run (default: first).")
@click.option(
    "--force", is_flag=True, help="With --baseline-run: compare runs measured differently."
)
@db_option
def compare(
    run_id: int | None,
    baseline: str | None,
    fmt: str,
    metrics: tuple[str, ...],
    list_runs: bool,
    threshold: float | None,
    baseline_run: int | None,
    candidate: str | None,
    force: bool,
    db: str | None,
) -> None:
    """Print % change tables of every version against a baseline."""
    from regtrack.core.settings import load_settings
    from regtrack.flows import readout
    from regtrack.results.store import Store

    store = Store.open(db or load_settings().database, create=False)
    if list_runs:
        _list_runs(readout.runs(store), fmt)
        return
    run_id = run_id or store.latest_run_id()
    if baseline_run is not None:
        result = readout.across_runs(
            store, baseline_run, baseline, run_id, candidate, threshold, force
        )
    else:
        result = readout.within_run(store, run_id, baseline, threshold)
    click.echo(tables.render(result, fmt, list(metrics) or None))


def _list_runs(runs: list[RunLine], fmt: str) -> None:
    """`compare --list`: every run of the database, a line each (or JSON)."""
    from regtrack.output import listings

    if fmt == "json":
        items = [{**dataclasses.asdict(r), "labels": list(r.labels)} for r in runs]
        click.echo(listings.document("runs", items))
        return
    from regtrack.core.text import printable

    for r in runs:  # stored text: shown, never acted on by the terminal
        click.echo(
            f"run {r.id}  {printable(r.created_at)}  {printable(r.status):<11}  "
            f"{r.n_trials:>4} trials  {', '.join(printable(label) for label in r.labels)}"
        )


@cli.command(epilog=EXIT_CODES_HELP)
@click.option("--run", "run_id", type=int, help="Run to explain (default: the newest).")
@click.option("--baseline", required=True, help="Version label the change is measured from.")
@click.option("--candidate", required=True, help="Version label the change is measured to.")
@click.option("--point", help="One workload point, e.g. pipeline=10 (default: every point).")
@click.option("--top", type=click.IntRange(1, 500), default=15, show_default=True)
@click.option(
    "--metric",
    type=click.Choice(["instructions", "cycles"]),
    default="instructions",
    show_default=True,
    help="The cost per function: instructions, or simulated cycles with each function's "
    "L1, last-level and branch misses per op (a run measured with --metric cycles).",
)
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "json"]), default="table")
@db_option
def explain(
    run_id: int | None,
    baseline: str,
    candidate: str,
    point: str | None,
    top: int,
    metric: str,
    fmt: str,
    db: str | None,
) -> None:
    """Which functions' instructions per op changed between two versions (measured with
    --metric instructions); with --metric cycles, their simulated cycles and misses."""
    from regtrack.core.settings import load_settings
    from regtrack.flows import readout
    from regtrack.results.store import Store

    store = Store.open(db or load_settings().database, create=False)
    attributions = readout.functions(store, run_id, baseline, candidate, point, top, metric)
    click.echo(tables.attribution(attributions, fmt))


@cli.command(epilog=EXIT_CODES_HELP)
@click.option("--run", "run_id", type=int, help="Run to read (default: the newest).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@click.option(
    "--hgrm",
    "hgrm_dir",
    type=click.Path(file_okay=False),
    help="Also write each version's histogram per point as .hgrm files into this folder.",
)
@db_option
def latency(run_id: int | None, fmt: str, hgrm_dir: str | None, db: str | None) -> None:
    """Open-loop latency (run --rate/--load) per version and point: percentiles of the
    merged HDR histogram of its valid trials, timed from the intended send times."""
    from regtrack.core.settings import load_settings
    from regtrack.flows import readout
    from regtrack.output import latency_text
    from regtrack.results.store import Store

    store = Store.open(db or load_settings().database, create=False)
    found = readout.latency(store, run_id)
    click.echo(latency_text.document(found) if fmt == "json" else latency_text.table(found))
    if hgrm_dir:
        for path in latency_text.write_hgrm(found, hgrm_dir):
            click.echo(f"wrote {path}", err=True)


@cli.command(name="history", epilog=EXIT_CODES_HELP, renamed={"--metric": "--show"})
@click.option("--workload", help="Only this workload (default: every one).")
@click.option("--point", help="Only this point, e.g. pipeline=10 (default: every one).")
@click.option(
    "--show",
    "metric",
    type=click.Choice(list(HISTORY_METRICS)),
    default="instructions_per_op",
    show_default=True,
    help="The metric shown.",
)
@click.option(
    "--by",
    type=click.Choice(["commit", "run"]),
    default="commit",
    show_default=True,
    help="Along commits in topological order, or along runs in time.",
)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@db_option
def history_command(
    workload: str | None, point: str | None, metric: str, by: str, fmt: str, db: str | None
) -> None:
    """One point's values over commits (or runs), with the steps found and where they are."""
    from regtrack.core.settings import load_settings
    from regtrack.flows import readout
    from regtrack.output import history_text, listings
    from regtrack.results.store import Store

    store = Store.open(db or load_settings().database, create=False)
    found = readout.point_history(store, metric, by, workload, point)
    if fmt == "json":
        more = {"steps": [s.to_json() for s in found.steps]} if found.by == "commit" else {}
        click.echo(listings.document("history", listings.history_items(found.rows), **more))
    elif found.by == "run":
        click.echo(history_text.by_run(found.rows, found.unit))
    else:
        click.echo(history_text.by_commit(found.rows, found.steps, found.unit))
