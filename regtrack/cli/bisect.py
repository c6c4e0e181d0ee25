"""`regtrack bisect`: the first commit between --good and --bad that made the metric worse."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import click

from regtrack.cli.options import EXIT_CODES_HELP, cli, measuring, staged, threshold_option
from regtrack.core.errors import BadInput, RegtrackError
from regtrack.core.options import Options

if TYPE_CHECKING:
    from regtrack.results.store import Store


def _point(point: str | None) -> int | None:
    """--point pipeline=N -> the pipelines option; other points are not bisectable yet."""
    if point is None:
        return None
    name, _, value = point.partition("=")
    if name != "pipeline" or not value.isdigit() or int(value) < 1:
        raise BadInput(f"--point {point!r}: give a GET pipeline point like pipeline=10")
    return int(value)


BISECT_HELP = """Find the commit between --good and --bad that made the workload worse.

\b
Method (docs/bisect.md):
1. Both ends are measured together until bad is decided worse than good by the
   threshold (else exit 2: nothing to bisect).
2. Each commit is measured until its *position* is decided: is its change against
   good above or below half of the interval's change? Undecided when the budget is
   spent: its point estimate places it. Never skipped for want of a verdict, so
   steps smaller than the threshold still halve the range. Instructions per op:
   the commit is paired seed by seed with the ends' run, which measures more seeds
   with it when it needs more than the ends have.
3. The search ends on two neighbouring commits. If they carry at least a quarter of
   the interval's change, that is a step (measured once more as parent and child,
   with the functions that moved); else the change is spread (a drift or many small
   steps) and the answer says where half of it is in.
4. While a measured commit is decided between the ends' levels and what was found
   carries less than three quarters of the ends' change, the interval that still
   changes most is searched too (--all-steps: every interval that changes by a
   quarter, by estimate).

\b
Commits measured besides the ends, for N commits (benchmarks/bisect_scale.py): one
step, log2 N (10 for 1,024); two steps, 2 log2 N (19); a drift, log2 N; +1 per
commit that does not build.
"""


@cli.command(help=BISECT_HELP, epilog=EXIT_CODES_HELP)
@staged("versions", "--good", help="An older commit, tag or branch where the metric was good.")
@staged(
    "versions",
    "--bad",
    help="A newer commit, tag or branch of the same line where it is worse.",
)
@staged(
    "versions",
    "--resume",
    "resume_id",
    type=int,
    is_flag=False,
    flag_value=0,
    default=None,
    metavar="[ID]",
    help="Continue an interrupted bisection (the newest unfinished one, or ID).",
)
@staged(
    "workload",
    "--point",
    help="One workload point, e.g. pipeline=10.",
    unset="the pipelines below",
)
@threshold_option("bisect")
@staged(
    "statistics",
    "--all-steps",
    is_flag=True,
    help="Search every interval that still changes by a quarter of the ends' change, not "
    "only until the changes found carry three quarters of it.",
)
@staged("output", "--json", "json_out", type=click.Path(dir_okay=False), help="Write it as JSON.")
@measuring("bisect")
def bisect(
    good: str | None,
    bad: str | None,
    resume_id: int | None,
    point: str | None,
    threshold: float | None,
    all_steps: bool,
    json_out: str | None,
    options: Options,
) -> None:
    """`regtrack bisect` (its help: BISECT_HELP, kept apart from the code)."""
    from regtrack.cli.steps import measuring, say
    from regtrack.core import writes
    from regtrack.flows import bisect_search
    from regtrack.flows.bisect import Bisector, Hooks
    from regtrack.output import bisect_text
    from regtrack.output.console import run_progress
    from regtrack.results import bisections

    if json_out:  # refused now, not after the bisection: no link regtrack did not make
        writes.checked(json_out, "JSON file")
    if resume_id is not None and (good or bad):
        raise BadInput("--resume continues a bisection with its own --good and --bad")
    if resume_id is None and not (good and bad):
        raise BadInput("give --good COMMIT and --bad COMMIT (or --resume)")
    store, bisection_id = (
        _resumed(options.db, resume_id)
        if resume_id is not None
        else _started(good or "", bad or "", point, threshold, all_steps, options)
    )
    # The search itself never prints: what it says reaches the command line through these.
    hooks = Hooks(say=say, progress=run_progress, change_text=bisect_text.change_text)
    bisector = Bisector(store, bisection_id, hooks, options.db, not options.no_wait, measuring())
    bisect_search.run(bisector)
    record = bisections.get(store, bisection_id)
    click.echo(bisect_text.render(record))
    if json_out:
        writes.replace_text(json_out, bisect_text.render(record, "json"), "JSON file")
    if options.report:
        _report(store, list(record.runs), bisection_id)


def _resumed(db: str | None, resume_id: int) -> tuple[Store, int]:
    """The stored bisection --resume names (0: the latest unfinished), if unfinished."""
    from regtrack.cli.steps import say
    from regtrack.core.settings import load_settings
    from regtrack.results import bisections
    from regtrack.results.store import Store

    store = Store.open(db or load_settings().database, create=False)
    bisection_id = resume_id or bisections.latest_unfinished(store)
    if bisections.get(store, bisection_id).status in bisections.FINISHED:
        raise BadInput(f"bisection {bisection_id} has finished: nothing to resume")
    say(f"resuming bisection {bisection_id}")
    return store, bisection_id


def _started(
    good: str,
    bad: str,
    point: str | None,
    threshold: float | None,
    all_steps: bool,
    options: Options,
) -> tuple[Store, int]:
    """A new bisection of good..bad, recorded with what it was asked."""
    from regtrack.cli.steps import say
    from regtrack.core.settings import load_thresholds
    from regtrack.flows import bisect_request

    pipeline = _point(point)
    if pipeline:
        options = dataclasses.replace(options, pipelines=[pipeline])
    request = bisect_request.Request(
        good=good,
        bad=bad,
        metric=options.metric,
        threshold=threshold or getattr(load_thresholds(None), options.metric),
        all_steps=all_steps,
        budget=options.budget,
        max_repetitions=options.max_repetitions,
        options=options,
    )
    store, bisection_id = bisect_request.start(request, options.db)
    say(f"bisection {bisection_id}: {good}..{bad}")
    return store, bisection_id


def _report(store: Store, runs: list[int], bisection_id: int) -> None:
    """The bisection's page and its runs' pages; failing to write them fails nothing."""
    from regtrack.flows import report
    from regtrack.output.console import err
    from regtrack.output.report import bisect_page, write_report

    try:
        files = write_report(report.gather(store, runs or None), store.path.parent)
    except (RegtrackError, OSError) as exc:
        err.print(f"regtrack: warning: the HTML report was not written: {exc}")
        return
    page = files.folder / bisect_page.bisect_file(bisection_id)
    click.echo(f"Report: {page}")
