"""Which load generator drives a run and why: the record a Job carries and its config
stores (decided by bench/loadgen_choice.py, before the run is recorded)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Choice:
    """The tool, why, and the probe behind it (None: nothing was probed)."""

    tool: str
    why: str
    probe: dict[str, Any] | None = None
    cached: str | None = None  # the file the answer was read from

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
