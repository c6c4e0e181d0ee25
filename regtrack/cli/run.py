"""`regtrack run`: measure versions at every workload point and print the comparison."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import click

from regtrack.cli.options import EXIT_CODES_HELP, cli, measuring, staged, threshold_option
from regtrack.core import options as option_specs
from regtrack.core.errors import BadInput
from regtrack.core.options import Options

if TYPE_CHECKING:
    from regtrack.analysis.records import ComparisonResult
    from regtrack.core.settings import Thresholds
    from regtrack.results.store import Store


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
@threshold_option("run")
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
    from regtrack.cli.steps import auto_report
    from regtrack.core.settings import load_thresholds
    from regtrack.flows import orchestrate, readout

    if resume_id is not None:
        if version_specs:
            raise BadInput("--resume measures the run's own versions: leave out --versions")
        if baseline or threshold is not None:
            raise BadInput(
                "--resume keeps the run's own --baseline and --threshold (its report says what "
                "it printed): see it otherwise with regtrack compare --baseline/--threshold"
            )
        store, run_id, status, baseline, thresholds = _resumed(resume_id, options)
    else:
        if not version_specs:
            raise BadInput("give --versions SPECS (or --resume RUN_ID)")
        thresholds = load_thresholds(threshold)
        if until_decided and not _given("repetitions"):
            # Blocks of two (A B, B A) from the start, as ci begins: not the settings' 3.
            first = option_specs.specs()["repetitions"].default("ci", None)
            options = dataclasses.replace(options, repetitions=first)
        store, run_id, status = _measured(
            version_specs, baseline, thresholds, until_decided, options
        )
    try:
        result = readout.compared(store, run_id, baseline, thresholds)
    except BadInput:  # nothing valid to compare: a measuring failure, said as such (exit 3)
        orchestrate.fail_if_incomplete(store, run_id, status)
        raise
    _present(store, run_id, result, baseline, thresholds, until_decided)
    click.echo(
        f"Results: {store.path} (run {run_id}). More: regtrack compare --db {store.path} "
        f"--run {run_id} --format markdown|csv|json"
    )
    if options.report:
        auto_report(store, run_id)
    orchestrate.fail_if_incomplete(store, run_id, status)


def _resumed(resume_id: int, options: Options) -> tuple[Store, int, str, str, Thresholds]:
    """The rest of run ``resume_id`` measured, with the baseline and thresholds it printed."""
    from regtrack.cli.steps import measure
    from regtrack.core.settings import load_settings
    from regtrack.flows import readout, resume
    from regtrack.results.store import Store

    resumed = Store.open(options.db or load_settings().database, create=False)
    job = resume.load_job(resumed, resume_id)
    baseline, thresholds = readout.printed_settings(resumed, resume_id)
    store, run_id, status = measure(job, options.db, not options.no_wait, (resumed, resume_id))
    return store, run_id, status, baseline, thresholds


def _present(
    store: Store,
    run_id: int,
    result: ComparisonResult,
    baseline: str | None,
    thresholds: Thresholds,
    until_decided: bool,
) -> None:
    """The run's tables, its capacity at the SLO (if it searched one) and its story."""
    from regtrack.flows import readout
    from regtrack.output import latency_text, story, tables

    shown = ["throughput", "instructions_per_op", "cycles_per_op", "l1_misses_per_op",
             "ll_misses_per_op", "branch_misses_per_op", "syscalls_per_op", "open_loop_p50",
             "open_loop_p99", "open_loop_p999"]  # fmt: skip
    click.echo(tables.render(result, "table", shown))
    slo = readout.slo_capacities(store, run_id, baseline, thresholds)
    if slo is not None:
        click.echo(latency_text.slo_lines(*slo) + "\n")
    more = "a longer --budget measures them" if until_decided else "--until-decided measures them"
    told = story.story(
        result,
        store.repetitions_reached(run_id),
        readout.behind_changes(store, run_id, result),
        more,
    )
    if told:
        click.echo(told + "\n")


def _given(name: str) -> bool:
    """Whether the command line named option ``name`` (not a default or a settings file)."""
    source = click.get_current_context().get_parameter_source(name)
    return source is click.core.ParameterSource.COMMANDLINE


def _measured(
    version_specs: str,
    baseline: str | None,
    thresholds: Thresholds,
    until_decided: bool,
    options: Options,
) -> tuple[Store, int, str]:
    """A new run of the versions, adding blocks until decided if asked."""
    from regtrack.bench.prepare import with_task_latency
    from regtrack.cli.steps import measure, prepare
    from regtrack.flows import orchestrate, readout
    from regtrack.plan.records import Printed, RunPurpose
    from regtrack.targets import versions

    specs = versions.parse_specs(version_specs)
    if baseline and baseline not in [s.label for s in specs]:
        raise BadInput(f"--baseline {baseline!r} is not one of the labels of --versions")
    job = prepare(specs, with_task_latency(options))
    purpose = RunPurpose(
        "sequential" if until_decided else "fixed",
        Printed(baseline or job.targets[0].label, thresholds),
    )
    rule = None
    if until_decided:
        rule = orchestrate.sequential_rule(
            job,
            options.budget,
            options.max_repetitions,
            lambda st, rid: readout.compared(st, rid, baseline, thresholds),
        )
    return measure(job, options.db, not options.no_wait, sequential=rule, purpose=purpose)
