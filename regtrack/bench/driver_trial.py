"""One --driver trial: the user's own producer/worker program against a running server,
from an emptied database, with the server's evidence taken around it (trial.measured_window):
its tasks and their latencies as the program reports them, the server's CPU time and
command calls per task as the server counts them (results/trial_frame.py)."""

from __future__ import annotations

import statistics

import redis

from regtrack.bench import trial
from regtrack.bench.lifecycle_trial import TASKS
from regtrack.bench.loadgen import driver
from regtrack.bench.loadgen.base import LoadgenBinary, LoadgenResult
from regtrack.bench.plan import PlannedTrial
from regtrack.bench.runtimes.base import RunningServer
from regtrack.core.records import InvalidReason, TrialRecord
from regtrack.workloads.driver import DriverWorkload

# Task latencies a percentile needs before it is kept (as for open-loop requests).
MIN_TAIL_SAMPLES = 10
QUANTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99}


def percentiles(latencies_ms: list[float]) -> dict[str, float]:
    """The percentiles the task latencies resolve, with the mean and the max."""
    if not latencies_ms:
        return {}
    ordered = sorted(latencies_ms)
    out = {"avg": statistics.fmean(ordered), "max": ordered[-1]}
    for key, q in QUANTILES.items():
        if len(ordered) * (1 - q) >= MIN_TAIL_SAMPLES - 1e-9:
            out[key] = ordered[min(len(ordered) - 1, int(q * len(ordered)))]
    return out


def driver_trial(
    ctx: trial.Context,
    program: LoadgenBinary,
    server: RunningServer,
    planned: PlannedTrial,
    workload: DriverWorkload,
) -> TrialRecord:
    """The program once, to its end (its task count decides how long)."""
    record = trial.new_record(planned, TASKS)
    client = server.client()
    try:
        client.flushall()
    except redis.RedisError as exc:
        record.mark_invalid(InvalidReason.SERVER_REFUSED, " ".join(str(exc).split())[:200])
        return record
    finally:
        client.close()
    done: list[driver.DriverResult] = []

    def run() -> LoadgenResult:
        result = driver.run(program, workload.command, ctx.aim(server), workload.timeout_s)
        done.append(result)
        return result

    if trial.measured_window(ctx, server, record, run) is None or not done:
        return record
    report = done[0].report
    if report is not None:
        record.latency_ms = percentiles(report.latencies_ms)
        trial.mark_contended(record, ctx.settings.contention_limit_pct)
    return record
