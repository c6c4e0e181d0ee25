"""One open-loop trial: a stated rate offered to a running server, latency from the
intended send time (bench/loadgen/openloop.py), the server's evidence taken around it as
for every trial (bench/trial.measured_window).

The trial is invalid when its numbers would not be the server's: the engine fell behind
its schedule (its own delay would be in the latencies), the pinned CPUs were shared, or
requests failed or timed out.
"""

from __future__ import annotations

from regtrack.bench import trial
from regtrack.bench.loadgen import openloop
from regtrack.bench.loadgen.base import LoadgenBinary, LoadgenResult
from regtrack.bench.plan import PlannedTrial
from regtrack.bench.runtimes.base import RunningServer
from regtrack.core.errors import BadInput
from regtrack.core.records import InvalidReason, LoadSpec, OpenLoopFacts, TrialRecord
from regtrack.plan.latency_plan import LatencyPlan

MODE = "latency"
# Requests beyond a percentile a trial needs for it to be more than its few slowest
# requests (docs/methodology.md, "Latency percentiles"): p99 needs 1,000, p99.9 10,000.
MIN_TAIL_SAMPLES = 10
# A trial whose engine's own stalls touched more than this share of its requests is not
# judged: too much of the time around its tail went unseen (a judgement, not a measurement:
# on this VM's noisier CPU the stalls touched about 0.1-1% at 22,000/s).
MAX_TAINTED_SHARE = 0.05
QUANTILES = {"p50": 0.5, "p99": 0.99, "p999": 0.999}


def resolved(latency_ms: dict[str, float], count: int) -> dict[str, float]:
    """The percentiles ``count`` requests resolve (an unresolved one is left out, so it is
    never compared); the max and the mean are kept as shown."""
    return {
        key: value
        for key, value in latency_ms.items()
        if key not in QUANTILES or count * (1 - QUANTILES[key]) >= MIN_TAIL_SAMPLES - 1e-9
    }


def offered(plan: LatencyPlan, seed_offset: int, planned: PlannedTrial) -> openloop.Offered:
    """What a trial offers: its point's rate, the same arrivals for every version of a
    repetition (the engine's seed is the repetition's)."""
    return openloop.Offered(
        rate=plan.rate(planned.point.label),
        arrival=plan.arrival,
        connections=plan.connections,
        seed=seed_offset + planned.repetition + 1,
    )


def latency_trial(
    ctx: trial.Context,
    engine: LoadgenBinary,
    server: RunningServer,
    planned: PlannedTrial,
    specs: list[LoadSpec],
    offered: openloop.Offered,
) -> TrialRecord:
    """Warm-up and measured window in one engine run (its warm-up requests are not
    recorded), at ``offered``'s rate."""
    if len(specs) != 1:
        raise BadInput(
            f"{planned.point.workload}: an open-loop trial sends one rotation of commands; "
            "a workload of several processes (producers and consumers) is measured closed loop"
        )
    record = trial.new_record(planned, MODE)
    settings = ctx.settings
    aim = ctx.aim(server)
    timeout = 60 + 10 * (settings.duration + settings.warmup)
    done: list[openloop.OpenLoopResult] = []

    def run() -> LoadgenResult:
        result = openloop.run_once(
            engine, aim, specs[0], offered,
            seconds=settings.duration, warmup=settings.warmup, timeout=timeout,
        )  # fmt: skip
        done.append(result)
        return result

    if trial.measured_window(ctx, server, record, run) is None or not done:
        return record
    record.warmup_s = settings.warmup
    if done[0].report is not None:
        from_report(settings.contention_limit_pct, record, done[0].report, offered)
    return record


def from_report(
    contention_limit_pct: float,
    record: TrialRecord,
    report: openloop.OpenLoopReport,
    offered: openloop.Offered,
) -> None:
    """The engine's figures of one server into its trial, judged."""
    record.client_cpu_pct = 100.0 * report.cpu.busy_fraction
    record.latency_ms = resolved(report.latency_ms, report.latency_us.count)
    record.open_loop = OpenLoopFacts(
        offered_rate=offered.rate,
        arrival=offered.arrival,
        lag_p99_us=report.lag_us.p99,
        lag_max_us=report.lag_us.max,
        engine_busy_pct=100.0 * report.cpu.busy_fraction,
        hdr_unit=report.hdr_unit,
        hdr=report.hdr,
    )
    judge(contention_limit_pct, record, report)


def judge(
    contention_limit_pct: float, record: TrialRecord, report: openloop.OpenLoopReport
) -> None:
    """Mark the trial invalid where its latencies are not the server's."""
    trial.mark_contended(record, contention_limit_pct)
    if report.behind:
        why = "; ".join(report.behind_reasons) or "it could not send at its intended times"
        record.mark_invalid(
            InvalidReason.BEHIND_SCHEDULE,
            f"the open-loop engine offered {report.rate_intended:.0f}/s and fell behind ({why}; "
            f"lag p99 {report.lag_us.p99:.0f} us, engine CPU "
            f"{100 * report.cpu.busy_fraction:.0f}%): lower the rate or give the client a CPU "
            "of its own",
        )
    stalls = report.stalls
    if report.completed and report.tainted > MAX_TAINTED_SHARE * report.completed:
        record.mark_invalid(
            InvalidReason.BEHIND_SCHEDULE,
            f"the open-loop engine stalled {stalls.count} times ({stalls.total_ms:.1f} ms, the "
            f"longest {stalls.max_ms:.1f} ms) and left {report.tainted:,} of "
            f"{report.completed:,} requests out of the latencies: give the client a quieter "
            "CPU (benchmarks/cpu_hiccups.py measures each CPU's)",
        )
    failed = sum(report.errors.values()) + report.timeouts
    if failed:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(report.errors.items()))
        timeouts = f"{report.timeouts} timed out" if report.timeouts else ""
        record.mark_invalid(
            InvalidReason.ERROR_REPLIES,
            f"{failed} requests failed ({', '.join(x for x in (kinds, timeouts) if x)})",
        )
