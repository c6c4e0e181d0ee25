"""Command line: parse options, call the layers in order, map failures to exit codes."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from regtrack import (
    __version__,
    analysis,
    attribution,
    capture,
    comparability,
    cpulock,
    diagnose,
    environment,
    interrupts,
    present,
    resume,
    versions,
    workloads,
)
from regtrack.config import load_settings, load_thresholds
from regtrack.console import build_progress, err, run_progress
from regtrack.errors import (
    EXIT_BAD_INPUT,
    EXIT_CANNOT_MEASURE,
    EXIT_INTERRUPTED,
    EXIT_REGRESSION,
    BadInput,
    CannotMeasure,
    Interrupted,
    RegtrackError,
)
from regtrack.loadgen.builtin import THROUGHPUT_CAVEAT
from regtrack.prepare import Options, int_list, parse_duration, prepare_job
from regtrack.report import write_report
from regtrack.runner import Job, Sequential, execute
from regtrack.runtimes import docker as docker_runtime
from regtrack.store import Store

EXIT_CODES_HELP = """
Exit codes: 0 success (no regression), 1 regression found (ci), 2 bad usage or input,
3 could not measure (tool, server or environment failure), 130 interrupted.
"""


def _source_repo_option(f):
    return click.option(
        "--source-repo",
        help="Git repository URL or path that tags, branches and commits resolve in "
        "(default: upstream Redis; a fork such as Valkey, or an offline mirror).",
        envvar="REGTRACK_SOURCE_REPO",
    )(f)


def _db_option(f):
    return click.option(
        "--db",
        "db",
        type=click.Path(dir_okay=False),
        default=None,
        help="SQLite database (default: reports/regtrack.db, or $REGTRACK_DB).",
        envvar="REGTRACK_DB",
    )(f)


MEASURE_OPTIONS = [
    click.option("--workload", default="get-pipeline", show_default=True, help="Name or .toml."),
    click.option("--pipelines", help="GET pipeline depths, e.g. 1,10,30 (default: workload's)."),
    click.option("--duration", type=float, help="Seconds measured per trial (default 10)."),
    click.option("--warmup", type=float, help="Seconds of unrecorded warm-up (default 2)."),
    click.option("--repetitions", type=int, help="Trials per version and point (default 3)."),
    click.option("--keys", type=int, help="Keys populated and read (default: workload's)."),
    click.option("--data-size", type=int, help="Value size in bytes (default: workload's)."),
    click.option("--clients", type=int, help="Load generator connections (default: workload's)."),
    click.option("--server-cpus", help="CPUs for the server, e.g. 0 (default: first CPU)."),
    click.option("--client-cpus", help="CPUs for the load generator (default: the others)."),
    click.option(
        "--loadgen",
        type=click.Choice(["redis-benchmark", "memtier", "builtin"]),
        help="Load generator (default: redis-benchmark for GET sweeps; memtier for mixes, "
        "or the built-in driver when memtier is not installed).",
    ),
    click.option(
        "--loadgen-bin", type=click.Path(dir_okay=False), help="Load generator binary to use."
    ),
    click.option(
        "--metric",
        type=click.Choice(["throughput", "instructions", "both"]),
        help="throughput (ops/s, latency), instructions (server instructions per op under "
        "callgrind, repeatable on a noisy machine), or both (default: throughput for run, "
        "both for ci).",
    ),
    click.option(
        "--instruction-requests", type=int, help="Requests per instruction trial (default 200000)."
    ),
    click.option(
        "--runtime",
        type=click.Choice(["native", "docker"]),
        default="native",
        show_default=True,
        help="Run servers as pinned processes (taskset) or pinned containers (--cpuset-cpus).",
    ),
    click.option(
        "--docker-images",
        type=click.Choice(["auto", "official", "build"]),
        default="auto",
        show_default=True,
        help="docker: one kind of build for every version: official redis:<version> images "
        "when every version is an upstream release tag, else regtrack's builds (auto); "
        "official images (official; every version must be a release tag); or regtrack's "
        "builds (build).",
    ),
    click.option(
        "--builder-image",
        help="docker: build commits and branches with docker build inside this image (it "
        "needs make and a C compiler, e.g. gcc:12); default: import regtrack's own build.",
    ),
    click.option("--memory", help="docker: container memory limit, e.g. 4g."),
    _source_repo_option,
    click.option(
        "--build-flags",
        help='make variables for source builds, e.g. "MALLOC=libc OPTIMIZATION=-O2".',
    ),
    click.option(
        "--no-wait",
        is_flag=True,
        help="Fail at once when another regtrack is benchmarking on these CPUs.",
    ),
    click.option(
        "--report/--no-report",
        default=True,
        show_default=True,
        help="Write the HTML report (next to the database) when the run ends.",
    ),
    _db_option,
]


def _measure_options(f):
    for option in reversed(MEASURE_OPTIONS):
        f = option(f)
    return f


SEQUENTIAL_OPTIONS = [
    click.option(
        "--budget",
        default="10m",
        show_default=True,
        help="Sequential repetitions: stop adding blocks when another would overrun this "
        "much measuring time (e.g. 600s, 10m, 1h; a bare number is seconds).",
    ),
    click.option(
        "--max-repetitions",
        type=click.IntRange(2, 1000),
        default=30,
        show_default=True,
        help="Sequential repetitions: at most this many repetitions per version.",
    ),
]


def _sequential_options(f):
    for option in reversed(SEQUENTIAL_OPTIONS):
        f = option(f)
    return f


def _options(kw: dict[str, Any], **defaults: Any) -> Options:
    """The shared options, with a command's own defaults for what the user left out."""
    kw = {**kw, **{k: v for k, v in defaults.items() if kw.get(k) is None}}
    return Options(
        workload=kw["workload"],
        pipelines=int_list(kw["pipelines"], "--pipelines"),
        duration=kw["duration"],
        warmup=kw["warmup"],
        repetitions=kw["repetitions"],
        keys=kw["keys"],
        data_size=kw["data_size"],
        clients=kw["clients"],
        server_cpus=kw["server_cpus"],
        client_cpus=kw["client_cpus"],
        loadgen_bin=kw["loadgen_bin"],
        loadgen=kw["loadgen"],
        metric=kw["metric"],
        instruction_requests=kw["instruction_requests"],
        source_repo=kw["source_repo"],
        build_flags=kw["build_flags"],
        runtime=kw["runtime"],
        docker_images=kw["docker_images"],
        builder_image=kw["builder_image"],
        memory=kw["memory"],
    )


def _prepare(specs: list[versions.VersionSpec], kw: dict[str, Any], **defaults: Any) -> Job:
    with build_progress() as phase:
        job = prepare_job(specs, _options(kw, **defaults), phase)
    for target in job.targets:
        if "build" in target.details:
            b = target.details["build"]
            how = "cached build" if b["cached"] else f"built in {b['seconds']:.0f} s"
            what = b.get("server_version") or f"image {target.image}"
            err.print(f"regtrack: {target.label}: {how}: {what}")
    if job.loadgen.name == "builtin" and job.metric != "instructions":
        err.print(f"regtrack: note: {THROUGHPUT_CAVEAT}")
    if not workloads.saturates(job.workload):
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


def _measure(
    job: Job,
    db: str | None,
    wait: bool = True,
    resume_store: tuple[Store, int] | None = None,
    sequential: Sequential | None = None,
) -> tuple[Store, int, str]:
    """Record the run (or reopen it), execute it with progress, say where the trials went.

    The CPUs are held (cpulock) from before the run is recorded until it ends, so a run
    that waits for another one's CPUs is not recorded as running meanwhile.
    """
    store = resume_store[0] if resume_store else Store.open(db or job.settings.database)
    with cpulock.hold(
        job.cpus.server + job.cpus.client,
        wait=wait,
        on_wait=lambda text: err.print(f"regtrack: {text} (--no-wait to fail instead)"),
    ):
        if job.docker is not None:
            for name in docker_runtime.remove_leftovers(job.docker):
                err.print(f"regtrack: removed container {name}, left by a regtrack that was killed")
        if resume_store:
            run_id = resume_store[1]
            resume.check_resumable(store, run_id)
            store.reopen_run(run_id)
            err.print(f"regtrack: resuming run {run_id}")
        else:
            env = environment.capture(job.cpus, job.loadgen.as_dict())
            env["runtime"] = job.runtime
            run_id = store.create_run(
                ["regtrack", *sys.argv[1:]], job.config(), env, job.loadgen.as_dict()
            )
            err.print(
                f"regtrack: run {run_id}: {len(job.targets)} versions x {len(job.points)} points "
                f"x {job.settings.repetitions} repetitions; server on CPU "
                f"{job.cpus.server_list}, {job.loadgen.name} on CPU {job.cpus.client_list}"
            )
        try:
            with run_progress() as progress:
                status = execute(
                    job, store, run_id, progress, resume=bool(resume_store), sequential=sequential
                )
        finally:
            n = len(store.trials(run_id))
            err.print(f"regtrack: {n} trials of run {run_id} stored in {store.path}")
    return store, run_id, status


def _fail_if_incomplete(store: Store, run_id: int, status: str) -> None:
    if status == "incomplete":
        raise CannotMeasure(f"run {run_id} is incomplete: {store.run(run_id)['status_detail']}")


@click.group(epilog=EXIT_CODES_HELP)
@click.version_option(__version__, prog_name="regtrack")
def cli() -> None:
    """Measure whether a Redis version or commit made a workload faster or slower."""


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
@_sequential_options
@_measure_options
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
        baseline, thresholds = analysis.comparison_settings(
            resumed.run(resume_id), None, None, load_thresholds(None)
        )
        store, run_id, status = _measure(job, kw["db"], wait, (resumed, resume_id))
    else:
        if not version_specs:
            raise BadInput("give --versions SPECS (or --resume RUN_ID)")
        specs = versions.parse_specs(version_specs)
        if baseline and baseline not in [s.label for s in specs]:
            raise BadInput(f"--baseline {baseline!r} is not one of the labels of --versions")
        thresholds = load_thresholds(threshold)
        job = _prepare(specs, kw, metric="throughput")
        job.comparison = {
            "baseline": baseline or job.targets[0].label,
            "thresholds": thresholds.model_dump(),
        }
        rule = None
        if until_decided:
            rule = _sequential_rule(
                job,
                budget,
                max_repetitions,
                lambda st, rid: analysis.compare(st, rid, baseline, thresholds),
            )
        store, run_id, status = _measure(job, kw["db"], wait, sequential=rule)
    result = analysis.compare(store, run_id, baseline, thresholds)
    shown = ["throughput", "instructions_per_op", "syscalls_per_op"]
    click.echo(present.render(result, "table", shown))
    click.echo(
        f"Results: {store.path} (run {run_id}). More: regtrack compare --db {store.path} "
        f"--run {run_id} --format markdown|csv|json"
    )
    if kw["report"]:
        _auto_report(store, run_id)
    _fail_if_incomplete(store, run_id, status)


def _sequential_rule(
    job: Job,
    budget: str,
    max_repetitions: int,
    comparison: Callable[[Store, int], dict[str, Any]],
) -> Sequential:
    """Blocks of two repetitions (A B, B A) while ``comparison``'s gate is undecided."""
    if job.settings.repetitions % 2 and len(job.targets) > 1:
        raise BadInput(
            f"--repetitions {job.settings.repetitions}: sequential repetitions start from an "
            "even number, so the order A B / B A stays balanced"
        )
    job.design = "sequential"
    return Sequential(
        needed=lambda store, run_id: analysis.undecided_modes(comparison(store, run_id)),
        budget_s=parse_duration(budget, "--budget"),
        max_repetitions=max_repetitions,
    )


def _auto_report(store: Store, run_id: int) -> None:
    """The report of a finished run; failing to write it never fails the measured run."""
    try:
        files = write_report(store, store.path.parent, [run_id])
    except (RegtrackError, OSError) as exc:
        err.print(f"regtrack: warning: the HTML report was not written: {exc}")
        return
    click.echo(f"Report: {files.runs[run_id]}")


def _ci_specs(baseline: str | None, candidate: str) -> list[versions.VersionSpec]:
    """Baseline and candidate as labelled specs; equal labels become baseline/candidate."""
    cand = versions.parse_spec(candidate)
    if baseline is None:
        return [cand]
    base = versions.parse_spec(baseline)
    if base.label == cand.label:
        base = versions.VersionSpec("baseline", base.kind, base.value, base.text)
        cand = versions.VersionSpec("candidate", cand.kind, cand.value, cand.text)
    return [base, cand]


def _check_comparable(
    what: str, baseline: dict[str, Any], candidate: dict[str, Any], force: bool, instead: str
) -> list[str]:
    """The differences between two runs' comparability keys: refused (exit 2) unless
    ``force``, and then returned so that every output can say the comparison was forced."""
    diffs = comparability.differences(baseline, candidate)
    if diffs and not force:
        raise BadInput(
            f"{what} was not measured like this one ({'; '.join(diffs)}): its numbers are "
            f"not comparable. {instead}, or pass --force"
        )
    return diffs


# What `ci` measures unless told otherwise: both metrics, at GET pipeline depths where the
# server (not the load generator) is the bottleneck on 2 cores, short trials in many
# blocks (block-to-block noise dominates, docs/methodology.md), two blocks to start.
CI_DEFAULTS = {
    "metric": "both",
    "pipelines": "10,30",
    "duration": 3.0,
    "warmup": 1.0,
    "repetitions": 4,
    "instruction_requests": 100_000,
}


@cli.command(epilog=EXIT_CODES_HELP)
@click.option("--baseline", "baseline_spec", help="Baseline version spec, measured alongside.")
@click.option("--candidate", "candidate_spec", required=True, help="Candidate version spec.")
@click.option("--baseline-run", help="Compare with a stored baseline (regtrack baseline save).")
@click.option("--force", is_flag=True, help="Compare with a stored baseline measured differently.")
@click.option("--threshold", type=float, help="Verdict threshold in percent, for every metric.")
@click.option("--summary", type=click.Path(dir_okay=False), help="Write the Markdown summary.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Write JSON records.")
@click.option(
    "--fail-on-inconclusive", is_flag=True, help="Exit 1 when the gate cannot be decided."
)
@_sequential_options
@_measure_options
def ci(
    baseline_spec: str | None,
    candidate_spec: str,
    baseline_run: str | None,
    force: bool,
    threshold: float | None,
    summary: str | None,
    json_out: str | None,
    fail_on_inconclusive: bool,
    budget: str,
    max_repetitions: int,
    **kw: Any,
) -> None:
    """Did CANDIDATE make the workload slower than BASELINE? Exit 1 on a real regression.

    By default both are measured here, interleaved and seed-matched, in blocks of two
    repetitions (A B, B A) until the pooled answer of each gating metric is decided or
    --budget runs out. With --baseline-run, the candidate is compared with a stored
    baseline, only if both were measured alike: same machine, runtime, CPUs, load
    generator and workload settings (regtrack.comparability).
    """
    if bool(baseline_spec) == bool(baseline_run):
        raise BadInput("give exactly one of --baseline SPEC (measured now) or --baseline-run NAME")
    thresholds = load_thresholds(threshold).for_gate()
    stored = None
    if baseline_run:
        probe = Store.open(kw["db"] or load_settings().database, create=False)
        stored = probe.baseline(baseline_run)
        stored_run = probe.run(stored["run_id"])
        probe.close()
    defaults = dict(CI_DEFAULTS)
    if kw["workload"] != "get-pipeline":
        defaults.pop("pipelines")
    job = _prepare(_ci_specs(baseline_spec, candidate_spec), kw, **defaults)
    forced: list[str] = []
    if stored is not None:
        here = environment.capture(job.cpus, job.loadgen.as_dict())
        forced = _check_comparable(
            f"baseline {baseline_run!r}",
            comparability.of_run(stored_run),
            comparability.key(job.config(), here, job.loadgen.as_dict()),
            force,
            "Measure both here (--baseline SPEC)",
        )
    job.comparison = {
        "baseline": job.targets[0].label,
        "thresholds": thresholds.model_dump(),
        "forced": forced,
    }

    def comparison(st: Store, rid: int) -> dict[str, Any]:
        if stored is None:
            return analysis.compare(st, rid, job.targets[0].label, thresholds)
        return analysis.compare_runs(
            st, stored["run_id"], stored["label"], rid, job.targets[-1].label, thresholds
        )

    if stored is not None:  # blocks pair by seed with the stored run's: it has so many
        max_repetitions = min(max_repetitions, stored_run["config"]["settings"]["repetitions"])
    rule = _sequential_rule(job, budget, max(max_repetitions, job.settings.repetitions), comparison)
    store, run_id, status = _measure(job, kw["db"], not kw["no_wait"], sequential=rule)
    result = comparison(store, run_id)
    baseline_text = (
        job.targets[0].spec
        if stored is None
        else f"{stored['label']} (stored baseline {baseline_run!r}, run {stored['run_id']})"
    )
    decision = analysis.gate(result)
    run_row = store.run(run_id)
    context = {
        "baseline": baseline_text,
        "candidate": job.targets[-1].spec,
        "workload": job.workload.name,
        "repetitions": run_row["config"]["settings"]["repetitions"],
        "stopped": rule.stopped or "budget",
        "seeds": run_row["config"].get("seeds"),
        "environment": run_row["environment"],
        "forced": forced,
    }
    text = present.ci_summary(result, decision, context)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for line in present.ci_annotations(decision, forced):
            click.echo(line)
    click.echo(text)
    for path in filter(None, [summary, os.environ.get("GITHUB_STEP_SUMMARY")]):
        with open(path, "a") as f:
            f.write(text)
    if json_out:
        Path(json_out).write_text(json.dumps(present.ci_json(result, decision, context), indent=2))
    if kw["report"]:
        _auto_report(store, run_id)
    if decision["outcome"] != "regression":
        _fail_if_incomplete(store, run_id, status)
    if decision["outcome"] == "not measured":
        raise CannotMeasure("no gating metric had valid trials on both sides; see the summary")
    if decision["outcome"] == "regression" or (
        fail_on_inconclusive and decision["outcome"] == "inconclusive"
    ):
        sys.exit(EXIT_REGRESSION)


@cli.command(epilog=EXIT_CODES_HELP)
@click.option(
    "--run", "run_ids", type=int, multiple=True, help="Run page(s) to write (default: every run)."
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    help="Report folder (default: the database's folder, reports/ for the default database).",
)
@_db_option
def report(run_ids: tuple[int, ...], out: str | None, db: str | None) -> None:
    """Write HTML pages: every run, each run's charts and tables, history with change points."""
    store = Store.open(db or load_settings().database, create=False)
    files = write_report(store, out or store.path.parent, list(run_ids) or None)
    for path in files.runs.values():
        click.echo(f"Run page: {path}")
    click.echo(f"{len(files.histories)} history pages; index: {files.index}")


@cli.command(epilog=EXIT_CODES_HELP)
@click.option("--clean", is_flag=True, help="Remove regtrack containers left behind.")
def doctor(clean: bool) -> None:
    """What this machine offers for measuring: CPUs, tools, the Docker engine, leftovers."""
    for line in diagnose.report(clean):
        click.echo(line)


@cli.group()
def mix() -> None:
    """Command-mix workloads: capture one from a live server."""


@mix.command("capture")
@click.option("--url", required=True, help="The live server, e.g. redis://10.0.0.5:6379/0.")
@click.option("--seconds", type=float, default=10.0, show_default=True, help="How long to watch.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Workload file.")
@click.option("--name", help="Workload name (default: the file's stem).")
def mix_capture(url: str, seconds: float, out: str, name: str | None) -> None:
    """Write a mix workload from a live server's command statistics (sends only INFO)."""
    path = Path(out)
    observed = capture.sample(url, seconds)
    path.write_text(capture.workload_text(observed, name or path.stem))
    facts = capture.summary(observed)
    top = ", ".join(f"{cmd} {n}" for cmd, n in facts["top"])
    click.echo(
        f"{path}: {facts['commands']} commands in {seconds:g} s ({facts['per_second']:,.0f}/s); "
        f"most: {top}. Check key patterns and payload sizes before replaying: "
        f"regtrack run --workload {path} --versions ..."
    )


@cli.group()
def baseline() -> None:
    """Name a measured version as a baseline that later `regtrack ci` runs compare with."""


@baseline.command("save")
@click.argument("name")
@click.option("--run", "run_id", type=int, required=True, help="The run that measured it.")
@click.option("--label", help="Which version of the run (default: the first).")
@_db_option
def baseline_save(name: str, run_id: int, label: str | None, db: str | None) -> None:
    """Save version LABEL of run ID as baseline NAME."""
    if not versions.LABEL_RE.match(name):
        raise BadInput(f"baseline name {name!r}: use letters, digits, '.', '_', '+', '-'")
    store = Store.open(db or load_settings().database, create=False)
    targets = store.targets(run_id)
    if not targets:
        raise BadInput(f"run {run_id} is not in {store.path} or has no versions")
    label = label or targets[0]["label"]
    store.save_baseline(name, run_id, label)
    setup = comparability.digest(comparability.of_run(store.run(run_id)))
    click.echo(
        f"baseline {name!r} = {label} of run {run_id} (setup {setup}: later candidates "
        "must be measured alike)"
    )


@baseline.command("list")
@_db_option
def baseline_list(db: str | None) -> None:
    """List the saved baselines."""
    store = Store.open(db or load_settings().database, create=False)
    rows = store.baselines()
    if not rows:
        click.echo("no baselines saved (regtrack baseline save NAME --run ID)")
    for b in rows:
        setup = comparability.digest(comparability.of_run(store.run(b["run_id"])))
        click.echo(
            f"{b['name']:<20} {b['label']} of run {b['run_id']} ({b['run_created_at']}), "
            f"setup {setup} (ci --baseline-run compares only runs measured alike)"
        )


@cli.command(name="versions", epilog=EXIT_CODES_HELP)
@click.argument("specs")
@_source_repo_option
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
def versions_command(specs: str, source_repo: str | None, fmt: str) -> None:
    """Show how version SPECS resolve (label, kind, exact commit, ref) without building."""
    targets = versions.resolve(versions.parse_specs(specs), source_repo)
    rows = [
        {
            "label": t.label,
            "kind": t.kind,
            "commit": t.commit or "",
            "ref": t.ref or "",
            "version": t.details.get("source_version") or "",
            "date": t.details.get("commit_date") or "",
            "path": t.binary or t.details.get("tree") or "",
            "sha256": t.binary_sha256 or "",
            "source_repo": t.source_repo or "",
        }
        for t in targets
    ]
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(present.versions_table(rows))


@cli.command(epilog=EXIT_CODES_HELP)
@click.option("--run", "run_id", type=int, help="Run to compare (default: the newest).")
@click.option("--baseline", help="Version label to compare against (default: the first).")
@click.option("--format", "fmt", type=click.Choice(present.FORMATS), default="table")
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    type=click.Choice([m.name for m in analysis.METRICS]),
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
@_db_option
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
    store = Store.open(db or load_settings().database, create=False)
    if list_runs:
        for r in store.runs():
            labels = ", ".join(t["label"] for t in store.targets(r["id"]))
            click.echo(
                f"run {r['id']}  {r['created_at']}  {r['status']:<11}  {r['n_trials']:>4} trials  "
                f"{labels}"
            )
        return
    run_id = run_id or store.latest_run_id()
    if baseline_run is not None:
        forced = _check_comparable(
            f"run {baseline_run}",
            comparability.of_run(store.run(baseline_run)),
            comparability.of_run(store.run(run_id)),
            force,
            "Compare versions measured in one run",
        )
        base_label = baseline or store.targets(baseline_run)[0]["label"]
        cand_label = candidate or store.targets(run_id)[0]["label"]
        result = analysis.compare_runs(
            store, baseline_run, base_label, run_id, cand_label, load_thresholds(threshold)
        )
        result["forced"] = forced
    else:
        baseline, thresholds = analysis.comparison_settings(
            store.run(run_id),
            baseline,
            load_thresholds(threshold) if threshold is not None else None,
            load_thresholds(None),
        )
        result = analysis.compare(store, run_id, baseline, thresholds)
    click.echo(present.render(result, fmt, list(metrics) or None))


@cli.command(epilog=EXIT_CODES_HELP)
@click.option("--run", "run_id", type=int, help="Run to explain (default: the newest).")
@click.option("--baseline", required=True, help="Version label the change is measured from.")
@click.option("--candidate", required=True, help="Version label the change is measured to.")
@click.option("--point", help="One workload point, e.g. pipeline=10 (default: every point).")
@click.option("--top", type=click.IntRange(1, 500), default=15, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "json"]), default="table")
@_db_option
def explain(
    run_id: int | None,
    baseline: str,
    candidate: str,
    point: str | None,
    top: int,
    fmt: str,
    db: str | None,
) -> None:
    """Which functions' instructions per op changed between two versions (--metric instructions)."""
    store = Store.open(db or load_settings().database, create=False)
    tables = attribution.attribute(
        store, run_id or store.latest_run_id(), baseline, candidate, point, top
    )
    click.echo(present.attribution(tables, fmt))


def main(argv: list[str] | None = None) -> None:
    """Entry point: one line and a documented exit code for every expected failure."""
    interrupts.install()
    try:
        cli.main(args=argv, prog_name="regtrack", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_BAD_INPUT)
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:
        how = f" by {exc}" if isinstance(exc, Interrupted) else ""
        err.print(f"regtrack: interrupted{how}; results measured so far are kept")
        sys.exit(EXIT_INTERRUPTED)
    except RegtrackError as exc:
        err.print(f"regtrack: error: {exc}")
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(0)
    except Exception as exc:  # a bug: one line for the user, the traceback kept in a file
        log = _save_traceback()
        err.print(
            f"regtrack: internal error: {type(exc).__name__}: {exc} "
            f"(traceback in {log}; please report it)"
        )
        sys.exit(EXIT_CANNOT_MEASURE)
    sys.exit(0)


def _save_traceback() -> str:
    import tempfile
    import traceback

    with tempfile.NamedTemporaryFile(
        "w", prefix="regtrack-crash-", suffix=".log", delete=False
    ) as f:
        traceback.print_exc(file=f)
        return f.name


if __name__ == "__main__":
    main(sys.argv[1:])
