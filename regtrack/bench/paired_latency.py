"""Open-loop latency paired in time, in a duet: one engine run offers one arrival stream
to every version's server, the stream moving between them in windows (A B B A,
engine/README.md), so each version's latencies come from the same seconds of the host, as
paired throughput windows do (bench/paired.py).

Only where every server has CPUs of its own (prepare._paired): on one shared server CPU a
version's background work (a serverCron that stalls) delays its neighbour's requests too,
which hid a 2-ms stall that separate trials show (docs/latency.md). The engine runs on the
first side's client CPUs. Each version's trial is its own histogram over its windows, at
the full offered rate while it had the stream; the servers' counters are read around the
whole point, as for paired throughput.
"""

from __future__ import annotations

import redis

from regtrack.bench import latency_trial, trial
from regtrack.bench.engine_point import engine_point
from regtrack.bench.job import Job
from regtrack.bench.loadgen import openloop
from regtrack.bench.paired import Side, counters, failed
from regtrack.bench.plan import PlannedTrial
from regtrack.core.errors import CannotMeasure
from regtrack.core.records import InvalidReason, TrialRecord
from regtrack.workloads import points


def measure_point(job: Job, sides: list[Side], planned: list[PlannedTrial]) -> list[TrialRecord]:
    """One open-loop point of every side, paired in time; a record per side, valid or not."""
    assert job.latency is not None and job.engine is not None, "a plan with latency trials"
    records = {p.target: trial.new_record(p, latency_trial.MODE) for p in planned}
    order = [s for s in sides if s.target.label in records]
    ctx, settings = job.context, job.context.settings
    offered = latency_trial.offered(job.latency, settings.seed_offset or 0, planned[0])
    specs = [
        points.load_specs(job.workload, planned[0].point, job.engine.name, s.saved) for s in order
    ]
    if any(len(s) != 1 for s in specs) or any(s != specs[0] for s in specs):
        return failed(records, order, CannotMeasure(
            f"{planned[0].point.workload}: the versions' open-loop requests differ (or are "
            "several processes), so one arrival stream cannot serve them; use --pairing separate"
        ))  # fmt: skip
    cpu_plan = job.side_cpus()
    aims = [ctx.aim(s.server, cpu_plan[s.target.label].client) for s in order]
    timeout = 60 + 10 * (settings.duration + settings.warmup)
    try:
        results, around = engine_point(ctx, order, lambda: openloop.run_paired(
            job.engine, aims, specs[0][0], offered, seconds=settings.duration,
            warmup=settings.warmup, timeout=timeout, switch_ms=1000.0 * settings.window,
        ))  # type: ignore[arg-type]  # fmt: skip
    except (redis.RedisError, OSError, CannotMeasure) as exc:
        return failed(records, order, exc)
    wall, deltas = around.wall, around.deltas
    for side, result in zip(order, results, strict=True):
        label = side.target.label
        record = records[label]
        record.argv, record.raw_output = result.argv, result.raw_output
        record.exit_code, record.requests = result.exit_code, result.requests
        record.wall_s, record.ops_per_sec = result.wall_s, result.ops_per_sec
        record.warmup_s = settings.warmup
        record.valid = True
        record.steal_pct, record.contention_pct = around.steal, around.contended
        record.server_cpu_pct = 100.0 * deltas[label].server_cpu_s / wall if wall > 0 else None
        if result.problem:
            record.mark_invalid(InvalidReason.LOADGEN_FAILED, result.problem)
        counters(ctx, record, deltas[label], *around.io[label])
        record.syscalls_by_name = around.named[label]
        if isinstance(result, openloop.OpenLoopResult) and result.report is not None:
            latency_trial.from_report(settings.contention_limit_pct, record, result.report, offered)
    return [records[p.target] for p in planned]
