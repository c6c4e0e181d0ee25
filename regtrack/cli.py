"""Command line: parse options, call the layers in order, map failures to exit codes."""

from __future__ import annotations

import json
import signal
import sys

import click

from regtrack import __version__, analysis, build, environment, present, versions
from regtrack.callgrind import control as callgrind
from regtrack.config import load_settings, load_workload
from regtrack.console import build_progress, err, run_progress
from regtrack.cpus import plan_cpus
from regtrack.errors import (
    EXIT_BAD_INPUT,
    EXIT_CANNOT_MEASURE,
    EXIT_INTERRUPTED,
    BadInput,
    Interrupted,
    RegtrackError,
)
from regtrack.loadgen import redis_benchmark
from regtrack.runner import Job, execute
from regtrack.store import Store

EXIT_CODES_HELP = """
Exit codes: 0 success (no regression), 1 regression found (ci), 2 bad usage or input,
3 could not measure (tool, server or environment failure), 130 interrupted.
"""


def _int_list(text: str | None, option: str) -> list[int] | None:
    if text is None:
        return None
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise BadInput(f"{option} {text!r}: give comma-separated numbers like 1,10,30") from None
    if not values or any(v <= 0 for v in values):
        raise BadInput(f"{option} {text!r}: give positive numbers like 1,10,30")
    return values


def _source_repo_option(f):
    return click.option(
        "--source-repo",
        help="Git repository URL or path that tags, branches and commits resolve in "
        "(default: upstream Redis; a fork such as Valkey, or an offline mirror).",
        envvar="REGTRACK_SOURCE_REPO",
    )(f)


def _build_flags_option(f):
    return click.option(
        "--build-flags",
        help='make variables for source builds, e.g. "MALLOC=libc OPTIMIZATION=-O2".',
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


@click.group(epilog=EXIT_CODES_HELP)
@click.version_option(__version__, prog_name="regtrack")
def cli() -> None:
    """Measure whether a Redis version or commit made a workload faster or slower."""


@cli.command(epilog=EXIT_CODES_HELP)
@click.option(
    "--versions",
    "version_specs",
    required=True,
    help="Comma-separated specs, each optionally labelled: a=bin:/usr/bin/redis-server,...",
)
@click.option("--workload", default="get-pipeline", show_default=True, help="Name or .toml path.")
@click.option("--pipelines", help="GET pipeline depths, e.g. 1,10,30 (default from workload).")
@click.option("--duration", type=float, help="Seconds measured per trial (default 10).")
@click.option("--warmup", type=float, help="Seconds of unrecorded warm-up per trial (default 2).")
@click.option("--repetitions", type=int, help="Trials per version and point (default 3).")
@click.option("--keys", type=int, help="Keys populated and read (default from workload).")
@click.option("--data-size", type=int, help="Value size in bytes (default from workload).")
@click.option("--clients", type=int, help="Load generator connections (default from workload).")
@click.option("--server-cpus", help="CPUs for the server, e.g. 0 (default: first CPU).")
@click.option("--client-cpus", help="CPUs for the load generator (default: the others).")
@click.option("--loadgen-bin", type=click.Path(dir_okay=False), help="redis-benchmark to use.")
@click.option("--baseline", help="Label the table compares against (default: the first version).")
@click.option(
    "--metric",
    type=click.Choice(["throughput", "instructions", "both"]),
    default="throughput",
    show_default=True,
    help="throughput (ops/s, latency), instructions (server instructions per op under "
    "callgrind, repeatable on a noisy machine), or both.",
)
@click.option(
    "--instruction-requests", type=int, help="Requests per instruction trial (default 200000)."
)
@_source_repo_option
@_build_flags_option
@_db_option
def run(
    version_specs: str,
    workload: str,
    pipelines: str | None,
    duration: float | None,
    warmup: float | None,
    repetitions: int | None,
    keys: int | None,
    data_size: int | None,
    clients: int | None,
    server_cpus: str | None,
    client_cpus: str | None,
    loadgen_bin: str | None,
    baseline: str | None,
    metric: str,
    instruction_requests: int | None,
    source_repo: str | None,
    build_flags: str | None,
    db: str | None,
) -> None:
    """Measure every version at every workload point, interleaved, and store each trial."""
    settings = load_settings(
        duration=duration,
        warmup=warmup,
        repetitions=repetitions,
        instruction_requests=instruction_requests,
    )
    load = load_workload(
        workload,
        pipelines=_int_list(pipelines, "--pipelines"),
        keys=keys,
        data_size=data_size,
        clients=clients,
    )
    specs = versions.parse_specs(version_specs)
    if baseline and baseline not in [s.label for s in specs]:
        raise BadInput(f"--baseline {baseline!r} is not one of the labels of --versions")
    cpus = plan_cpus(server_cpus, client_cpus)
    flags = build.parse_build_flags(build_flags)
    if metric != "throughput":
        callgrind.require()  # before any build: say at once that valgrind is missing
    if loadgen_bin:
        redis_benchmark.locate(loadgen_bin)  # a wrong path fails before any build
    targets = versions.resolve(specs, source_repo)
    with build_progress() as phase:
        build.obtain(targets, flags, phase)
    for target in targets:
        if "build" in target.details:
            b = target.details["build"]
            how = "cached build" if b["cached"] else f"built in {b['seconds']:.0f} s"
            err.print(f"regtrack: {target.label}: {how}: {b['server_version']}")
    built_benchmarks = [
        t.details["build"]["benchmark"]
        for t in reversed(targets)
        if t.details.get("build", {}).get("benchmark")
    ]
    loadgen = redis_benchmark.locate(loadgen_bin, built_benchmarks)
    job = Job(
        targets=targets,
        workload=load,
        settings=settings,
        cpus=cpus,
        loadgen=loadgen,
        metric=metric,
    )

    store = Store.open(db or settings.database)
    env = environment.capture(cpus, loadgen.as_dict())
    run_id = store.create_run(["regtrack", *sys.argv[1:]], job.config(), env, loadgen.as_dict())
    err.print(
        f"regtrack: run {run_id}: {len(targets)} versions x {len(job.points)} points x "
        f"{settings.repetitions} repetitions; server on CPU {cpus.server_list}, "
        f"{loadgen.name} on CPU {cpus.client_list}"
    )
    try:
        with run_progress() as progress:
            execute(job, store, run_id, progress)
    finally:
        n = len(store.trials(run_id))
        err.print(f"regtrack: {n} trials of run {run_id} stored in {store.path}")
    result = analysis.compare(store, run_id, baseline)
    shown = ["throughput", "instructions_per_op", "syscalls_per_op"]
    click.echo(present.render(result, "table", shown))
    click.echo(
        f"Results: {store.path} (run {run_id}). More: regtrack compare --db {store.path} "
        f"--run {run_id} --format markdown|csv|json"
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
@_db_option
def compare(
    run_id: int | None,
    baseline: str | None,
    fmt: str,
    metrics: tuple[str, ...],
    list_runs: bool,
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
    result = analysis.compare(store, run_id or store.latest_run_id(), baseline)
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
    tables = analysis.attribution(
        store, run_id or store.latest_run_id(), baseline, candidate, point, top
    )
    click.echo(present.attribution(tables, fmt))


def _raise_interrupted(signum: int, _frame: object) -> None:
    raise Interrupted(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> None:
    """Entry point: one line and a documented exit code for every expected failure."""
    signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        cli.main(args=argv, prog_name="regtrack", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_BAD_INPUT)
    except (click.exceptions.Abort, KeyboardInterrupt, Interrupted) as exc:
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
