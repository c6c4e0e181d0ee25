"""The ``driver`` workload: a user's own producer/worker program (``--driver 'CMD'``), run
against each version with the server's address in ``REDIS_URL`` (docs/drivers.md).

regtrack cannot see inside it; it measures the server (CPU time, commands per task) and
reads what the program says of its tasks from JSON lines on its standard output.
"""

from __future__ import annotations

import shlex
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_ARGS = 256
MAX_TIMEOUT_S = 24 * 3600


class DriverWorkload(BaseModel):
    """The program's argv (split like a shell would, never run through one)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "driver"
    kind: Literal["driver"] = "driver"
    command: Annotated[list[str], Field(min_length=1, max_length=MAX_ARGS)]
    # The program decides how long it runs (its task count); past this it is stopped.
    timeout_s: Annotated[float, Field(gt=0, le=MAX_TIMEOUT_S)] = 600.0
    min_redis: str = "2.8"
    data_size: int = 0
    server: dict[str, str | int | float | bool] = Field(default_factory=dict)

    @classmethod
    def from_text(cls, text: str) -> DriverWorkload:
        """``--driver 'python worker.py --tasks 2000'``; ValueError for what cannot split."""
        argv = shlex.split(text)
        if not argv:
            raise ValueError("--driver is empty: give the program to run, e.g. 'python w.py'")
        return cls(command=argv)

    # What the stages that sweep keys and pipelines read of every workload.
    @property
    def clients(self) -> int:
        return 1

    @property
    def threads(self) -> int:
        return 1

    @property
    def keys(self) -> int:
        return 0

    @property
    def pipelines(self) -> list[int]:
        return [1]

    def located_args(self) -> list[tuple[str, list[str]]]:
        return []
