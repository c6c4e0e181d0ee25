"""The steps the measuring commands share around bench: prepare the Job with build progress
and notes, measure with trial progress, write the report.

Imported by a command when it runs, never at start-up: it pulls in the measuring and
analysis libraries.
"""

from __future__ import annotations

import dataclasses

import click

from regtrack.bench import shards
from regtrack.bench.job import Job, RunPurpose
from regtrack.bench.loadgen.builtin import THROUGHPUT_CAVEAT
from regtrack.bench.measuring import Measuring
from regtrack.bench.prepare import prepare_job
from regtrack.bench.real import RealBench
from regtrack.bench.runner import BlockRule
from regtrack.core import cycles, writes
from regtrack.core.errors import BadInput, RegtrackError
from regtrack.core.options import Options
from regtrack.core.settings import load_settings
from regtrack.flows import orchestrate, report
from regtrack.output.console import build_progress, err, run_progress
from regtrack.output.report import write_report
from regtrack.results.store import Store
from regtrack.targets import versions
from regtrack.workloads import points


def prepare(specs: list[versions.VersionSpec], options: Options) -> Job:
    """The Job, built with progress, then what the user should know about it: cached or
    fresh builds, load generator caveats, blocking mixes, uncontrolled seeds."""
    # Which shard this host measures is read (and a bad --shard refused) before building;
    # so is a database regtrack may not use (a link, or in the checkout under CI).
    shard = shards.current(options.shard_spec, options.shard_count)
    writes.database_path(options.db or load_settings().database)
    options = dataclasses.replace(options, shard=shard)
    with build_progress() as phase:
        job = prepare_job(specs, options, phase)
    for target in job.targets:
        if (b := target.build) is not None:
            how = "cached build" if b.cached else f"built in {b.seconds or 0:.0f} s"
            what = b.server_version or f"image {target.image}"
            err.print(f"regtrack: {target.label}: {how}: {what}")
    if job.shard is not None:
        mine, total = shards.counts(job.planned(), job.shard)
        if mine == 0:
            raise BadInput(
                f"shard {job.shard.label}: the plan has only {total} blocks for "
                f"{job.shard.count} shards, none for this one; give more --repetitions "
                "(a throughput block is a pair of them) or fewer shards"
            )
        err.print(
            f"regtrack: shard {job.shard.label} (from {job.shard.source}): {mine} of {total} "
            f"blocks of plan {job.config().plan_id}"
        )
    for skipped in job.skipped:
        what = f"{skipped.label} ({skipped.subject})"
        err.print(f"regtrack: skipped {what}: {skipped.reason}")
    if job.loadgen.name == "builtin" and job.metric not in cycles.COUNTING_ONLY:
        err.print(f"regtrack: note: {THROUGHPUT_CAVEAT}")
    if job.workload.kind == "driver":
        err.print(
            "regtrack: note: your --driver program sets the pace: its tasks/s is its own, "
            "and the server's work per task is what to compare"
        )
    elif job.workload.kind == "lifecycle":
        err.print(
            f"regtrack: note: {job.workload.name} is a task lifecycle: capacity is tasks/s at "
            f"{job.workload.consumers} consumers (not necessarily the server's limit); task "
            "latency is measured open loop at the stated rates"
        )
    elif not points.saturates(job.workload):
        err.print(
            f"regtrack: note: {job.workload.name} has blocking commands, which wait by "
            "design: its trials are exempt from the server-bound check, and its throughput "
            "is the mix's pace, not the server's capacity"
        )
    if job.docker_images:
        err.print(f"regtrack: docker images: {job.docker_images} for every version")
    if job.seed_problem:
        err.print(
            f"regtrack: warning: hash seeds are not controlled ({job.seed_problem}); "
            "instructions per op then vary ~2-4% between server processes"
        )
    return job


def measuring() -> Measuring:
    """How this command measures: what main() was handed (click's context ``obj``: a
    test's model), else on this host's real servers."""
    given = click.get_current_context().obj
    return given if given is not None else RealBench()


def measure(
    job: Job,
    db: str | None,
    wait: bool = True,
    resume_store: tuple[Store, int] | None = None,
    sequential: BlockRule | None = None,
    purpose: RunPurpose = RunPurpose(),
) -> tuple[Store, int, str]:
    """flows.orchestrate.measure with its messages and trial progress on the terminal."""
    return orchestrate.measure(
        job, measuring(), db, say, run_progress, wait=wait, resume_store=resume_store,
        sequential=sequential, purpose=purpose,
    )  # fmt: skip


def say(text: str) -> None:
    err.print(f"regtrack: {text}")


def auto_report(store: Store, run_id: int) -> None:
    """The report of a finished run; failing to write it never fails the measured run."""
    try:
        files = write_report(report.gather(store, [run_id]), store.path.parent)
    except (RegtrackError, OSError) as exc:
        err.print(f"regtrack: warning: the HTML report was not written: {exc}")
        return
    click.echo(f"Report: {files.runs[run_id]}")
