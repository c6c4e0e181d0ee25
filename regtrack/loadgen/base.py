"""The shape of a load generator's answer, whichever tool produced it."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class LoadgenResult:
    """One timed run of a load generator: what it reported and what it cost the client CPU."""

    argv: list[str]
    exit_code: int
    wall_s: float
    client_cpu_s: float
    requests: int
    ops_per_sec: float | None = None
    latency_ms: dict[str, float] = field(default_factory=dict)
    raw_output: str = ""
    problem: str | None = None  # why the tool's output cannot be used, if it cannot

    @property
    def client_cpu_pct(self) -> float:
        return 100.0 * self.client_cpu_s / self.wall_s if self.wall_s > 0 else 0.0


@dataclass(frozen=True)
class LoadgenBinary:
    """The one load generator binary used for every target of a run."""

    name: str
    path: str
    version: str
    sha256: str

    def as_dict(self) -> dict[str, str]:
        return {
            "name": self.name,
            "path": self.path,
            "version": self.version,
            "sha256": self.sha256,
        }


def sha256_of(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class Aim:
    """One load generator binary aimed at one running server, from the client CPUs."""

    binary: LoadgenBinary
    host: str
    port: int
    cpus: tuple[int, ...]
    server_alive: Callable[[], bool] = lambda: True
