"""What `regtrack doctor` found: one record per check, and the exit code they add up to.

The records live below every stage so that bench (which reads the machine) and output
(which prints them) share them without importing each other.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from regtrack.core.errors import EXIT_CANNOT_MEASURE

# Bumped when a field of the JSON changes meaning or goes away (adding one does not).
SCHEMA_VERSION = 1


class Status(StrEnum):
    """How a check bears on measurements.

    problem: numbers measured here now cannot be trusted (doctor exits 3);
    warning: they can, but are noisier or narrower than they could be;
    unknown: the machine does not show it (a container, another kernel).
    """

    OK = "ok"
    WARNING = "warning"
    PROBLEM = "problem"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Check:
    """One thing that can spoil measurements: what was found and what to change."""

    name: str
    status: Status
    found: str
    advice: str = ""


@dataclass(frozen=True)
class Checkup:
    """Every check of one `regtrack doctor`, with the CPUs it looked at."""

    checks: tuple[Check, ...]
    server_cpus: str | None
    client_cpus: str | None

    @property
    def problems(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status is Status.PROBLEM)

    @property
    def exit_code(self) -> int:
        """3 (could not measure) when a check is a problem, else 0: warnings never fail."""
        return EXIT_CANNOT_MEASURE if self.problems else 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "exit_code": self.exit_code,
            "server_cpus": self.server_cpus,
            "client_cpus": self.client_cpus,
            "checks": [{**asdict(c), "status": str(c.status)} for c in self.checks],
        }
