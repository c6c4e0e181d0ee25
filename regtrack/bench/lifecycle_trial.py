"""One lifecycle trial: a task queue's producers and consumers on a running server, the
server's evidence taken around it as for every trial (bench/trial.measured_window).

Two kinds: ``tasks`` (capacity: producers as fast as the consumers finish, at most
max_queued waiting), and ``task_latency`` (open loop at a stated rate: each task timed
from its intended enqueue time to the reply of its consumer's last step). Each starts
from the same state (the database emptied, the workload's setup run) and warms up in an
engine run of its own, so that the server's counters around the measured run (commands,
CPU time) divide by exactly the tasks it did (per-task costs, results/trial_frame.py).
"""

from __future__ import annotations

import redis

from regtrack.bench import setup, trial
from regtrack.bench.job import Job
from regtrack.bench.loadgen import lifecycle, openloop
from regtrack.bench.loadgen.base import LoadgenBinary, LoadgenResult
from regtrack.bench.plan import PlannedTrial
from regtrack.bench.runtimes.base import RunningServer
from regtrack.core.records import InvalidReason, LifecycleFacts, OpenLoopFacts, TrialRecord
from regtrack.plan.latency_plan import TASK_LATENCY
from regtrack.workloads.lifecycle import LifecycleWorkload

TASKS = "tasks"
# As for open-loop requests (bench/latency_trial.py): a trial whose engine's own stalls
# touched more than this share of its tasks is not judged.
MAX_TAINTED_SHARE = 0.05
# Server CPU above which an engine out of CPU is not alone the limit (see judge).
CO_SATURATED_SERVER_PCT = 80.0


def arrivals_of(job: Job, planned: PlannedTrial) -> lifecycle.Arrivals:
    """A point's arrivals: its rate (an open-loop point) or none (capacity), the same seed
    for every version of a repetition."""
    seed = (job.settings.seed_offset or 0) + planned.repetition + 1
    label = planned.point.label
    if job.latency is not None and label in job.latency.labels():
        return lifecycle.Arrivals(job.latency.rate(label), job.latency.arrival, seed)
    return lifecycle.Arrivals(None, seed=seed)


def fresh(server: RunningServer, workload: LifecycleWorkload) -> None:
    """The server as the lifecycle starts from: empty, then the workload's setup."""
    client = server.client()
    try:
        client.flushall()
        setup.prepare_server(client, workload, openloop.NAME)
    finally:
        client.close()


def lifecycle_trial(
    ctx: trial.Context,
    engine: LoadgenBinary,
    server: RunningServer,
    planned: PlannedTrial,
    workload: LifecycleWorkload,
    arrivals: lifecycle.Arrivals,
) -> TrialRecord:
    """A warm-up run, then the measured run, at ``arrivals``' rate (None: capacity)."""
    mode = TASKS if arrivals.rate is None else TASK_LATENCY
    record = trial.new_record(planned, mode)
    settings = ctx.settings
    aim = ctx.aim(server)
    document = workload.engine_document()
    timeout = 60 + 10 * (settings.duration + settings.warmup) + lifecycle.DRAIN_S
    try:
        fresh(server, workload)
    except redis.RedisError as exc:
        record.mark_invalid(InvalidReason.SERVER_REFUSED, " ".join(str(exc).split())[:200])
        return record
    if settings.warmup > 0:
        (warm,) = lifecycle.run(
            engine, [aim], document, arrivals, seconds=settings.warmup, warmup=0,
            timeout=timeout,
        )  # fmt: skip
        record.warmup_s = warm.wall_s
        if warm.problem:
            record.argv, record.raw_output = warm.argv, warm.raw_output
            record.mark_invalid(InvalidReason.WARMUP_FAILED, warm.problem)
            return record
    done: list[lifecycle.LifecycleResult] = []

    def run() -> LoadgenResult:
        (result,) = lifecycle.run(
            engine, [aim], document, arrivals, seconds=settings.duration, warmup=0,
            timeout=timeout,
        )  # fmt: skip
        done.append(result)
        return result

    if trial.measured_window(ctx, server, record, run) is None or not done:
        return record
    report = done[0].report
    if report is not None:
        from_report(settings.contention_limit_pct, settings.client_bound_cpu_pct, record, report)
    return record


def from_report(
    contention_limit_pct: float,
    client_bound_cpu_pct: float,
    record: TrialRecord,
    report: lifecycle.LifecycleReport,
) -> None:
    """The engine's figures into the trial, judged: tasks/s, task latency, its CPU, and
    its counts the trial's fields do not hold (enqueue rate, round trips per task)."""
    record.client_cpu_pct = 100.0 * report.cpu.busy_fraction
    record.ops_per_sec = report.tasks_per_sec
    record.requests = report.completed
    record.lifecycle = LifecycleFacts(
        enqueued=report.enqueued,
        completed=report.completed,
        not_done=report.left,
        enqueue_per_sec=report.enqueue_per_sec,
        commands_per_task=report.commands_per_task,
        round_trips_per_task=report.round_trips_per_task,
        empty_dequeues=report.empty_dequeues,
        foreign_tasks=report.foreign,
    )
    # Task latency at a stated rate only: at capacity it is the queue's backlog (producers
    # keep max_queued tasks waiting), not what a task feels at a team's load.
    has_rate = report.rate is not None and report.latency_us.count > 0
    record.latency_ms = report.latency_ms if has_rate else {}
    if report.rate is not None:
        lag = report.lag_us
        record.open_loop = OpenLoopFacts(
            offered_rate=report.rate,
            arrival=report.arrival or "",
            lag_p99_us=lag.p99 if lag else 0.0,
            lag_max_us=lag.max if lag else 0.0,
            engine_busy_pct=100.0 * report.cpu.busy_fraction,
            hdr_unit=report.hdr_unit,
            hdr=report.hdr,
        )
    judge(contention_limit_pct, client_bound_cpu_pct, record, report)


def judge(
    contention_limit_pct: float,
    client_bound_cpu_pct: float,
    record: TrialRecord,
    report: lifecycle.LifecycleReport,
) -> None:
    """Mark the trial invalid where its figures are not the server's (or not whole)."""
    trial.mark_contended(record, contention_limit_pct)
    busy = 100.0 * report.cpu.busy_fraction
    server = record.server_cpu_pct or 0.0
    # A lifecycle is round trips: the engine pays a send and a receive for every one the
    # server answers, so on one client CPU both run near full at capacity. Only an engine
    # out of CPU while the server had room measured the engine alone; co-saturated, tasks/s
    # is the pair's, and the server's CPU per task its own (docs/workloads.md).
    if busy >= client_bound_cpu_pct and server < CO_SATURATED_SERVER_PCT:
        record.mark_invalid(
            InvalidReason.CLIENT_BOUND,
            f"the lifecycle engine used {busy:.0f}% CPU (limit {client_bound_cpu_pct:.0f}%) "
            f"while the server used {server:.0f}%, so this measures the client, not Redis",
        )
    if report.behind:
        why = "; ".join(report.behind_reasons) or "it could not enqueue at its intended times"
        record.mark_invalid(
            InvalidReason.BEHIND_SCHEDULE,
            f"the engine's producers fell behind their schedule ({why}): lower the rate or "
            "give the client a CPU of its own",
        )
    if report.left:
        record.mark_invalid(
            InvalidReason.BEHIND_SCHEDULE,
            f"{report.left:,} of {report.enqueued:,} tasks were still not done "
            f"{lifecycle.DRAIN_S:g} s after the last enqueue: the consumers could not keep "
            "up with this rate, so its latencies are unknown (lower the rate, or see the "
            "capacity point)",
        )
    timed = report.rate is not None  # at capacity no latency is kept, so none is tainted
    if timed and report.completed and report.tainted > MAX_TAINTED_SHARE * report.completed:
        stalls = report.stalls
        record.mark_invalid(
            InvalidReason.BEHIND_SCHEDULE,
            f"the engine stalled {stalls.count} times ({stalls.total_ms:.1f} ms) and left "
            f"{report.tainted:,} of {report.completed:,} tasks out of the latencies: give "
            "the client a quieter CPU",
        )
    failed = sum(report.errors.values())
    if failed and not record.has_reason(InvalidReason.ERROR_REPLIES):
        named = ", ".join(f"{k} x{n}" for k, n in sorted(report.error_commands.items()))
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(report.errors.items()))
        record.mark_invalid(
            InvalidReason.ERROR_REPLIES,
            f"{failed} replies were errors ({kinds}; {named or 'commands not named'})",
        )
