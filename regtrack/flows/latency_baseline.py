"""The open-loop rates a candidate gated against a stored baseline is offered: the very
rates the baseline was offered, or one line saying why it cannot be (exit 2).

A load is a fraction of a capacity measured once, on the first version of a run, and
kept in the run's plan with it. A candidate measured alone would measure its own
capacity, so a slower candidate would be offered less and its p99 would hide the
regression. The candidate takes the stored run's capacity instead (its loads then mean the
same absolute rates), checked against the rates the stored trials were offered; its seeds
are the stored run's (ci takes its seed offset), so repetition r gets the arrival times
the baseline's repetition r got and the blocks pair by seed.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from regtrack.core.errors import BadInput
from regtrack.plan.latency_plan import LatencyPlan
from regtrack.results.comparability import UNKNOWN
from regtrack.results.records import StoredOpenLoop
from regtrack.results.store import Store
from regtrack.results.stored_open_loop import open_loop

INSTEAD = "or measure both here (--baseline-version SPEC)"
# The comparability fact of the engine that timed the open-loop trials: a different binary
# is refused unless forced, as a different load generator binary is.
ENGINE_FACT = "open-loop engine binary"
METHOD_FACT = "open-loop method"
# A stored trial's rate and the plan's agree to rounding (rates are stored as REAL).
RATE_TOLERANCE = 1e-6


@dataclass(frozen=True)
class StoredLatency:
    """What a stored baseline's run offered: its open-loop plan (None: it had none) and
    the open-loop trials of the baseline's version, with the names a refusal says."""

    name: str
    run_id: int
    label: str
    plan: LatencyPlan | None
    trials: tuple[StoredOpenLoop, ...] = ()

    @property
    def what(self) -> str:
        return f"--latency-load with the stored baseline {self.name!r} (run {self.run_id})"


def read(store: Store, name: str, run_id: int, label: str) -> StoredLatency:
    """The stored run's open-loop plan and its trials of ``label``."""
    plan = store.run(run_id).plan.latency
    trials = tuple(t for t in open_loop(store, run_id) if t.target == label) if plan else ()
    return StoredLatency(name, run_id, label, plan, trials)


def followed(asked: LatencyPlan, stored: StoredLatency) -> LatencyPlan:
    """``asked`` (the candidate's --latency-load, with its engine) at the stored run's
    capacity, so each of its loads is the absolute rate the baseline was offered; refused
    in one line where the stored run cannot give that rate."""
    plan = _with_loads(asked, stored)
    if plan.arrival != asked.arrival:
        raise BadInput(
            f"{stored.what}: its arrivals were {plan.arrival}, these would be {asked.arrival}: "
            f"pass --arrival {plan.arrival}, {INSTEAD}"
        )
    if plan.connections != asked.connections:
        raise BadInput(
            f"{stored.what}: its open-loop trials spread their requests over "
            f"{plan.connections} connections, this regtrack's over {asked.connections}, so "
            f"the same rate is not the same load; {INSTEAD}"
        )
    for label in asked.labels():
        _check_trials(stored, label, plan.rate(label))
    capacity = plan.capacity
    assert capacity is not None  # _with_loads refused a plan without one
    source = f"stored baseline {stored.name!r}, run {stored.run_id}: {plan.capacity_from}"
    return dataclasses.replace(asked, capacity=capacity, capacity_from=source)


def offered(plan: LatencyPlan, stored: StoredLatency) -> str:
    """What the candidate is offered and where the rates came from (one line said)."""
    rates = ", ".join(f"{label}: {plan.rate(label):,.0f}/s" for label in plan.labels())
    return (
        f"open-loop rates of the stored baseline {stored.name!r} (run {stored.run_id}), its "
        f"capacity {plan.capacity or 0:,.0f} ops/s not measured again: {rates}"
    )


def _with_loads(asked: LatencyPlan, stored: StoredLatency) -> LatencyPlan:
    """The stored run's open-loop plan, if it offered every load asked for at a capacity
    it kept."""
    plan = stored.plan
    asked_loads = ",".join(f"{x:g}" for x in asked.loads)
    if plan is None or not stored.trials:
        raise BadInput(
            f"{stored.what}: it has no open-loop trials of {stored.label!r} to compare with; "
            f"save a baseline measured with --load {asked_loads} (regtrack run ... --load "
            f"{asked_loads}, then regtrack baseline save), {INSTEAD}"
        )
    if not plan.loads:
        raise BadInput(
            f"{stored.what}: it was offered absolute rates ({', '.join(plan.labels())}), not "
            "fractions of a capacity it measured; save a baseline measured with --load "
            f"{asked_loads}, {INSTEAD}"
        )
    if plan.capacity is None:
        raise BadInput(
            f"{stored.what}: its plan keeps no capacity for its loads to be fractions of; "
            f"save the baseline again, {INSTEAD}"
        )
    missing = [label for label in asked.labels() if label not in plan.labels()]
    if missing:
        theirs = ",".join(f"{x:g}" for x in plan.loads)
        raise BadInput(
            f"{stored.what}: it was measured at {', '.join(plan.labels())}, not at "
            f"{', '.join(missing)}; give --latency-load {theirs} (or part of it) to be "
            f"offered its rates, {INSTEAD}"
        )
    return plan


def _check_trials(stored: StoredLatency, point: str, rate: float) -> None:
    """The stored run has a valid trial of its baseline at ``point``, and its trials there
    were offered the plan's rate (a damaged or hand-made run is refused, not paired)."""
    here = [t for t in stored.trials if t.point == point]
    if not any(t.valid for t in here):
        raise BadInput(
            f"{stored.what}: it has no valid open-loop trial of {stored.label!r} at {point}; "
            f"{INSTEAD}"
        )
    for trial in here:
        if not math.isclose(trial.offered_rate, rate, rel_tol=RATE_TOLERANCE):
            raise BadInput(
                f"{stored.what}: its trial {trial.trial_id} at {point} was offered "
                f"{trial.offered_rate:,.0f}/s, its plan says {rate:,.0f}/s; {INSTEAD}"
            )


def engine_fact(plan: LatencyPlan | None) -> dict[str, str]:
    """The engine binary and how the versions shared it (paired in time or a trial each)
    as comparability facts (results/comparability.py), for a gate whose latency is
    compared across runs; {} without open-loop trials."""
    if plan is None:
        return {}
    return {ENGINE_FACT: plan.engine_sha256 or UNKNOWN, METHOD_FACT: plan.method}
