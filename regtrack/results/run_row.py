"""A run's row as the store holds it, every document in it read into a typed record:
what results/loaded.py, merges and resume start from, so none of them reads stored JSON
by key.

The machine and load generator facts are open documents (each regtrack version captured
more), shown whole on a run's page: their records type the facts regtrack reads and keep
the rest as captured (``shown``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

import pydantic
from pydantic import JsonValue

from regtrack.plan.run_plan import RunPlan

# A JSON scalar as a captured fact holds it.
Scalar = str | int | float | bool | None
# The comparability key: one JSON value per fact that must match (results/comparability.py).
Key = Mapping[str, JsonValue]


class _Facts(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow", frozen=True)

    def shown(self) -> dict[str, Any]:
        """Every fact as captured, the ones regtrack did not read included."""
        return self.model_dump(exclude_unset=True)

    @classmethod
    def read(cls, data: Mapping[str, Any] | None) -> Self:
        return cls.model_validate(dict(data or {}))


class HostFacts(_Facts):
    """The machine a run measured on (core/environment.capture), as stored with it."""

    fingerprint: Scalar = None
    hostname: Scalar = None
    cpu_model: Scalar = None
    cpu_count: Scalar = None
    physical_cores: Scalar = None
    kernel: Scalar = None
    valgrind: Scalar = None  # the version that counted instructions (None: not recorded)
    valgrind_hwcaps: Scalar = None
    glibc: Scalar = None


class LoadgenFacts(_Facts):
    """The load generator a run used (bench/loadgen/base.LoadgenBinary), as stored."""

    name: Scalar = None
    path: Scalar = None
    version: Scalar = None
    sha256: Scalar = None
    image_id: Scalar = None


@dataclass(frozen=True)
class RunRow:
    """One row of the runs table, read: its plan (the config), its machine and load
    generator, and the comparability key stored when it was created (None: a run older
    than the key)."""

    id: int
    plan: RunPlan
    environment: HostFacts
    loadgen: LoadgenFacts
    created_at: str = ""
    status: str = ""
    status_detail: str = ""
    command: tuple[str, ...] = ()
    fingerprint: str = ""
    comparability: Key | None = None
    n_trials: int = 0
