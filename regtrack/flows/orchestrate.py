"""One measured run from a prepared Job: CPUs held, leftovers removed, the run recorded, executed.

The command line calls this and presents what comes back; messages go through ``say``
and trial progress through ``progress``, so nothing here prints or formats.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from regtrack.analysis import gate
from regtrack.analysis.records import ComparisonResult
from regtrack.bench import capacity, kernel_calls, loadgen_choice, server_settings
from regtrack.bench.job import Job, RunPurpose, parse_duration
from regtrack.bench.measuring import Measuring
from regtrack.bench.runner import BlockRule, execute
from regtrack.bench.runtimes import docker
from regtrack.core import cpulock, cycles, environment, redact
from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.core.records import Progress
from regtrack.flows import resume
from regtrack.plan.latency_plan import PAIRED as LATENCY_PAIRED
from regtrack.results import loaded
from regtrack.results.store import Store

Say = Callable[[str], None]


def measure(
    job: Job,
    measuring: Measuring,
    db: str | None,
    say: Say,
    progress: Callable[[], AbstractContextManager[Progress]] = (
        lambda: contextlib.nullcontext(Progress())
    ),
    wait: bool = True,
    resume_store: tuple[Store, int] | None = None,
    sequential: BlockRule | None = None,
    purpose: RunPurpose = RunPurpose(),
) -> tuple[Store, int, str]:
    """Record the run (or reopen it), execute it with progress through ``measuring``, say
    where the trials went.

    The CPUs are held (cpulock) from before the run is recorded until it ends, so a run
    that waits for another one's CPUs is not recorded as running meanwhile.
    """
    store = resume_store[0] if resume_store else Store.open(db or job.settings.database)
    if job.shard is not None:  # the .db file alone travels to `merge`: keep it whole
        store.keep_whole()
    with _holding(job, say, wait):
        _say_syscalls(say)
        if resume_store:
            run_id = resume_store[1]
            resume.check_resumable(store, run_id)
            store.reopen_run(run_id)
            say(f"resuming run {run_id}")
        else:
            # Each version knows and keeps them, or exit 2: the job of what each runs with.
            job = server_settings.check(job, measuring, say)
            job = _settled(job, measuring, say)
            job = _with_capacity(job, measuring, say)
            _say_method(job, say)
            env = environment.capture(job.cpus, job.loadgen.as_dict())
            env["runtime"] = job.runtime
            run_id = store.create_run(
                ["regtrack", *redact.argv(sys.argv[1:])],
                job.config(purpose),
                env,
                job.loadgen.as_dict(),
            )
            say(
                f"run {run_id}: {len(job.targets)} versions x {len(job.points)} points "
                f"x {job.settings.repetitions} repetitions; server on CPU "
                f"{job.cpus.server_list}, {job.loadgen.name} on CPU {job.cpus.client_list}"
            )
        try:
            with progress() as shown:
                status = execute(
                    job, measuring, store, run_id, shown, resume=bool(resume_store),
                    sequential=sequential,
                )  # fmt: skip
        finally:
            n = len(store.trials(run_id))
            say(f"{n} trials of run {run_id} stored in {store.path}")
    return store, run_id, status


@contextlib.contextmanager
def _holding(job: Job, say: Say, wait: bool) -> Iterator[None]:
    """The job's CPUs held (cpulock), and containers a killed regtrack left removed."""
    with cpulock.hold(
        job.cpus.server + job.cpus.client,
        wait=wait,
        on_wait=lambda text: say(f"{text} (--no-wait to fail instead)"),
    ):
        if job.docker is not None:
            for name in docker.remove_leftovers(job.docker):
                say(f"removed container {name}, left by a regtrack that was killed")
        yield


def _settled(job: Job, measuring: Measuring, say: Say) -> Job:
    """The job with a GET sweep's load generator decided before the run is recorded, and
    why it was chosen."""
    if job.loadgen_choice is not None:  # chosen by the user, or a resumed run's
        return job
    job = loadgen_choice.settle(job, measuring)
    choice = job.loadgen_choice
    assert choice is not None
    kept = f"; probed before, kept in {choice.cached}" if choice.cached else ""
    say(f"load generator: {choice.tool} ({choice.why}{kept})")
    return job


def _with_capacity(job: Job, measuring: Measuring, say: Say) -> Job:
    """The job with the capacity its open-loop loads are fractions of, measured before
    the run is recorded (so the plan stored holds the absolute rates every version gets)."""
    if job.latency is None or not job.latency.needs_capacity:
        return job
    label = job.targets[0].label
    how = (
        "its producers as fast as its consumers finish"
        if job.workload.kind == "lifecycle"
        else ("closed loop, pipeline 1")
    )
    say(f"measuring the capacity of {label} ({how}), for --load")
    record, tries = measuring.capacity_trial(job), 1
    while tries < capacity.TRIES and capacity.worth_again(record):
        tries += 1
        say(f"the capacity trial was {record.reason_text}: measuring it again ({tries} of "
            f"{capacity.TRIES})")  # fmt: skip
        record = measuring.capacity_trial(job)
    if not capacity.usable(record):
        why = record.reason_text or "no throughput was measured"
        why += f", in {tries} tries" if tries > 1 else ""
        raise CannotMeasure(
            f"the capacity of {label} could not be measured ({why}): give the open-loop "
            "rates as --rate instead of --load"
        )
    ops = float(record.ops_per_sec or 0.0)
    bound = f"; a lower bound: {record.reason_text}" if record.reasons else ""
    source = (
        f"{label} {record.point}, closed loop, {job.loadgen.name}, "
        f"{job.settings.duration:g} s{bound}"
    )
    latency = job.latency.with_capacity(ops, source)
    rates = ", ".join(f"{x:g}: {latency.rate(p):,.0f}/s" for x, p in
                      zip(latency.loads, latency.labels(), strict=True))  # fmt: skip
    unit = "tasks/s" if job.workload.kind == "lifecycle" else "ops/s"
    say(f"capacity of {label}: {ops:,.0f} {unit} ({source}); open-loop rates {rates}")
    return dataclasses.replace(job, latency=latency)


def _say_syscalls(say: Say) -> None:
    """One line where the kernel cannot count syscalls by name: the fallback, and why
    (once the database is open: an error there is the first line)."""
    if why := kernel_calls.unavailable():
        say(
            "note: syscalls are counted by /proc/PID/io (read and write calls only), not by "
            f"name: {why}"
        )


def _say_method(job: Job, say: Say) -> None:
    """How throughput and open-loop latency are measured, when several versions are
    compared."""
    if len(job.targets) < 2:
        return
    if job.latency is not None and job.latency.method == LATENCY_PAIRED:
        say(
            f"open-loop latency: paired in time, one arrival stream moving between the "
            f"{len(job.targets)} servers every {job.settings.window:g} s"
        )
    if job.metric in cycles.COUNTING_ONLY:
        return
    if job.pairs_in_time and job.lifecycle_pairs:
        say(
            f"tasks/s and server CPU per task: paired in time, the lifecycle taking turns "
            f"between the {len(job.targets)} servers every {job.settings.window:g} s"
        )
    elif job.duet:
        sides = "; ".join(
            f"{label}: server on CPU {plan.server_list}, load on CPU {plan.client_list}"
            for label, plan in job.side_cpus().items()
        )
        say(
            f"throughput: duet, the {len(job.targets)} servers loaded at once, read every "
            f"{job.settings.window:g} s ({sides}; no latency figures)"
        )
    elif job.pairs_in_time:
        say(
            f"throughput: paired in time, the load moving between the {len(job.targets)} "
            f"servers every {job.settings.window:g} s (no latency figures; --pairing "
            "separate measures them)"
        )
    elif job.settings.pairing in ("time", "duet"):
        say(
            f"throughput: separate trials ({job.loadgen.name} cannot be paused and resumed; "
            "memtier or redis-benchmark can)"
        )


def sequential_rule(
    job: Job,
    budget: str,
    max_repetitions: int,
    comparison: Callable[[Store, int], ComparisonResult],
) -> BlockRule:
    """Blocks of two repetitions (A B, B A) while ``comparison``'s gate is undecided."""
    if job.shard is not None:
        raise BadInput(
            f"sequential repetitions with shard {job.shard.label}: one shard would decide on "
            "its own trials alone; measure a fixed number of repetitions on every shard, "
            "then `regtrack merge` them and compare the merged run"
        )
    if job.settings.repetitions % 2 and len(job.targets) > 1:
        raise BadInput(
            f"--repetitions {job.settings.repetitions}: sequential repetitions start from an "
            "even number, so the order A B / B A stays balanced"
        )
    return BlockRule(
        needed=lambda store, run_id: _measured(
            job, gate.undecided_modes(comparison(store, run_id))
        ),
        budget_s=parse_duration(budget, "--budget"),
        max_repetitions=max_repetitions,
    )


def _measured(job: Job, modes: tuple[str, ...]) -> tuple[str, ...]:
    """The plan's visit kinds among ``modes``; all of them where a metric's visit is not
    the plan's (a --driver program's task latency comes from its one kind of trial)."""
    known = tuple(m for m in modes if m in job.modes)
    return known if known or not modes else job.modes


def extend(
    store: Store,
    run_id: int,
    repetitions: int,
    measuring: Measuring,
    say: Say,
    progress: Callable[[], AbstractContextManager[Progress]],
    wait: bool = True,
) -> str:
    """Grow a run to ``repetitions`` (a bisection's ends, when a step needs more seed pairs
    than they have): the run's own job, checked against this machine as a resumed run's
    is, measuring only what it lacks (trials an interrupted extension left out, then the
    new repetitions). They read the next seeds of the run's offset, so they pair with a
    step's repetitions of the same numbers."""
    job = resume.load_job(store, run_id, extending=True)
    first = job.settings.repetitions
    if repetitions <= first and loaded.stored_run(store, run_id).status == "complete":
        return "complete"
    with _holding(job, say, wait):
        if repetitions > first:
            job = job.extended(repetitions, job.modes)
            say(f"run {run_id}: repetitions {first + 1} to {repetitions} added")
        store.reopen_run(run_id)
        store.update_config(run_id, job.config())
        with progress() as shown:
            return execute(job, measuring, store, run_id, shown, resume=True)


def fail_if_incomplete(store: Store, run_id: int, status: str) -> None:
    """An incomplete run is a measurement failure (exit 3), after its results are shown."""
    if status == "incomplete":
        loaded.stored_run(store, run_id).require_complete()
