"""The parts of a run's plan that are not its versions, workload or settings: typed and
frozen, each with the JSON it has always been stored as (``to_json``) and a reader of what
any regtrack stored (``from_json``: missing facts keep their defaults, as for runs made
before a fact was recorded)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from pydantic import ValidationError

from regtrack.core.settings import Thresholds
from regtrack.targets.target import text_or_none


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``, and where that was read from."""

    index: int
    count: int
    source: str = "--shard"

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "count": self.count, "from": self.source}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Self | None:
        """The shard a run recorded (None: it measured the whole plan)."""
        if not data:
            return None
        return cls(int(data["index"]), int(data["count"]), str(data.get("from", "--shard")))


@dataclass(frozen=True)
class Skipped:
    """A version of a range A..B that did not build: left out, never fatal to the range."""

    label: str
    commit: str | None
    subject: str | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            str(data["label"]), text_or_none(data.get("commit")), text_or_none(data.get("subject")),
            str(data.get("reason") or ""),
        )  # fmt: skip


@dataclass(frozen=True)
class LoadgenProbe:
    """The memtier probe behind a GET sweep's choice of load generator."""

    pipeline: int
    threads: int
    server_cpu_pct: float
    client_cpu_pct: float
    ops_per_sec: float
    invalid_reason: str | None = None
    at: str = ""  # when, ISO 8601
    version: str = ""  # the version probed

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Self | None:
        if not isinstance(data, Mapping):
            return None
        names = {f.name for f in dataclasses.fields(cls)}
        try:
            return cls(**{k: v for k, v in data.items() if k in names})
        except TypeError:  # a probe of another shape: not shown
            return None


@dataclass(frozen=True)
class LoadgenChoice:
    """The load generator of a run, why it was chosen, and the probe behind it (None:
    nothing was probed)."""

    tool: str
    why: str
    probe: LoadgenProbe | None = None
    cached: str | None = None  # the file the answer was read from

    def to_json(self) -> dict[str, Any]:
        probe = self.probe.to_json() if self.probe else None
        return {"tool": self.tool, "why": self.why, "probe": probe, "cached": self.cached}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Self | None:
        if not isinstance(data, Mapping) or not data.get("tool"):
            return None
        return cls(
            str(data["tool"]), str(data.get("why") or ""),
            LoadgenProbe.from_json(data.get("probe")), text_or_none(data.get("cached")),
        )  # fmt: skip


@dataclass(frozen=True)
class ServerData:
    """Where the servers' files went, on which filesystem, and whether the settings write
    any (AOF or RDB): with persistence, the filesystem is part of what was measured."""

    dir: str | None = None
    mount: str | None = None
    filesystem: str | None = None
    device: str | None = None
    persistent: bool = False

    def to_json(self) -> dict[str, Any]:
        data = {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
        return {**data, "persistent": self.persistent}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Self | None:
        if not isinstance(data, Mapping):
            return None
        text = {k: text_or_none(data.get(k)) for k in ("dir", "mount", "filesystem", "device")}
        return cls(**text, persistent=bool(data.get("persistent")))


@dataclass(frozen=True)
class Printed:
    """The baseline and thresholds a run's command printed its verdicts with, and the
    comparability differences it was forced past: the report and a later `compare` show
    the same verdicts (analysis.comparison.comparison_settings)."""

    baseline: str | None = None
    thresholds: Thresholds | None = None  # None: none stored, or of another regtrack
    forced: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        if self == Printed():
            return {}
        data: dict[str, Any] = {"baseline": self.baseline}
        if self.thresholds is not None:
            data["thresholds"] = self.thresholds.model_dump()
        if self.forced:
            data["forced"] = list(self.forced)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Self:
        if not isinstance(data, Mapping):
            return cls()
        try:
            thresholds = Thresholds(**data["thresholds"])
        except (KeyError, TypeError, ValueError, ValidationError):
            thresholds = None
        forced = tuple(str(f) for f in data.get("forced") or ())
        return cls(text_or_none(data.get("baseline")), thresholds, forced)


@dataclass(frozen=True)
class BisectionRole:
    """The bisection a run measures for (regtrack bisect) and the run's role in it."""

    id: int
    role: str  # ends | step | confirm

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "role": self.role}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Self | None:
        if not isinstance(data, Mapping) or data.get("id") is None:
            return None
        return cls(int(data["id"]), str(data.get("role") or ""))


@dataclass(frozen=True)
class RunPurpose:
    """Why a run is measured, stored with its plan (which says what is measured): the
    commands that measure decide it, the plan never changes for it."""

    # "fixed": the planned repetitions, looked at once; "sequential": blocks are added
    # while a gate is undecided, so intervals must stay valid under repeated looks.
    design: str = "fixed"
    printed: Printed = field(default_factory=Printed)
    bisection: BisectionRole | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "design": self.design,
            "comparison": self.printed.to_json(),
            "bisection": self.bisection.to_json() if self.bisection else None,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            str(data.get("design") or "fixed"),
            Printed.from_json(data.get("comparison")),
            BisectionRole.from_json(data.get("bisection")),
        )


@dataclass(frozen=True)
class Merged:
    """A run merged from shards (results/shard_union.py): the repetitions it reached after
    each merge round, and the hosts whose instruction counts may not be pooled."""

    rounds: tuple[int, ...] = ()
    hosts_apart: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"merged": True, "rounds": list(self.rounds), "hosts_apart": list(self.hosts_apart)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self | None:
        if not data.get("merged"):
            return None
        return cls(
            tuple(int(r) for r in data.get("rounds") or ()),
            tuple(str(h) for h in data.get("hosts_apart") or ()),
        )
