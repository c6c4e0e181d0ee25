"""The shape of a load generator's answer, whichever tool produced it."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from regtrack.errors import BadInput


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
    # Per command row of the tool's report, e.g. {"Xadds": {"ops_per_sec": .., "p50": ..}}
    per_command: dict[str, dict[str, float]] = field(default_factory=dict)
    # The results of load generator processes that ran side by side, when there were several.
    parts: list[LoadgenResult] = field(default_factory=list)

    @property
    def requests_per_process(self) -> list[int]:
        return [p.requests for p in self.parts] if self.parts else [self.requests]

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


@dataclass(frozen=True)
class MixCommand:
    """One command of a mix as the load generator sends it.

    ``args`` may hold the placeholders ``__key__`` (inside an argument, a number drawn by
    ``key_pattern``) and ``__data__`` (a whole argument: the payload). ``ratio`` is how
    many times in a row the command is sent before the rotation moves on.
    """

    args: tuple[str, ...]
    ratio: int = 1
    key_pattern: str = "R"  # R random, P parallel (lockstep), S sequential, G gaussian


@dataclass(frozen=True)
class LoadSpec:
    """What one load generator process sends: GETs of populated keys, or a command mix."""

    clients: int
    threads: int
    pipeline: int
    data_size: int
    key_min: int
    key_max: int
    key_prefix: str = ""
    commands: tuple[MixCommand, ...] = ()  # empty: GET-only sweep of [key_min, key_max]

    @property
    def is_mix(self) -> bool:
        return bool(self.commands)


def tool_version(path: str, name: str) -> str | None:
    """The first line ``path --version`` prints if it names ``name``, else None.

    A path that cannot run, or hangs, is not a load generator: one clear line (exit 2).
    """
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except OSError as exc:
        raise BadInput(f"load generator {path} cannot be run: {exc.strerror}") from None
    except subprocess.TimeoutExpired:
        raise BadInput(f"load generator {path} hangs on --version: is it {name}?") from None
    text = (out.stdout or out.stderr).strip()
    if out.returncode != 0 or name not in text:
        return None
    return text.splitlines()[0]
