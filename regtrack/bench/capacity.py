"""The capacity open-loop loads are fractions of (--load): one closed-loop throughput
trial of the baseline at the workload's first point, at pipeline 1 (what the open-loop
trials send), before the first measured trial (bench/real.py's capacity_trial).

At pipeline 1 on a small host the load generator may be the bottleneck: the figure is then
a lower bound of the server's capacity, still the same reference for every version of
the run, and the run says so.
"""

from __future__ import annotations

from regtrack.bench import lifecycle_trial, servers, trial
from regtrack.bench.job import Job
from regtrack.bench.plan import PlannedTrial
from regtrack.core.records import InvalidReason, TrialRecord
from regtrack.workloads import points
from regtrack.workloads.lifecycle import LifecycleWorkload
from regtrack.workloads.points import Point

# Reasons that leave the figure a usable reference (a lower bound of the server's).
LOWER_BOUND = frozenset({InvalidReason.CLIENT_BOUND, InvalidReason.NOT_SERVER_BOUND})
# Tries of a capacity trial that other work on the pinned CPUs spoilt: contention comes and
# goes on a shared host, and one spoilt figure should not end a run that measured nothing.
TRIES = 3


def point_of(job: Job) -> Point:
    """The workload's first point at pipeline 1 (a lifecycle's one capacity point)."""
    first = job.points[0]
    if isinstance(job.workload, LifecycleWorkload):
        return first
    return Point(first.workload, "pipeline=1", {**first.params, "pipeline": 1})


def capacity_trial(job: Job) -> TrialRecord:
    """The baseline's closed-loop throughput trial at ``point_of(job)`` on a real server."""
    target = job.targets[0]
    point = point_of(job)
    planned = PlannedTrial(seq=0, repetition=0, target=target.label, point=point)
    with servers.plain_server(job, target, 0, job.seed(0)) as server:
        if isinstance(job.workload, LifecycleWorkload):
            assert job.engine is not None
            arrivals = lifecycle_trial.arrivals_of(job, planned)  # capacity: no rate
            return lifecycle_trial.lifecycle_trial(
                job.context, job.engine, server, planned, job.workload, arrivals
            )
        saved = servers.set_up(job, server, f"redis-server of {target.label}")
        specs = points.load_specs(job.workload, point, job.loadgen.name, saved)
        return trial.throughput_trial(job.context, server, planned, specs)


def usable(record: TrialRecord) -> bool:
    """Whether the trial's throughput can serve as the reference."""
    return bool(record.ops_per_sec) and all(r.code in LOWER_BOUND for r in record.reasons)


def worth_again(record: TrialRecord) -> bool:
    """Whether a trial that is not usable was spoilt by other work on the pinned CPUs
    alone (and so may be usable when measured again)."""
    codes = {r.code for r in record.reasons}
    return InvalidReason.CONTENDED in codes and codes <= LOWER_BOUND | {InvalidReason.CONTENDED}
