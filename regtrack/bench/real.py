"""Measuring on this host: real servers, load generators and callgrind (the implementation
of bench/measuring.Measuring that the command line hands to the flows)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path

from regtrack.bench import (
    capacity,
    latency_trial,
    loadgen_choice,
    paired,
    paired_latency,
    paired_lifecycle,
    runner,
    servers,
)
from regtrack.bench.job import Job
from regtrack.bench.loadgen.base import LoadgenBinary
from regtrack.bench.plan import Visit
from regtrack.bench.runtimes.base import RunningServer
from regtrack.core.records import Progress, TrialRecord
from regtrack.results.store import Store
from regtrack.targets.sources import cache_root
from regtrack.targets.versions import Target
from regtrack.workloads.lifecycle import LifecycleWorkload


class RealBench:
    """Every visit, probe and server start on this machine's runtime (native or Docker);
    load generator answers kept in regtrack's cache ($REGTRACK_CACHE)."""

    @property
    def loadgen_answers(self) -> Path | None:
        return cache_root() / "loadgen-choice"

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
        runner.run_visit(job, store, run_id, visit, target, target_ids, progress)

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
        if isinstance(job.workload, LifecycleWorkload):
            assert job.engine is not None, "a lifecycle's engine"
            paired.run_visit(
                job, store, run_id, visit, targets, target_ids, progress,
                measure=paired_lifecycle.measure_point, tool=job.engine.name,
            )  # fmt: skip
            return
        if visit.mode == latency_trial.MODE and job.engine is not None:
            paired.run_visit(
                job, store, run_id, visit, targets, target_ids, progress,
                measure=paired_latency.measure_point, tool=job.engine.name,
            )  # fmt: skip
            return
        paired.run_visit(job, store, run_id, visit, targets, target_ids, progress)

    def probe_trial(self, job: Job, binary: LoadgenBinary) -> TrialRecord:
        return loadgen_choice.probe(job, binary)

    def capacity_trial(self, job: Job) -> TrialRecord:
        return capacity.capacity_trial(job)

    def plain_server(
        self,
        job: Job,
        target: Target,
        run_id: int | str,
        seed: str | None = None,
        cpus: tuple[int, ...] | None = None,
    ) -> AbstractContextManager[RunningServer]:
        return servers.plain_server(job, target, run_id, seed, cpus)
