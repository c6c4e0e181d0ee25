"""The measuring seam: everything a run does that starts a server or runs a load, behind
one small protocol, so the flows above it (orchestrate, ci, bisect, resume) are handed
how to measure instead of reaching for servers themselves.

bench/real.py is the implementation that measures on this host; tests/fakebench.py's
Model is one that models trials and servers. Everything else a run does (plans, seeds,
the store, analysis) is the same code on either side of the seam.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from regtrack.bench.job import Job
    from regtrack.bench.loadgen.base import LoadgenBinary
    from regtrack.bench.plan import Visit
    from regtrack.bench.runtimes.base import RunningServer
    from regtrack.core.records import Progress, TrialRecord
    from regtrack.results.store import Store
    from regtrack.targets.versions import Target


class Measuring(Protocol):
    """How a run measures: its visits, the load generator probe, and the plain servers
    started to check versions before the first trial."""

    @property
    def loadgen_answers(self) -> Path | None:
        """The directory where load generator choices are kept per machine and setup
        (bench/loadgen_choice.py); None: answers are neither read nor kept."""
        ...

    def visit(
        self,
        job: Job,
        store: Store,
        run_id: int,
        visit: Visit,
        target: Target,
        target_ids: dict[str, int],
        progress: Progress,
    ) -> None:
        """One server process of one version: start it, set it up, measure and store the
        visit's trials (bench/runner.run_visit); ServerDied ends only this visit."""
        ...

    def paired_visit(
        self,
        job: Job,
        store: Store,
        run_id: int,
        visit: Visit,
        targets: dict[str, Target],
        target_ids: dict[str, int],
        progress: Progress,
    ) -> None:
        """Every version of a repetition at once, throughput paired in time or in a duet
        (bench/paired.run_visit)."""
        ...

    def probe_trial(self, job: Job, binary: LoadgenBinary) -> TrialRecord:
        """The load generator probe's one short memtier trial against the first version
        (bench/loadgen_choice.probe), judged as a trial is."""
        ...

    def capacity_trial(self, job: Job) -> TrialRecord:
        """The baseline's closed-loop throughput at pipeline 1, which open-loop loads are
        fractions of (bench/capacity.py)."""
        ...

    def plain_server(
        self,
        job: Job,
        target: Target,
        run_id: int | str,
        seed: str | None = None,
        cpus: tuple[int, ...] | None = None,
    ) -> AbstractContextManager[RunningServer]:
        """A version's server as the run's runtime starts it, for what is checked before
        measuring: preflight's identity and the server settings it knows."""
        ...
