"""`regtrack run`: measure versions at every workload point and print the comparison."""

from __future__ import annotations

from typing import Any

import click

from regtrack.cli.group import EXIT_CODES_HELP, cli
from regtrack.cli.options import measure_options, sequential_options, shard_options
from regtrack.core.errors import BadInput


@cli.command(epilog=EXIT_CODES_HELP)
@click.option(
    "--versions",
    "version_specs",
    help="Comma-separated specs, each optionally labelled: a=bin:/usr/bin/redis-server,...",
)
@click.option(
    "--resume",
    "resume_id",
    type=int,
    help="Measure only what run ID is missing (interrupted, failed, incomplete), with its "
    "own plan and binaries.",
)
@click.option("--baseline", help="Label the table compares against (default: the first version).")
@click.option("--threshold", type=float, help="Verdict threshold in percent, for every metric.")
@click.option(
    "--until-decided",
    is_flag=True,
    help="Add blocks of repetitions (A B, B A) until every version's gating answer is "
    "decided, within --budget and --max-repetitions.",
)
@sequential_options
@shard_options
@measure_options
def run(
    version_specs: str | None,
    resume_id: int | None,
    baseline: str | None,
    threshold: float | None,
    until_decided: bool,
    budget: str,
    max_repetitions: int,
    **kw: Any,
) -> None:
    """Measure every version at every workload point, interleaved, and store each trial."""
    from regtrack.analysis import comparison as comparisons
    from regtrack.cli.steps import auto_report, measure, prepare
    from regtrack.core.settings import load_settings, load_thresholds
    from regtrack.flows import orchestrate, resume
    from regtrack.output import tables as text_tables
    from regtrack.results import loaded
    from regtrack.results.store import Store
    from regtrack.targets import versions

    wait = not kw["no_wait"]
    if resume_id is not None:
        if version_specs:
            raise BadInput("--resume measures the run's own versions: leave out --versions")
        if baseline or threshold is not None:
            raise BadInput(
                "--resume keeps the run's own --baseline and --threshold (its report says what "
                "it printed): see it otherwise with regtrack compare --baseline/--threshold"
            )
        resumed = Store.open(kw["db"] or load_settings().database, create=False)
        job = resume.load_job(resumed, resume_id)
        baseline, thresholds = comparisons.comparison_settings(
            resumed.run(resume_id), None, None, load_thresholds(None)
        )
        store, run_id, status = measure(job, kw["db"], wait, (resumed, resume_id))
    else:
        if not version_specs:
            raise BadInput("give --versions SPECS (or --resume RUN_ID)")
        specs = versions.parse_specs(version_specs)
        if baseline and baseline not in [s.label for s in specs]:
            raise BadInput(f"--baseline {baseline!r} is not one of the labels of --versions")
        thresholds = load_thresholds(threshold)
        job = prepare(specs, kw, metric="throughput")
        job.comparison = {
            "baseline": baseline or job.targets[0].label,
            "thresholds": thresholds.model_dump(),
        }
        rule = None
        if until_decided:
            rule = orchestrate.sequential_rule(
                job,
                budget,
                max_repetitions,
                lambda st, rid: comparisons.compare(loaded.run(st, rid), baseline, thresholds),
            )
        store, run_id, status = measure(job, kw["db"], wait, sequential=rule)
    try:
        result = comparisons.compare(loaded.run(store, run_id), baseline, thresholds)
    except BadInput:  # nothing valid to compare: a measuring failure, said as such (exit 3)
        orchestrate.fail_if_incomplete(store, run_id, status)
        raise
    shown = ["throughput", "instructions_per_op", "syscalls_per_op"]
    click.echo(text_tables.render(result, "table", shown))
    click.echo(
        f"Results: {store.path} (run {run_id}). More: regtrack compare --db {store.path} "
        f"--run {run_id} --format markdown|csv|json"
    )
    if kw["report"]:
        auto_report(store, run_id)
    orchestrate.fail_if_incomplete(store, run_id, status)
