"""The open-loop part of a run's plan: which rates its latency trials offer.

Rates are absolute (--rate 20000) or fractions of a capacity (--load 0.5,0.8): the
baseline's closed-loop throughput at the workload's first point, measured once before the
first trial and kept here, so every version is offered the same absolute rate and a
resumed or merged run offers what the first part did.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, Self

from regtrack.core.errors import BadInput

MODE = "latency"
# A task lifecycle's open-loop trials: task latency from the intended enqueue time.
TASK_LATENCY = "task_latency"
# The loads an SLO search offers when the run names none (fractions of the capacity
# measured first: closed loop at pipeline 1, a lower bound where the client is the limit).
SLO_LOADS = (0.25, 0.5, 0.7, 0.85, 1.0, 1.2)
SLO_COLUMNS = {"p50": "lat_p50_ms", "p99": "lat_p99_ms", "p99.9": "lat_p999_ms"}
_UNITS_MS = {"us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1000.0}
_SLO = re.compile(r"^\s*(p50|p99|p99\.9)\s*<=?\s*([0-9]+(?:\.[0-9]+)?)\s*(us|µs|ms|s)\s*$")
# Connections the engine spreads its requests over: a queue's few producers and workers.
CONNECTIONS = 4
# The highest rate regtrack offers (requests/s): far beyond one Redis core.
MAX_RATE = 10_000_000.0
# How a repetition's versions get their open-loop trials: one engine run whose arrivals
# move between their servers in windows (bench/paired_latency.py), or a trial each.
PAIRED, SEPARATE = "paired in time", "separate trials"


@dataclass(frozen=True)
class Slo:
    """A latency target: ``percentile`` (p50, p99, p99.9) at most ``limit_ms``."""

    percentile: str
    limit_ms: float

    @property
    def column(self) -> str:
        return SLO_COLUMNS[self.percentile]

    @property
    def text(self) -> str:
        return f"{self.percentile}<={self.limit_ms:g}ms"

    @classmethod
    def parse(cls, text: str) -> Slo:
        """'p99<=1ms', 'p99.9 <= 500us'; one line for anything else."""
        m = _SLO.match(text or "")
        if not m or float(m.group(2)) <= 0:
            raise BadInput(
                f"--slo {text[:40]!r}: give a percentile and a time, e.g. 'p99<=1ms' "
                "(p50, p99 or p99.9; us, ms or s)"
            )
        return cls(m.group(1), float(m.group(2)) * _UNITS_MS[m.group(3)])


@dataclass(frozen=True)
class LatencyPlan:
    """Open-loop trials at ``rates`` (requests/s) or at ``loads`` x ``capacity``, with
    Poisson or evenly spaced arrivals, at pipeline 1."""

    loads: tuple[float, ...] = ()
    rates: tuple[float, ...] = ()
    arrival: Literal["poisson", "constant"] = "poisson"
    connections: int = CONNECTIONS
    capacity: float | None = None  # ops/s, measured before the first trial (loads only)
    capacity_from: str = ""  # which version, point and trial gave it
    engine: str = ""  # the engine's --version line and its binary's SHA-256
    engine_sha256: str = ""
    slo: str = ""  # a latency target to find each version's capacity at (Slo.text)
    method: str = SEPARATE  # PAIRED or SEPARATE

    def __post_init__(self) -> None:
        if bool(self.loads) == bool(self.rates):
            raise BadInput("give latency rates as --rate or as --load, one of them")
        for load in self.loads:
            if not (math.isfinite(load) and 0 < load <= 2):
                raise BadInput(f"--load {load:g} is not a fraction of the capacity (0 to 2)")
        for rate in self.rates:
            if not (math.isfinite(rate) and 1 <= rate <= MAX_RATE):
                raise BadInput(
                    f"--rate {rate:g} is not a rate regtrack offers (1 to {MAX_RATE:g}/s)"
                )

    @property
    def needs_capacity(self) -> bool:
        return bool(self.loads) and self.capacity is None

    def labels(self) -> tuple[str, ...]:
        """The latency points, in the order a sweep visits them."""
        if self.loads:
            return tuple(f"load={x:g}" for x in self.loads)
        return tuple(f"rate={r:g}" for r in self.rates)

    def rate(self, label: str) -> float:
        """The absolute rate of a point (a load's needs the capacity measured)."""
        kind, _, value = label.partition("=")
        if kind == "rate":
            return float(value)
        if self.capacity is None:
            raise BadInput(f"{label}: the capacity it is a fraction of was not measured")
        return float(value) * self.capacity

    def identity(self) -> dict[str, Any]:
        """What the trials offer, without what was measured or found on a host (a shard
        or a resumed part measures the plan it shares)."""
        facts = {
            "loads": list(self.loads), "rates": list(self.rates), "arrival": self.arrival,
            "connections": self.connections, "slo": self.slo,
        }  # fmt: skip
        if self.method != SEPARATE:  # plans from before pairing keep their ids
            facts["method"] = self.method
        return facts

    def with_capacity(self, capacity: float, source: str) -> LatencyPlan:
        return replace(self, capacity=capacity, capacity_from=source)

    def to_json(self) -> dict[str, Any]:
        return {
            "loads": list(self.loads),
            "rates": list(self.rates),
            "arrival": self.arrival,
            "connections": self.connections,
            "capacity": self.capacity,
            "capacity_from": self.capacity_from,
            "engine": self.engine,
            "engine_sha256": self.engine_sha256,
            "slo": self.slo,
            "method": self.method,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Self | None:
        """The open-loop plan a run stored (None: it measured none)."""
        if not data:
            return None
        capacity = data.get("capacity")
        arrival = str(data.get("arrival") or "poisson")
        if arrival not in ("poisson", "constant"):
            raise ValueError(f"arrival {arrival[:40]!r} is not poisson or constant")
        return cls(
            loads=tuple(float(x) for x in data.get("loads") or ()),
            rates=tuple(float(x) for x in data.get("rates") or ()),
            arrival=arrival,  # type: ignore[arg-type]
            connections=int(data.get("connections") or CONNECTIONS),
            capacity=None if capacity is None else float(capacity),
            capacity_from=str(data.get("capacity_from") or ""),
            engine=str(data.get("engine") or ""),
            engine_sha256=str(data.get("engine_sha256") or ""),
            slo=Slo.parse(str(data["slo"])).text if data.get("slo") else "",
            method=PAIRED if data.get("method") == PAIRED else SEPARATE,
        )


def parse_values(text: str, option: str) -> tuple[float, ...]:
    """``--load 0.5,0.8`` or ``--rate 20000`` as numbers; one line if one is not."""
    values = []
    for part in text.split(","):
        try:
            values.append(float(part.strip().removesuffix("/s")))
        except ValueError:
            raise BadInput(f"{option} {text!r}: {part.strip()!r} is not a number") from None
    return tuple(values)
