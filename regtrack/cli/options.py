"""Options the measuring commands share, declared once.

Declarations only: nothing here imports what measures or analyses, so that `--help` and
`--version` start at once (steps.py holds the steps these commands share around bench).
"""

from __future__ import annotations

import click


def source_repo_option(f):
    return click.option(
        "--source-repo",
        help="Git repository URL or path that tags, branches and commits resolve in "
        "(default: upstream Redis; a fork such as Valkey, or an offline mirror).",
        envvar="REGTRACK_SOURCE_REPO",
    )(f)


def range_options(f):
    """--every / --max-commits: how many commits of a range A..B are measured."""
    f = click.option(
        "--max-commits",
        type=click.IntRange(2, None),
        help="Ranges A..B: at most this many commits, evenly spread (both ends kept).",
    )(f)
    return click.option(
        "--every",
        type=click.IntRange(1, None),
        help="Ranges A..B: every Nth first-parent commit (both ends kept).",
    )(f)


def shard_options(f):
    """--shard K/N / --shard-count N: this host's share of one plan (bench/shards.py)."""
    f = click.option(
        "--shard-count",
        type=click.IntRange(1, None),
        help="How many shards measure the plan, where the engine does not say "
        "(Kubernetes Indexed Jobs: the Job's completions; or $REGTRACK_SHARD_COUNT).",
    )(f)
    return click.option(
        "--shard",
        metavar="K/N",
        help="Measure only shard K of N of the plan (default: from JOB_COMPLETION_INDEX, "
        "CI_NODE_INDEX/CI_NODE_TOTAL or BUILDKITE_PARALLEL_JOB/_COUNT when set); "
        "`regtrack merge` unions the shards' databases.",
    )(f)


def db_option(f):
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
    click.option(
        "--server-config",
        multiple=True,
        metavar="KEY=VALUE",
        help="A redis.conf setting for every version's server, e.g. appendonly=yes "
        "(repeatable; over the workload's [server] table; KEY?=VALUE: skipped with a "
        "warning where a version does not know it).",
    ),
    click.option(
        "--data-dir",
        help="Where servers keep their files (AOF, RDB; containers bind-mount a directory "
        "below it), recorded with the run with its filesystem (default: the temp dir).",
    ),
    click.option("--client-cpus", help="CPUs for the load generator (default: the others)."),
    click.option(
        "--loadgen",
        type=click.Choice(["redis-benchmark", "memtier", "builtin"]),
        help="Load generator (default: for GET sweeps memtier when a short probe shows it "
        "saturates the server, else redis-benchmark; for mixes memtier, or the built-in "
        "driver when memtier is not installed).",
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
        "--pairing",
        type=click.Choice(["time", "duet", "separate"]),
        help="Throughput of several versions: paired in time, their servers up together and "
        "the load moved between them every --window seconds (time, the default with memtier "
        "or redis-benchmark); all at once, each server and its load generator on CPUs of "
        "their own (duet, 2 CPUs per version); or a separate trial per server (separate).",
    ),
    click.option(
        "--window",
        type=float,
        help="Seconds each server has the load in a paired-in-time window (default 0.1).",
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
    source_repo_option,
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
    db_option,
]


def measure_options(f):
    for option in reversed(MEASURE_OPTIONS):
        f = option(f)
    return range_options(f)


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


def sequential_options(f):
    for option in reversed(SEQUENTIAL_OPTIONS):
        f = option(f)
    return f
