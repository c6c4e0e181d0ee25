"""The order of trials: interleaved so that drift hits every target alike.

Repetition r visits the targets forwards when r is even and backwards when odd (A B C,
C B A, ...), and sweeps the points ascending or descending likewise. Each visit is one server
lifetime: servers restart between repetitions so per-process effects (memory layout,
allocator state) become part of the measured noise instead of a hidden bias.
"""

from __future__ import annotations

from dataclasses import dataclass

from regtrack.workloads import Point

MODES_BY_METRIC = {
    "throughput": ("throughput",),
    "instructions": ("instructions",),
    "both": ("throughput", "instructions"),
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


def interleave(
    targets: list[str],
    points: list[Point],
    repetitions: int,
    modes: tuple[str, ...] = ("throughput",),
) -> list[Visit]:
    visits: list[Visit] = []
    seq = 0
    for rep in range(repetitions):
        forwards = rep % 2 == 0
        order = targets if forwards else list(reversed(targets))
        sweep = points if forwards else list(reversed(points))
        for target in order:
            for mode in modes:
                trials = []
                for point in sweep:
                    trials.append(PlannedTrial(seq=seq, repetition=rep, target=target, point=point))
                    seq += 1
                visits.append(Visit(rep, target, tuple(trials), mode))
    return visits


def trial_count(visits: list[Visit]) -> int:
    return sum(len(v.trials) for v in visits)
