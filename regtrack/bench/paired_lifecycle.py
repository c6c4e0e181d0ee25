"""A task lifecycle paired in time: one engine run drives every version's server, the load
moving between them in windows (A B B A, engine/README.md, "paired in time"), so each
version's tasks/s and server CPU per task come from the same seconds of the host. Measured
one after another, this VM's wander (10-30% over minutes) left a 3-repetition comparison
of capacity ±85% wide; paired, the same seconds fall on every version.

Each server's producers and consumers work only in its own windows; its tasks/s is over
its active time, its counters (commands, CPU) over the whole run divide by its own tasks.
Each server starts the point emptied and set up, and a paired warm-up run comes first, as
for a single server (bench/lifecycle_trial.py). Open-loop task latency is paired only in
a duet, every server on CPUs of its own (prepare._paired says why)."""

from __future__ import annotations

import redis

from regtrack.bench import lifecycle_trial, trial
from regtrack.bench.engine_point import engine_point
from regtrack.bench.job import Job
from regtrack.bench.loadgen import lifecycle
from regtrack.bench.paired import Side, counters, failed
from regtrack.bench.plan import PlannedTrial
from regtrack.core.errors import CannotMeasure
from regtrack.core.records import InvalidReason, ServerDelta, TrialRecord
from regtrack.workloads.lifecycle import LifecycleWorkload


def measure_point(job: Job, sides: list[Side], planned: list[PlannedTrial]) -> list[TrialRecord]:
    """One point of every side, paired in time; a record per side, valid or not."""
    assert job.engine is not None and isinstance(job.workload, LifecycleWorkload)
    arrivals = lifecycle_trial.arrivals_of(job, planned[0])
    mode = lifecycle_trial.TASKS if arrivals.rate is None else lifecycle_trial.TASK_LATENCY
    records = {p.target: trial.new_record(p, mode) for p in planned}
    order = [s for s in sides if s.target.label in records]
    ctx, settings = job.context, job.context.settings
    cpu_plan = job.side_cpus()
    aims = [ctx.aim(s.server, cpu_plan[s.target.label].client) for s in order]
    document = job.workload.engine_document()
    timeout = 60 + 10 * (settings.duration + settings.warmup) + lifecycle.DRAIN_S
    switch_ms = 1000.0 * settings.window

    def run(seconds: float) -> list[lifecycle.LifecycleResult]:
        return lifecycle.run(
            job.engine, aims, document, arrivals, seconds=seconds, warmup=0, timeout=timeout,
            switch_ms=switch_ms,
        )  # type: ignore[arg-type]  # fmt: skip

    try:
        for side in order:
            lifecycle_trial.fresh(side.server, job.workload)
        if settings.warmup > 0 and (problem := run(settings.warmup)[0].problem):
            raise CannotMeasure(f"the warm-up failed: {problem}")
        results, around = engine_point(ctx, order, lambda: run(settings.duration))
    except (redis.RedisError, OSError, CannotMeasure) as exc:
        return failed(records, order, exc)
    for side, result in zip(order, results, strict=True):
        label = side.target.label
        assert isinstance(result, lifecycle.LifecycleResult)
        _fill(ctx, records[label], result, around.deltas[label], around.io[label])
        records[label].syscalls_by_name = around.named[label]
        records[label].steal_pct, records[label].contention_pct = around.steal, around.contended
    return [records[p.target] for p in planned]


def _fill(
    ctx: trial.Context,
    record: TrialRecord,
    result: lifecycle.LifecycleResult,
    delta: ServerDelta,
    io: tuple[tuple[int, int] | None, tuple[int, int] | None],
) -> None:
    """One side's trial from its share of the run: the engine's figures over its windows,
    the server's counters over the whole run (its own tasks only), judged."""
    settings = ctx.settings
    record.argv, record.raw_output = result.argv, result.raw_output
    record.exit_code, record.wall_s = result.exit_code, result.wall_s
    record.warmup_s = settings.warmup
    record.valid = True
    report = result.report
    active = report.active_s if report is not None and report.active_s else result.wall_s
    record.server_cpu_pct = 100.0 * delta.server_cpu_s / active if active else None
    if result.problem:
        record.mark_invalid(InvalidReason.LOADGEN_FAILED, result.problem)
    counters(ctx, record, delta, *io)
    if report is not None:
        lifecycle_trial.from_report(
            settings.contention_limit_pct, settings.client_bound_cpu_pct, record, report
        )
