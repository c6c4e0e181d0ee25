"""The answers analysis gives and output reads: typed records, not dicts of string keys.

Results crossed the layers as dicts, so a renamed key was found by a test at best; a
record's fields are checked where they are read, and every JSON document regtrack writes
for results is written from them (``to_json``), under ``SCHEMA_VERSION`` (docs/ci.md,
"JSON"). Field names are the JSON keys, unchanged from the dicts they replace.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, Self

from regtrack.analysis import interval
from regtrack.analysis.interval import Change

if TYPE_CHECKING:  # pandas and pydantic only where a comparison is made, not for --help
    import pandas as pd

    from regtrack.analysis.run_shift import RunShift
    from regtrack.analysis.syscall_breakdown import SyscallBreakdown
    from regtrack.core.settings import Thresholds

# The version of the JSON documents for results (compare --format json, ci --json,
# bisect --json): 2 is the first that says so; 1 is what came before (compare printed a
# bare list of point records).
SCHEMA_VERSION = 2
FINAL_OUTCOMES = ("regression", "no regression")


def plain(value: Any) -> Any:
    """A value as JSON keeps it: records as objects, tuples as lists, and no infinity (an
    unbounded interval end or effect is null)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, JsonRecord):
        return value.to_json()
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


class JsonRecord:
    """JSON both ways: every field under its own name; ``from_json`` reads what an older
    regtrack stored (missing fields keep their defaults, unknown keys are ignored)."""

    def to_json(self) -> dict[str, Any]:
        return {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True, kw_only=True)
class PointComparison(JsonRecord):
    """One metric at one point, candidate against baseline: the medians, the change with
    its interval, and the verdict (point records are called only when their pooled answer
    found the same change: analysis/comparison.py)."""

    workload: str
    point: str
    baseline: str
    candidate: str
    metric: str
    unit: str
    higher_is_better: bool
    baseline_value: float | None
    candidate_value: float | None
    server_busy_pct_baseline: float | None
    server_busy_pct_candidate: float | None
    change_pct: float | None
    ci_low_pct: float | None
    ci_high_pct: float | None
    mde_pct: float | None
    confidence: float
    threshold_pct: float
    verdict: str
    extra_repetitions: int | None
    n_valid: int
    method: str | None
    gating: bool
    n_valid_baseline: int
    n_valid_candidate: int
    n_invalid_baseline: int
    n_invalid_candidate: int
    spread_pct_baseline: float | None
    spread_pct_candidate: float | None
    trusted: bool
    problems: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        """The pairs (or repetitions) the interval is from."""
        return self.n_valid

    @property
    def blocks_for_no_change(self) -> None:
        """A point never waits for seeds: its pooled answer does (PooledComparison)."""
        return None


@dataclass(frozen=True, kw_only=True)
class PooledComparison(JsonRecord):
    """One metric over a sweep's gating points (point ``"pooled"``): what the gate reads."""

    workload: str
    point: str = "pooled"
    baseline: str
    candidate: str
    metric: str
    unit: str
    higher_is_better: bool
    change_pct: float | None
    ci_low_pct: float | None
    ci_high_pct: float | None
    mde_pct: float | None
    confidence: float
    n_blocks: int
    points: tuple[str, ...]
    method: str | None
    paired_by: str | None
    excluded: dict[str, str] = field(default_factory=dict)  # point -> why it does not gate
    threshold_pct: float
    verdict: str
    gating: bool
    # `no change` waits for this many seed-matched blocks (Metric.min_blocks_no_change).
    blocks_for_no_change: int | None = None

    @property
    def n(self) -> int:
        return self.n_blocks

    @property
    def interval(self) -> Change | None:
        """The change with its interval (None: no valid measurement), as a bisection places
        a commit by it (analysis/bisection.py)."""
        return interval.stored(
            self.change_pct, self.ci_low_pct, self.ci_high_pct,
            n=self.n_blocks, method=self.method, mde_pct=self.mde_pct,
        )  # fmt: skip

    @property
    def extra_repetitions(self) -> None:
        """Pooled answers say how far they got by their minimum detectable effect."""
        return None

    def summary(self) -> ChangeSummary:
        return ChangeSummary(
            change_pct=self.change_pct,
            ci_low_pct=self.ci_low_pct,
            ci_high_pct=self.ci_high_pct,
            mde_pct=self.mde_pct,
            verdict=self.verdict,
            n_blocks=self.n_blocks,
        )


@dataclass(frozen=True, kw_only=True)
class ChangeSummary(JsonRecord):
    """A pooled change's numbers as a bisection stores them (its log, its steps, its ends):
    every field may be missing from what an older regtrack stored, so they stay as stored
    and ``interval`` reads them as the one interval record."""

    change_pct: float | None = None
    ci_low_pct: float | None = None
    ci_high_pct: float | None = None
    mde_pct: float | None = None
    verdict: str | None = None
    n_blocks: int | None = None

    @property
    def interval(self) -> Change | None:
        return interval.stored(
            self.change_pct, self.ci_low_pct, self.ci_high_pct,
            n=self.n_blocks, mde_pct=self.mde_pct,
        )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class ServerFacts(JsonRecord):
    """What every output says of a run's servers: its settings (workloads/server_config.py),
    the versions that ran without an optional one, where persistent servers kept files."""

    server_config: dict[str, Any] = field(default_factory=dict)
    server_without: dict[str, list[str]] = field(default_factory=dict)
    server_data: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True, eq=False)
class ComparisonResult:
    """Every point and pooled record of one comparison, with what they were computed from:
    a run's targets against ``baseline`` (or a candidate against another run's baseline,
    ``baseline_run_id``), at ``thresholds``; ``cells``: the per-target medians (a frame)."""

    baseline: str
    targets: tuple[str, ...]
    metrics: tuple[str, ...]
    cells: pd.DataFrame
    comparisons: tuple[PointComparison, ...]
    pooled: tuple[PooledComparison, ...]
    method: str
    alpha: float
    thresholds: Thresholds
    run_id: int | None = None
    baseline_run_id: int | None = None
    hosts: tuple[str, ...] = ()  # a run merged from shards: the hosts its blocks ran on
    server: ServerFacts = field(default_factory=ServerFacts)
    run_shifts: dict[str, RunShift] | None = None  # across runs: each metric's run shift
    forced: tuple[str, ...] = ()  # compared with --force: how the runs differ
    disagreements: tuple[Disagreement, ...] = ()  # analysis/gate.py
    # which syscalls moved, per candidate and workload (analysis/syscall_breakdown.py)
    syscalls: tuple[SyscallBreakdown, ...] = ()

    def syscalls_of(self, candidate: str, workload: str) -> SyscallBreakdown | None:
        return next(
            (b for b in self.syscalls if b.candidate == candidate and b.workload == workload),
            None,
        )

    def points_of(self, metric: str) -> list[PointComparison]:
        return [r for r in self.comparisons if r.metric == metric]

    def to_json(self, metrics: list[str] | None = None) -> dict[str, Any]:
        """`compare --format json`: each point record carries the servers' facts (and
        ``forced``) as before; the pooled answers and the run's facts sit beside them."""
        shown = set(self.metrics if metrics is None else metrics)
        settings = server_fields(self.server)
        forced = {"forced": list(self.forced)} if self.forced else {}
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "baseline_run_id": self.baseline_run_id,
            "baseline": self.baseline,
            "targets": list(self.targets),
            "method": self.method,
            "alpha": self.alpha,
            **forced,
            **settings,
            "run_shifts": shifts_json(self.run_shifts),
            "records": [
                {**r.to_json(), **settings, **forced} for r in self.comparisons if r.metric in shown
            ],
            "pooled": [r.to_json() for r in self.pooled if r.metric in shown],
            "syscalls": [b.to_json() for b in self.syscalls] if "syscalls_per_op" in shown else [],
        }


def server_fields(facts: ServerFacts) -> dict[str, Any]:
    """The servers' facts as JSON: the settings, the versions that ran without an optional
    one, and where persistent servers kept their files (null without persistence)."""
    data = facts.server_data or {}
    return {
        "server_config": facts.server_config or {},
        "server_without": facts.server_without or {},
        "server_data": data if data.get("persistent") else None,
    }


def shifts_json(shifts: dict[str, RunShift] | None) -> dict[str, Any] | None:
    return {name: s.as_dict() for name, s in shifts.items()} if shifts is not None else None


@dataclass(frozen=True, kw_only=True)
class Disagreement(JsonRecord):
    """A point where throughput and instructions per op tell different stories."""

    workload: str
    point: str
    candidate: str
    throughput_change_pct: float
    instructions_change_pct: float
    syscalls_change_pct: float | None


@dataclass(frozen=True, kw_only=True)
class GateDecision:
    """The CI decision (analysis/gate.py): the outcome and the gating answers it is from."""

    outcome: str  # regression | no regression | inconclusive | not measured
    gating: tuple[PooledComparison, ...]
    syscalls: tuple[SyscallBreakdown, ...] = ()  # which calls moved (ComparisonResult's)

    def syscalls_behind(self, r: PooledComparison) -> SyscallBreakdown | None:
        """The calls behind a syscalls-per-op answer (None: another metric, or no
        breakdown)."""
        if r.metric != "syscalls_per_op":
            return None
        return next(
            (b for b in self.syscalls if b.candidate == r.candidate and b.workload == r.workload),
            None,
        )

    @property
    def decided(self) -> bool:
        return self.outcome in FINAL_OUTCOMES

    def with_verdict(self, verdict: str) -> list[PooledComparison]:
        return [r for r in self.gating if r.verdict == verdict]


@dataclass(frozen=True, kw_only=True)
class GateContext:
    """What a gate measured, as its summary and JSON say it: which versions, how many
    repetitions, why it stopped, the seeds, the machine, and any comparability forced."""

    repetitions: int
    baseline: str = ""
    candidate: str = ""
    workload: str = ""
    stopped: str | None = None  # decided | budget | max-repetitions | merged | shard K/N
    seeds: str | None = None  # "fixed" or "not controlled: why"
    environment: dict[str, Any] = field(default_factory=dict)  # the run's, as stored
    forced: tuple[str, ...] = ()


class Answer(Protocol):
    """What a change reads as one line ("-3.2% [-5.1, -1.2] regression"): a point record
    or a pooled one."""

    @property
    def change_pct(self) -> float | None: ...
    @property
    def ci_low_pct(self) -> float | None: ...
    @property
    def ci_high_pct(self) -> float | None: ...
    @property
    def mde_pct(self) -> float | None: ...
    @property
    def verdict(self) -> str | None: ...
    @property
    def n(self) -> int | None: ...
    @property
    def blocks_for_no_change(self) -> int | None: ...
    @property
    def extra_repetitions(self) -> int | None: ...
