"""Commands around measuring: doctor (this machine), mix capture, saved baselines."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from regtrack.cli.options import cli, db_option, model_option
from regtrack.core.errors import BadInput

DOCTOR_EXIT_HELP = """
Exit codes: 0 nothing here spoils measurements (warnings may remain), 3 could not measure:
a check is a problem (no CPU plan with disjoint server and load generator CPUs, other
processes busy on the pinned CPUs above the contention limit, no load generator or no
taskset/setpriv, hash seeds that cannot be controlled), 2 bad usage, 4 internal error.
"""


@cli.command(epilog=DOCTOR_EXIT_HELP)
@model_option("server_cpus")
@model_option("client_cpus")
@click.option(
    "--sample-seconds",
    type=click.FloatRange(0.0, 60.0),
    default=1.0,
    help="How long to watch the CPUs for other busy processes, interrupts and steal.",
)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@click.option("--clean", is_flag=True, help="Remove regtrack containers left behind.")
def doctor(
    server_cpus: str | None, client_cpus: str | None, sample_seconds: float, fmt: str, clean: bool
) -> None:
    """What on this machine would spoil measurements, and what to change: the CPU plan,
    other busy processes, hash seeds, tools, frequency governor and turbo, CPU isolation,
    IRQ affinity, ASLR, transparent huge pages, steal, Docker leftovers."""
    from regtrack.doctor import diagnose
    from regtrack.output import doctor_text

    checkup = diagnose(server_cpus, client_cpus, sample_seconds, clean)
    render = doctor_text.render_json if fmt == "json" else doctor_text.render_text
    click.echo(render(checkup))
    sys.exit(checkup.exit_code)


@cli.group()
def mix() -> None:
    """Command-mix workloads: capture one from a live server."""


@mix.command("capture")
@click.option(
    "--url",
    required=True,
    help="The live server, e.g. redis://10.0.0.5:6379/0 (redis://USER@HOST:PORT for an ACL "
    "user). A password here is on the command line, which every local user can read: "
    "prefer --password-file or REGTRACK_REDIS_PASSWORD.",
)
@click.option(
    "--password-file",
    type=click.Path(dir_okay=False),
    help="A file whose first line is the server's password. Without it, the environment "
    "variable REGTRACK_REDIS_PASSWORD, if set; either one is used instead of a password "
    "in --url.",
)
@click.option(
    "--seconds",
    type=float,
    default=10.0,
    show_default=True,
    help="How long to watch (--check: the live server, then the replay, each this long).",
)
@click.option("--out", type=click.Path(dir_okay=False), help="Workload file to write.")
@click.option("--name", help="Workload name (default: the file's stem).")
@click.option(
    "--sample",
    "sample_s",
    type=click.FloatRange(0.0, 3600.0, min_open=True),
    help="Also read the server's command stream (MONITOR, on a connection of its own) for "
    "at most this many seconds, and write the commands' shapes: key families, value sizes, "
    "transactions, blocking pops, scripts. MONITOR costs a busy server throughput "
    "(docs/workloads.md): keep it short.",
)
@click.option(
    "--sample-commands",
    type=click.IntRange(1, 1_000_000),
    help="Stop the sample after this many commands (whichever bound comes first).",
)
@click.option(
    "--keep-names",
    is_flag=True,
    help="Keep key names as seen (default: their variable parts are replaced).",
)
@click.option(
    "--script",
    "scripts",
    multiple=True,
    metavar="SHA=FILE",
    help="The body of a script the sample sees called by EVALSHA without its SCRIPT LOAD.",
)
@click.option(
    "--check",
    "check_file",
    type=click.Path(dir_okay=False),
    help="Check a captured FILE instead of writing one: the live server's commands over "
    "--seconds (INFO only) against the file replayed for --seconds on a fresh "
    "redis-server; exit 1 if a command with 1% or more of the calls is over 10% off its "
    "real share, or a recorded value size over 10% off.",
)
@click.option(
    "--task",
    metavar="COMMAND",
    help="--check: server CPU per call of COMMAND (one per task, e.g. the enqueue's lpush); "
    "default per command.",
)
@click.option(
    "--loadgen",
    type=click.Choice(["memtier", "builtin"]),
    help="--check: what replays the file (default memtier, the built-in driver where "
    "memtier is not installed).",
)
@click.option(
    "--replay-server",
    type=click.Path(dir_okay=False),
    help="--check: the redis-server binary to replay against (default: on PATH).",
)
@model_option("server_cpus")
@model_option("client_cpus")
def mix_capture(
    url: str,
    password_file: str | None,
    seconds: float,
    out: str | None,
    name: str | None,
    sample_s: float | None,
    sample_commands: int | None,
    keep_names: bool,
    scripts: tuple[str, ...],
    check_file: str | None,
    task: str | None,
    loadgen: str | None,
    replay_server: str | None,
    server_cpus: str | None,
    client_cpus: str | None,
) -> None:
    """Write a mix workload from a live server's command statistics and its
    performance-relevant settings (sends only INFO and CONFIG GET of a fixed list); with
    --sample, from a bounded sample of its commands too (COMMAND and MONITOR, read only).
    With --check FILE, replay a captured file and compare it with the live traffic."""
    from regtrack.core import writes
    from regtrack.core.text import printable
    from regtrack.workloads import capture

    if check_file is not None:
        if out or name or sample_s or sample_commands or keep_names or scripts:
            raise BadInput("--check reads a file: --out, --name and the --sample options "
                           "are for writing one")  # fmt: skip
        _check(check_file, url, password_file, seconds, task, loadgen, replay_server,
               server_cpus, client_cpus)  # fmt: skip
        return
    if task or loadgen or replay_server or server_cpus or client_cpus:
        raise BadInput("--task, --loadgen, --replay-server and the CPU options need --check")
    if out is None:
        raise BadInput("give --out FILE to write a capture (or --check FILE to check one)")
    path = Path(out)
    if sample_s is not None or sample_commands is not None:
        _sampled_capture(
            url, password_file, sample_s, sample_commands, keep_names, scripts, path, name
        )
        return
    if keep_names or scripts:
        raise BadInput("--keep-names and --script need --sample")
    observed = capture.sample(url, seconds, capture.password(password_file))
    writes.replace_text(path, capture.workload_text(observed, name or path.stem), "workload file")
    # the commands as the server names them: text it chose
    top = ", ".join(f"{printable(cmd)} {n}" for cmd, n in observed.most_called())
    click.echo(
        f"{path}: {observed.total_calls} commands in {seconds:g} s "
        f"({observed.per_second:,.0f}/s); "
        f"most: {top}. Check key patterns and payload sizes before replaying: "
        f"regtrack run --workload {path} --versions ..."
    )


def _sampled_capture(
    url: str,
    password_file: str | None,
    seconds: float | None,
    count: int | None,
    keep_names: bool,
    scripts: tuple[str, ...],
    path: Path,
    name: str | None,
) -> None:
    """mix capture --sample: commandstats around a bounded MONITOR sample, its shapes."""
    from regtrack.core import writes
    from regtrack.core.text import printable
    from regtrack.workloads import capture
    from regtrack.workloads.traffic import lifecyclefile, sampled, sampler

    given = sampled.scripts(scripts)
    taken = sampled.take(
        url, capture.password(password_file), seconds or 60.0,
        count or sampler.MAX_COMMANDS, keep_names,
    )  # fmt: skip
    written = lifecyclefile.text(taken, name or path.stem, given)
    writes.replace_text(path, written.text, "workload file")
    s = taken.sample
    kind = (
        'a task lifecycle (kind = "lifecycle"; its approximations are in the file)'
        if written.why_not is None
        else f"a mix, not a lifecycle: {printable(written.why_not)}"
    )
    click.echo(
        f"{path}: sampled {len(s.records)} commands in {s.seconds:.1f} s (stopped by "
        f"{s.stopped_by}); {taken.counted.total_calls} counted by commandstats. Redacted: "
        f"values, the variable parts of key names, {s.secrets_dropped} commands' "
        f"credentials. Written as {kind}."
    )


def _check(
    file: str,
    url: str,
    password_file: str | None,
    seconds: float,
    task: str | None,
    loadgen: str | None,
    replay_server: str | None,
    server_cpus: str | None,
    client_cpus: str | None,
) -> None:
    """mix capture --check: the live traffic against the file's replay, table, exit code."""
    from regtrack.core.errors import EXIT_CHECK_OFF
    from regtrack.flows import capture_check
    from regtrack.output import capture_check_text
    from regtrack.workloads import capture

    request = capture_check.Request(
        file, url, capture.password(password_file), seconds, loadgen, replay_server,
        server_cpus, client_cpus, task,
    )  # fmt: skip
    done = capture_check.run(request, say=lambda text: click.echo(text, err=True))
    click.echo(capture_check_text.render(done))
    sys.exit(0 if done.check.faithful else EXIT_CHECK_OFF)


@cli.group()
def baseline() -> None:
    """Name a measured version as a baseline that later `regtrack ci` runs compare with."""


@baseline.command("save")
@click.argument("name")
@click.option("--run", "run_id", type=int, required=True, help="The run that measured it.")
@click.option("--label", help="Which version of the run (default: the first).")
@db_option
def baseline_save(name: str, run_id: int, label: str | None, db: str | None) -> None:
    """Save version LABEL of run ID as baseline NAME."""
    from regtrack.core.settings import load_settings
    from regtrack.core.text import printable
    from regtrack.results import baselines, comparability
    from regtrack.results.store import Store
    from regtrack.targets import versions

    if not versions.LABEL_RE.match(name):
        raise BadInput(f"baseline name {name!r}: use letters, digits, '.', '_', '+', '-'")
    store = Store.open(db or load_settings().database, create=False)
    targets = store.targets(run_id)
    if not targets:
        raise BadInput(f"run {run_id} is not in {store.path} or has no versions")
    label = label or targets[0]["label"]
    baselines.save(store, name, run_id, label)
    setup = comparability.digest(comparability.of_run(store.run(run_id)))
    click.echo(
        f"baseline {name!r} = {printable(label)} of run {run_id} (setup {setup}: later candidates "
        "must be measured alike)"
    )


@baseline.command("list")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@db_option
def baseline_list(fmt: str, db: str | None) -> None:
    """List the saved baselines."""
    from regtrack.core.settings import load_settings
    from regtrack.core.text import printable
    from regtrack.output import listings
    from regtrack.results import baselines
    from regtrack.results.store import Store

    store = Store.open(db or load_settings().database, create=False)
    saved = baselines.listed(store)
    if fmt == "json":
        click.echo(listings.document("baselines", [b.as_dict() for b in saved]))
        return
    if not saved:
        click.echo("no baselines saved (regtrack baseline save NAME --run ID)")
    for b in saved:  # stored text: shown, never acted on by the terminal
        click.echo(
            f"{printable(b.name):<20} {printable(b.label)} of run {b.run_id} "
            f"({printable(b.run_created_at)}), "
            f"setup {b.setup} (ci --baseline-name compares only runs measured alike)"
        )
