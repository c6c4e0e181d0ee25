"""The options of the measuring commands (run, ci, bisect), declared once.

Each field of ``Options`` carries its default, the defaults of the commands that measure
differently (ci and bisect: short trials in many blocks) and its help. The command line
generates its options from these fields and hands a command one typed ``Options``; bench
reads the same record. Here, not in cli or bench, so that both may import it (the
layering: cli > bench > core), and free of click, so that bench stays free of it too.

A field whose default is None and that names a ``setting`` takes the settings file's
value (``[run]`` of regtrack.toml, core/settings.py): that value is the default of every
command without one of its own.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from regtrack.core import limits
from regtrack.core.option_spec import (
    GET_SWEEP,
    RUN_CI,
    GetSweep,
    Spec,
    in_blocks,
    option,
)
from regtrack.core.settings import DEFAULT_DB


@dataclass(frozen=True)
class Options:
    """What run, ci and bisect share: everything that says how versions are measured.

    Field order and names are stored with a bisection (results/bisection_plan.py reads them
    back for --resume): add fields with defaults, never rename one.
    """

    workload: str = option("get-pipeline", "Workload name or .toml file.", "workload")
    pipelines: list[int] | None = option(
        None,
        "GET pipeline depths, e.g. 1,10,30.",
        "workload",
        kind="ints",
        defaults=in_blocks(GET_SWEEP),
        helps={"bisect": "GET pipeline depths, e.g. 10,30 (--point sets one)."},
        unset="the workload's",
    )
    duration: float | None = option(
        None,
        "Seconds measured per trial.",
        "measuring",
        kind="float",
        bound=limits.DURATION_S,
        setting="duration",
        defaults=in_blocks(3.0),
    )
    warmup: float | None = option(
        None,
        "Seconds of unrecorded warm-up before each trial.",
        "measuring",
        kind="float",
        bound=limits.WARMUP_S,
        setting="warmup",
        defaults=in_blocks(1.0),
    )
    repetitions: int | None = option(
        None,
        "Trials per version and point (ci, bisect, --until-decided: to start with).",
        "measuring",
        kind="int",
        bound=limits.REPETITIONS,
        setting="repetitions",
        defaults=in_blocks(4),
    )
    keys: int | None = option(
        None,
        "Keys populated and read.",
        "workload",
        kind="int",
        bound=limits.KEYS,
        unset="the workload's",
    )
    data_size: int | None = option(
        None,
        "Value size in bytes.",
        "workload",
        kind="int",
        bound=limits.DATA_SIZE,
        unset="the workload's",
    )
    clients: int | None = option(
        None,
        "Load generator connections.",
        "workload",
        kind="int",
        bound=limits.CLIENTS,
        unset="the workload's",
    )
    server_cpus: str | None = option(
        None, "CPUs for the server, e.g. 0 or 0-1.", "CPUs", unset="the first CPU"
    )
    client_cpus: str | None = option(
        None, "CPUs for the load generator.", "CPUs", unset="the others"
    )
    loadgen_bin: str | None = option(
        None, "Load generator binary to use.", "measuring", kind="path", unset="found on PATH"
    )
    loadgen: str | None = option(
        None,
        "Load generator: for GET sweeps memtier when a short probe shows it saturates the "
        "server, else redis-benchmark; for mixes memtier, or the built-in driver when "
        "memtier is not installed.",
        "measuring",
        choices=("redis-benchmark", "memtier", "builtin"),
        unset="by workload",
    )
    metric: str = option(
        "throughput",
        "What is measured: throughput (ops/s, latency), instructions (server instructions "
        "per op under callgrind, repeatable on a noisy machine), both, or cycles "
        "(instructions and simulated cycles per op: callgrind's cache and branch "
        "simulation, which sees cache misses and mispredictions; no throughput).",
        "measuring",
        choices=("throughput", "instructions", "both", "cycles"),
        defaults={"ci": "both", "bisect": "instructions"},
        command_choices={"bisect": ("instructions", "cycles", "throughput")},
        helps={
            "bisect": "The one metric followed: instructions (server instructions per op "
            "under callgrind, repeatable on a noisy machine), cycles (simulated cycles per "
            "op: callgrind's cache and branch simulation, as repeatable, and it sees cache "
            "misses) or throughput (ops/s)."
        },
    )
    instruction_requests: int | None = option(
        None,
        "Requests per instruction trial.",
        "measuring",
        kind="int",
        bound=limits.INSTRUCTION_REQUESTS,
        setting="instruction_requests",
        defaults=in_blocks(100_000),
    )
    source_repo: str | None = option(
        None,
        "Git repository URL or path that tags, branches and commits resolve in (a fork "
        "such as Valkey, or an offline mirror).",
        "versions",
        envvar="REGTRACK_SOURCE_REPO",
        unset="upstream Redis",
    )
    build_flags: str | None = option(
        None, 'make variables for source builds, e.g. "MALLOC=libc OPTIMIZATION=-O2".', "versions"
    )
    runtime: str = option(
        "native",
        "Run servers as pinned processes (taskset) or pinned containers (--cpuset-cpus).",
        "versions",
        choices=("native", "docker"),
    )
    docker_images: str = option(
        "auto",
        "docker: one kind of build for every version: official redis:<version> images when "
        "every version is an upstream release tag, else regtrack's builds (auto); official "
        "images (official; every version must be a release tag); or regtrack's builds (build).",
        "versions",
        choices=("auto", "official", "build"),
    )
    builder_image: str | None = option(
        None,
        "docker: build commits and branches with docker build inside this image (it needs "
        "make and a C compiler, e.g. gcc:12).",
        "versions",
        unset="import regtrack's own build",
    )
    memory: str | None = option(None, "docker: container memory limit, e.g. 4g.", "versions")
    every: int | None = option(
        None,
        "Ranges A..B: every Nth first-parent commit (both ends kept).",
        "versions",
        commands=RUN_CI,
        kind="int",
        bound=limits.EVERY,
    )
    max_commits: int | None = option(
        None,
        "Ranges A..B: at most this many commits, evenly spread (both ends kept).",
        "versions",
        commands=RUN_CI,
        kind="int",
        bound=limits.MAX_COMMITS,
    )
    server_config: tuple[str, ...] = option(
        (),
        "A redis.conf setting for every version's server, e.g. appendonly=yes (repeatable; "
        "over the workload's [server] table; KEY?=VALUE: skipped with a warning where a "
        "version does not know it).",
        "workload",
        multiple=True,
        metavar="KEY=VALUE",
    )
    data_dir: str | None = option(
        None,
        "Where servers keep their files (AOF, RDB; containers bind-mount a directory below "
        "it), recorded with the run with its filesystem.",
        "workload",
        unset="the temp dir",
    )
    pairing: str | None = option(
        None,
        "Throughput of several versions: paired in time, their servers up together and the "
        "load moved between them every --window seconds (time; with memtier or "
        "redis-benchmark); all at once, each server and its load generator on CPUs of their "
        "own (duet, 2 CPUs per version); or a separate trial per server (separate).",
        "measuring",
        choices=("time", "duet", "separate"),
        setting="pairing",
    )
    window: float | None = option(
        None,
        "Seconds each server has the load in a paired-in-time window.",
        "measuring",
        kind="float",
        bound=limits.WINDOW_S,
        setting="window",
    )
    # Not options: set by the flows. The run's seed offset (bench/seeds.py): a stored
    # run's, to pair with it seed by seed; None: the settings', else a fresh one (a
    # shard's: the one its plan's shards share).
    seed_offset: int | None = None
    shard: Any = None  # this host's share of the plan (bench.shards.Shard), from shard_spec
    # The options around measuring: the shards, the sequential budget, waiting, output.
    shard_spec: str | None = option(
        None,
        "Measure only shard K of N of the plan; `regtrack merge` unions the shards' databases.",
        "measuring",
        commands=RUN_CI,
        flag="--shard",
        metavar="K/N",
        unset="from JOB_COMPLETION_INDEX, CI_NODE_INDEX/CI_NODE_TOTAL or "
        "BUILDKITE_PARALLEL_JOB/_COUNT when set",
    )
    shard_count: int | None = option(
        None,
        "How many shards measure the plan, where the engine does not say (Kubernetes "
        "Indexed Jobs: the Job's completions; or $REGTRACK_SHARD_COUNT).",
        "measuring",
        commands=RUN_CI,
        kind="int",
        bound=limits.SHARDS,
    )
    budget: str = option(
        "10m",
        "Sequential repetitions: stop adding blocks when another would overrun this much "
        "measuring time (e.g. 600s, 10m, 1h; a bare number is seconds).",
        "statistics",
        helps={"bisect": "Measuring time each measurement (the ends, each commit) may take."},
    )
    max_repetitions: int = option(
        30,
        "Sequential repetitions: at most this many repetitions per version.",
        "statistics",
        kind="int",
        bound=limits.MAX_REPETITIONS,
    )
    no_wait: bool = option(
        False,
        "Fail at once when another regtrack is benchmarking on these CPUs.",
        "CPUs",
        kind="flag",
    )
    report: bool = option(
        True,
        "Write the HTML report (next to the database) when the run ends.",
        "output",
        kind="flag",
        off_flag="--no-report",
    )
    rate: str | None = option(
        None,
        "Also measure latency open loop (regtrack-openloop: requests at intended times, "
        "timed from them) at these request rates, e.g. 20000 or 5000,20000.",
        "measuring",
        commands=("run",),
        metavar="RATES",
    )
    load: str | None = option(
        None,
        "Also measure latency open loop at these fractions of the baseline's capacity "
        "(measured first, closed loop, at the workload's first point), e.g. 0.5,0.8.",
        "measuring",
        commands=("run",),
        metavar="FRACTIONS",
    )
    slo: str | None = option(
        None,
        "Find each version's capacity at this latency target, e.g. 'p99<=1ms': open-loop "
        "trials at rising rates (--load, else 0.25 to 1.2 of the capacity measured first).",
        "measuring",
        commands=("run",),
        metavar="TARGET",
    )
    latency_load: str | None = option(
        None,
        "Also gate p99 latency measured open loop at this fraction of the baseline's "
        "capacity (measured first; with --baseline-name, the stored run's, at its rates), "
        "e.g. 0.5.",
        "measuring",
        commands=("ci",),
        metavar="FRACTION",
    )
    arrival: str = option(
        "poisson",
        "Open-loop arrivals: Poisson (a queue's independent producers) or evenly spaced.",
        "measuring",
        commands=RUN_CI,
        choices=("poisson", "constant"),
    )
    db: str | None = option(
        None,
        "SQLite database.",
        "output",
        kind="path",
        envvar="REGTRACK_DB",
        unset=str(DEFAULT_DB),  # RunSettings.database's default
    )
    driver: str | None = option(
        None,
        "Run your own producer/worker program against each version instead of a workload, "
        "e.g. 'python worker.py --tasks 2000' (no shell; the server's address in REDIS_URL; "
        "tasks and their latencies from its JSON lines: docs/drivers.md).",
        "workload",
        commands=RUN_CI,
        metavar="CMD",
    )
    rtt: str | None = option(
        None,
        "Put every server behind this network round trip, e.g. 0.5ms or 28ms (a hosted Redis "
        "seen from another region): a delay proxy on the client CPUs holds each chunk for "
        "half of it each way (docs/latency.md); no privileges needed, native or docker.",
        "measuring",
        commands=RUN_CI,
        metavar="DURATION",
        unset="none added",
    )


def specs() -> dict[str, Spec]:
    """Every field that is an option, by field name, in declaration order."""
    return {
        f.name: f.metadata["option"] for f in dataclasses.fields(Options) if "option" in f.metadata
    }


def command_defaults(command: str) -> Options:
    """The options ``command`` starts from: each field's own default, or the command's where
    it declares one."""
    own = {name: s.defaults[command] for name, s in specs().items() if command in s.defaults}
    return dataclasses.replace(Options(), **own)


def settle(options: Options) -> Options:
    """Options with a GET-sweep-only default resolved for the workload chosen."""
    if isinstance(options.pipelines, GetSweep):
        depths = options.pipelines.depths
        pipelines = list(depths) if options.workload == "get-pipeline" else None
        return dataclasses.replace(options, pipelines=pipelines)
    return options
