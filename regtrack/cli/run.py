"""`regtrack run`: measure versions at every workload point and print the comparison."""

from __future__ import annotations

import click

from regtrack.cli.group import EXIT_CODES_HELP, cli
from regtrack.cli.options import THRESHOLD, measuring, staged
from regtrack.core.errors import BadInput
from regtrack.core.options import Options


@cli.command(epilog=EXIT_CODES_HELP)
@staged(
    "versions",
    "--versions",
    "version_specs",
    metavar="SPECS",
    help="Comma-separated specs, each optionally labelled: a=bin:/usr/bin/redis-server,...",
)
@staged(
    "versions",
    "--resume",
    "resume_id",
    type=int,
    metavar="RUN_ID",
    help="Measure only what run ID is missing (interrupted, failed, incomplete), with its "
    "own plan and binaries.",
)
@staged(
    "statistics",
    "--baseline",
    metavar="LABEL",
    help="Label the table compares against.",
    unset="the first version",
)
@THRESHOLD
@staged(
    "statistics",
    "--until-decided",
    is_flag=True,
    help="Add blocks of repetitions (A B, B A) until every version's gating answer is "
    "decided, within --budget and --max-repetitions.",
)
@measuring("run")
def run(
    version_specs: str | None,
    resume_id: int | None,
    baseline: str | None,
    threshold: float | None,
    until_decided: bool,
    options: Options,
) -> None:
    """Measure every version at every workload point, interleaved, and store each trial."""
    from regtrack.analysis import comparison as comparisons
    from regtrack.bench.job import RunPurpose
    from regtrack.cli.steps import auto_report, measure, prepare
    from regtrack.core.settings import load_settings, load_thresholds
    from regtrack.flows import orchestrate, resume
    from regtrack.output import tables as text_tables
    from regtrack.results import loaded
    from regtrack.results.store import Store
    from regtrack.targets import versions

    wait = not options.no_wait
    if resume_id is not None:
        if version_specs:
            raise BadInput("--resume measures the run's own versions: leave out --versions")
        if baseline or threshold is not None:
            raise BadInput(
                "--resume keeps the run's own --baseline and --threshold (its report says what "
                "it printed): see it otherwise with regtrack compare --baseline/--threshold"
            )
        resumed = Store.open(options.db or load_settings().database, create=False)
        job = resume.load_job(resumed, resume_id)
        baseline, thresholds = comparisons.comparison_settings(
            resumed.run(resume_id), None, None, load_thresholds(None)
        )
        store, run_id, status = measure(job, options.db, wait, (resumed, resume_id))
    else:
        if not version_specs:
            raise BadInput("give --versions SPECS (or --resume RUN_ID)")
        specs = versions.parse_specs(version_specs)
        if baseline and baseline not in [s.label for s in specs]:
            raise BadInput(f"--baseline {baseline!r} is not one of the labels of --versions")
        thresholds = load_thresholds(threshold)
        job = prepare(specs, options)
        purpose = RunPurpose(
            "sequential" if until_decided else "fixed",
            {"baseline": baseline or job.targets[0].label, "thresholds": thresholds.model_dump()},
        )
        rule = None
        if until_decided:
            rule = orchestrate.sequential_rule(
                job,
                options.budget,
                options.max_repetitions,
                lambda st, rid: comparisons.compare(loaded.run(st, rid), baseline, thresholds),
            )
        store, run_id, status = measure(job, options.db, wait, sequential=rule, purpose=purpose)
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
    if options.report:
        auto_report(store, run_id)
    orchestrate.fail_if_incomplete(store, run_id, status)
