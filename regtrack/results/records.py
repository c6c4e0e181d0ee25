"""Stored runs as analysis reads them: typed records with no database behind them.

results/loaded.py fills these from the store; analysis computes on them alone, so every
comparison, history and attribution can be built, and tested, from data made in memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.plan.records import BisectionRole, Printed, ServerData
from regtrack.results.run_row import HostFacts, Key, LoadgenFacts
from regtrack.targets.target import BuildFacts
from regtrack.targets.versions import parse_spec
from regtrack.workloads.model import ServerValue

if TYPE_CHECKING:  # pandas only where frames are built: importing this module stays cheap
    import pandas as pd

    from regtrack.results.bisection_plan import BisectionPlan


def series_name(spec: str) -> str:
    """The spec without its label: ``a=bin:/x`` and ``b=bin:/x`` are the same code."""
    try:
        parsed = parse_spec(spec)
    except BadInput:
        return spec
    return parsed.value if parsed.kind == "git" else f"{parsed.kind}:{parsed.value}"


@dataclass(frozen=True)
class RunTarget:
    """One version of a stored run: the code it measured and the settings its server took."""

    label: str
    spec: str
    kind: str = ""  # what the spec named: git, docker, bin...
    commit: str = ""  # the exact commit; "" for images and binaries
    source_repo: str = ""
    redis_version: str = ""
    subject: str = ""  # the commit's subject line, where known
    commit_date: str = ""
    # The server settings this version ran with; None: stored before settings were.
    server_config: Mapping[str, str] | None = None
    built_sha: str = ""  # the git sha the server says it was built from ("": none or zeros)
    binary_sha256: str = ""
    build: BuildFacts | None = None  # how regtrack built it (None: it did not)
    image: str = ""  # the container image it ran in ("": native)

    @property
    def series(self) -> str:
        """What a history line follows: the spec without its label."""
        return series_name(self.spec)

    @property
    def code(self) -> str:
        """The code measured: the commit, else the series (an image, a binary path)."""
        return self.commit or self.series


@dataclass(frozen=True)
class StoredRun:
    """A run as stored, besides its trials: its versions, how it measured, how it ended.
    What analysis and the flows read of a run, so neither looks into the stored config."""

    id: int
    targets: tuple[RunTarget, ...]
    created_at: str = ""
    command: tuple[str, ...] = ()  # the command line that made it
    fingerprint: str = ""
    comparability: str = ""  # the digest of ``key``
    # Its comparability key (results.comparability.of_run): what "measured alike" compares.
    key: Key = field(default_factory=dict)
    status: str = "complete"  # running | complete | incomplete | interrupted
    status_detail: str = ""  # why it is not complete
    workload: str = ""  # the workload's name
    metric: str = "throughput"  # what it measured: throughput | instructions | both
    points: tuple[str, ...] = ()  # the points it planned, as labels
    runtime: str = "native"  # native | docker
    repetitions: int = 0  # as planned (a grown run's, after growing)
    seed_offset: int = 0  # where its seeds start (bench/seeds.py; 0 before offsets)
    seeds: str | None = None  # "fixed" or "not controlled: why"; None before it was stored
    environment: HostFacts = field(default_factory=HostFacts)  # the machine, as captured
    loadgen: LoadgenFacts = field(default_factory=LoadgenFacts)  # the load generator, as found
    # The baseline and thresholds its command printed verdicts with (empty: none stored).
    printed: Printed = field(default_factory=Printed)
    # A bisection's run: which bisection, in which role (ends, step, confirm); None: not one.
    bisection: BisectionRole | None = None
    design: str = "fixed"  # fixed | sequential: the interval its looks allow
    # A run merged from shards: the repetitions it reached after each merge round.
    rounds: tuple[int, ...] = ()
    server: Mapping[str, ServerValue] = field(default_factory=dict)  # the workload's [server]
    server_data: ServerData | None = None  # where persistent servers kept files
    slo: str = ""  # the latency target its open-loop trials searched capacity at (--slo)

    @property
    def labels(self) -> list[str]:
        return [t.label for t in self.targets]

    def target(self, label: str) -> RunTarget:
        return next(t for t in self.targets if t.label == label)

    def require_complete(self) -> None:
        """An incomplete run is a measurement failure (exit 3), raised once its results
        are shown."""
        if self.status == "incomplete":
            raise CannotMeasure(f"run {self.id} is incomplete: {self.status_detail}")


@dataclass(frozen=True)
class LoadedRun:
    """A run with its trials, one row per trial (a StoredTrial) plus ``point_order`` (the
    point's sort key) and ``syscalls_per_op``: the columns and dtypes results.trial_frame
    declares (TRIALS); ``reasons`` holds TrialReason tuples."""

    run: StoredRun
    trials: pd.DataFrame

    @property
    def id(self) -> int:
        return self.run.id


@dataclass(frozen=True)
class AlikeRuns:
    """The runs measured like one run (one comparability digest) that measured some code
    another of them measured too: what a run's shift across runs is estimated from."""

    comparability: str
    runs: tuple[LoadedRun, ...] = ()


@dataclass(frozen=True)
class RunCosts:
    """A run's per-function instruction costs (its valid instruction trials): one row per
    trial and function (a StoredCost: results.trial_frame.COSTS declares the columns);
    empty when the run counted no instructions."""

    run_id: int
    labels: tuple[str, ...]
    costs: pd.DataFrame


@dataclass(frozen=True)
class StoredBisection:
    """A bisection as stored (results/bisections.py): its plan (``config``: the request, the
    commits searched and their facts), the log of every step (analysis.bisect_records'
    BisectLogEntry JSON), the answer once it finished (the JSON of
    analysis.bisect_records.BisectAnswer) and the runs it measured."""

    id: int
    created_at: str
    status: str  # running | done | refused | interrupted | failed
    config: BisectionPlan
    log: tuple[dict[str, Any], ...] = ()
    result: dict[str, Any] | None = None
    runs: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """`bisect --json`: the stored bisection, as it always printed."""
        return {
            "id": self.id,
            "created_at": self.created_at,
            "status": self.status,
            "config": self.config.to_json(),
            "log": list(self.log),
            "result": self.result,
            "runs": list(self.runs),
        }


@dataclass(frozen=True)
class HistoryPoint:
    """One trusted cell of a run, with what identifies its series: a point of the history
    pages (analysis.history.run_points), kept between reports (results.analysis_cache)."""

    # How pydantic reads it back from the cache: types exact, values finite (never mutated).
    __pydantic_config__ = {"strict": True, "allow_inf_nan": False}  # noqa: RUF012

    run_id: int
    created_at: str
    fingerprint: str
    comparability: str
    server: str  # what the servers ran with, to tell series apart
    series: str
    source_repo: str
    label: str
    commit: str
    subject: str
    commit_date: str
    redis_version: str
    workload: str
    point: str
    point_order: int
    metric: str
    value: float
    min: float | None
    max: float | None
    n_valid: int

    def to_json(self) -> dict[str, Any]:
        """Its fields in order: a row of the history frame, an entry of the cache."""
        return dict(vars(self))


class StoredOpenLoop(NamedTuple):
    """One open-loop trial as stored (results/stored_open_loop.py reads it)."""

    trial_id: int
    target: str
    point: str
    repetition: int
    valid: bool
    offered_rate: float
    arrival: str
    lag_p99_us: float | None
    lag_max_us: float | None
    engine_busy_pct: float | None
    hdr_unit: str
    hdr: str
