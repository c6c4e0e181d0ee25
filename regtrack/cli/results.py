"""Commands that read the database: compare, explain, report, and versions (which resolves)."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING

import click

from regtrack.analysis.metrics import HISTORY_METRICS, METRIC_BY_NAME, METRICS
from regtrack.cli.options import EXIT_CODES_HELP, cli, db_option, range_options, source_repo_option
from regtrack.core.errors import BadInput
from regtrack.output import tables

if TYPE_CHECKING:
    from regtrack.analysis.records import ComparisonResult
    from regtrack.results.store import Store

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
            "version": t.details.get("source_version") or "",
            "date": t.details.get("commit_date") or "",
            "subject": t.details.get("subject") or "",
            "path": t.binary or t.details.get("tree") or "",
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
@click.option("--threshold", type=float, help="Verdict threshold in percent, for every metric.")
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
    from regtrack.results.store import Store

    store = Store.open(db or load_settings().database, create=False)
    if list_runs:
        _list_runs(store, fmt)
        return
    run_id = run_id or store.latest_run_id()
    if baseline_run is not None:
        result = _across_runs(store, baseline_run, baseline, run_id, candidate, threshold, force)
    else:
        result = _within_run(store, run_id, baseline, threshold)
    click.echo(tables.render(result, fmt, list(metrics) or None))


def _list_runs(store: Store, fmt: str) -> None:
    """`compare --list`: every run of the database, a line each (or JSON)."""
    from regtrack.output import listings

    runs = [
        {**{k: r[k] for k in ("id", "created_at", "status", "n_trials")},
         "labels": [t["label"] for t in store.targets(r["id"])]}
        for r in store.runs()
    ]  # fmt: skip
    if fmt == "json":
        click.echo(listings.document("runs", runs))
        return
    for r in runs:
        click.echo(
            f"run {r['id']}  {r['created_at']}  {r['status']:<11}  {r['n_trials']:>4} trials  "
            f"{', '.join(r['labels'])}"
        )


def _within_run(
    store: Store, run_id: int, baseline: str | None, threshold: float | None
) -> ComparisonResult:
    """Every version of run ``run_id`` against its baseline, at the run's own thresholds
    unless --threshold is given."""
    from regtrack.analysis import comparison
    from regtrack.core.settings import load_thresholds
    from regtrack.results import loaded

    baseline, thresholds = comparison.comparison_settings(
        store.run(run_id),
        baseline,
        load_thresholds(threshold) if threshold is not None else None,
        load_thresholds(None),
    )
    return comparison.compare(loaded.run(store, run_id), baseline, thresholds)


def _across_runs(
    store: Store,
    baseline_run: int,
    baseline: str | None,
    run_id: int,
    candidate: str | None,
    threshold: float | None,
    force: bool,
) -> ComparisonResult:
    """A candidate of run ``run_id`` against a baseline of run ``baseline_run``: refused
    where the runs were not measured alike, unless --force (then said in the result)."""
    from regtrack.analysis import comparison
    from regtrack.core.settings import load_thresholds
    from regtrack.results import comparability, loaded

    forced = comparability.refuse_unless_forced(
        f"run {baseline_run}",
        comparability.of_run(store.run(baseline_run)),
        comparability.of_run(store.run(run_id)),
        force,
        "Compare versions measured in one run",
    )
    result = comparison.compare_runs(
        loaded.run(store, baseline_run),
        baseline or store.targets(baseline_run)[0]["label"],
        loaded.run(store, run_id),
        candidate or store.targets(run_id)[0]["label"],
        loaded.alike(store, run_id),
        load_thresholds(threshold),
    )
    return dataclasses.replace(result, forced=tuple(forced))


@cli.command(epilog=EXIT_CODES_HELP)
@click.option("--run", "run_id", type=int, help="Run to explain (default: the newest).")
@click.option("--baseline", required=True, help="Version label the change is measured from.")
@click.option("--candidate", required=True, help="Version label the change is measured to.")
@click.option("--point", help="One workload point, e.g. pipeline=10 (default: every point).")
@click.option("--top", type=click.IntRange(1, 500), default=15, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "json"]), default="table")
@db_option
def explain(
    run_id: int | None,
    baseline: str,
    candidate: str,
    point: str | None,
    top: int,
    fmt: str,
    db: str | None,
) -> None:
    """Which functions' instructions per op changed between two versions (measured with
    --metric instructions)."""
    from regtrack.analysis import attribution
    from regtrack.core.settings import load_settings
    from regtrack.results import loaded
    from regtrack.results.store import Store

    store = Store.open(db or load_settings().database, create=False)
    costs = loaded.costs(store, run_id or store.latest_run_id())
    attributions = attribution.attribute(costs, baseline, candidate, point, top)
    click.echo(tables.attribution(attributions, fmt))


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
    from regtrack.analysis import commit_history, history
    from regtrack.core.settings import load_settings
    from regtrack.output import history_text, listings
    from regtrack.results import loaded
    from regtrack.results.store import Store
    from regtrack.targets import commit_order

    store = Store.open(db or load_settings().database, create=False)
    frame = history.points(loaded.runs(store), (metric,))
    for column, wanted in (("workload", workload), ("point", point)):
        if wanted is not None and not frame.empty:
            frame = frame[frame[column] == wanted]
    if frame.empty:
        raise BadInput(f"no trusted {metric} values in {store.path} for that workload and point")
    unit = METRIC_BY_NAME[metric].unit
    if by == "run":
        if fmt == "json":
            click.echo(listings.document("history", listings.history_items(frame)))
        else:
            click.echo(history_text.by_run(frame, unit))
        return
    rows = commit_history.series(frame, commit_order.topological)
    if rows.empty:
        raise BadInput("no measured commits (tags, branches, commits, ranges): try --by run")
    steps = commit_history.steps(rows)
    if fmt == "json":
        click.echo(listings.document("history", listings.history_items(rows), steps=steps))
        return
    click.echo(history_text.by_commit(rows, steps, unit))
