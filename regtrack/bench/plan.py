"""The order of trials: interleaved so that drift hits every target alike.

Repetition r visits the targets forwards when r is even and backwards when odd (A B C,
C B A, ...), and sweeps the points ascending or descending likewise; two repetitions make
a balanced block (A B B A) that cancels linear drift. Each visit is one server
lifetime: servers restart between repetitions so per-process effects (memory layout,
allocator state) become part of the measured noise instead of a hidden bias.

Throughput paired in time (the default where it applies: bench/paired.py) makes one
visit of all targets per repetition: their servers are up together and the load moves
between them in short windows, so each repetition's trials of A and B share their time.
Open-loop latency is paired the same way (bench/paired_latency.py).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from regtrack.plan.latency_plan import LatencyPlan
from regtrack.workloads.points import Point

MODES_BY_METRIC = {
    "throughput": ("throughput",),
    "instructions": ("instructions",),
    "both": ("throughput", "instructions"),
    "cycles": ("instructions",),  # under callgrind's cache and branch simulation
}


@dataclass(frozen=True)
class PlannedTrial:
    seq: int
    repetition: int
    target: str
    point: Point


@dataclass(frozen=True)
class Visit:
    """One server lifetime: start ``target`` (under callgrind for ``mode`` instructions),
    set up, measure ``trials`` in order, stop."""

    repetition: int
    target: str
    trials: tuple[PlannedTrial, ...]
    mode: str = "throughput"
    # Targets whose servers run together, the load moving between them in windows (in
    # this repetition's order; ``target`` is the first); empty: one server at a time.
    together: tuple[str, ...] = ()


def interleave(
    targets: list[str],
    points: list[Point],
    repetitions: int,
    modes: tuple[str, ...] = ("throughput",),
    first: int = 0,
    narrowed: Mapping[int, tuple[str, ...]] | None = None,
    paired: Collection[str] = (),
    mode_points: Mapping[str, list[Point]] | None = None,
) -> list[Visit]:
    """Visits of repetitions ``first`` .. ``repetitions - 1``.

    Within a repetition each mode visits every target before the next mode starts, so the
    throughput trials of A and B are measured back to back. ``narrowed`` gives the modes
    still measured in some repetitions (a sequential gate stops measuring a metric once it
    is decided). A trial's ``seq`` depends only on its place in the full plan, so a plan
    extended or narrowed later numbers its trials as the full plan would.

    ``paired``: the modes whose trials of a repetition are one visit of every target
    together (throughput, and open-loop latency where its plan pairs it: trials point by
    point, each point's targets side by side), numbered as the separate visits would be.
    ``mode_points``: a mode's own points where they are not the workload's (the open-loop
    rates of "latency").
    """
    visits: list[Visit] = []
    swept = {mode: list((mode_points or {}).get(mode, points)) for mode in modes}
    offsets: dict[str, int] = {}
    per_rep = 0
    for mode in modes:
        offsets[mode], per_rep = per_rep, per_rep + len(targets) * len(swept[mode])
    for rep in range(first, repetitions):
        forwards = rep % 2 == 0
        order = targets if forwards else list(reversed(targets))
        wanted = (narrowed or {}).get(rep, modes)
        for mode in modes:
            if mode not in wanted:
                continue
            mine = swept[mode]
            sweep = mine if forwards else list(reversed(mine))
            base = rep * per_rep + offsets[mode]
            if mode in paired and len(targets) > 1:
                trials = tuple(
                    PlannedTrial(base + t * len(mine) + i, rep, target, point)
                    for i, point in enumerate(sweep)
                    for t, target in enumerate(order)
                )
                visits.append(Visit(rep, order[0], trials, mode, tuple(order)))
                continue
            for t, target in enumerate(order):
                seq = base + t * len(mine)
                trials = tuple(
                    PlannedTrial(seq=seq + i, repetition=rep, target=target, point=point)
                    for i, point in enumerate(sweep)
                )
                visits.append(Visit(rep, target, trials, mode))
    return visits


def trial_count(visits: list[Visit]) -> int:
    return sum(len(v.trials) for v in visits)


def latency_points(first: Point, plan: LatencyPlan) -> list[Point]:
    """The open-loop points: the workload's ``first`` point at pipeline 1, once per rate
    (or load) of ``plan``, its absolute rate in ``params`` once it is known."""
    out = []
    for label in plan.labels():
        kind, _, value = label.partition("=")
        params = {**first.params, "pipeline": 1, kind: float(value)}
        if kind == "load" and plan.capacity is not None:
            params["rate"] = plan.rate(label)
        out.append(Point(first.workload, label, params))
    return out
