"""The order of trials: interleaved so that drift hits every target alike.

Repetition r visits the targets forwards when r is even and backwards when odd (A B C,
C B A, ...), and sweeps the points ascending or descending likewise. Each visit is one server
lifetime: servers restart between repetitions so per-process effects (memory layout,
allocator state) become part of the measured noise instead of a hidden bias.
"""

from __future__ import annotations

from dataclasses import dataclass

from regtrack.workloads import Point


@dataclass(frozen=True)
class PlannedTrial:
    seq: int
    repetition: int
    target: str
    point: Point


@dataclass(frozen=True)
class Visit:
    """One server lifetime: start ``target``, set up, measure ``trials`` in order, stop."""

    repetition: int
    target: str
    trials: tuple[PlannedTrial, ...]


def interleave(targets: list[str], points: list[Point], repetitions: int) -> list[Visit]:
    visits: list[Visit] = []
    seq = 0
    for rep in range(repetitions):
        forwards = rep % 2 == 0
        order = targets if forwards else list(reversed(targets))
        sweep = points if forwards else list(reversed(points))
        for target in order:
            trials = []
            for point in sweep:
                trials.append(PlannedTrial(seq=seq, repetition=rep, target=target, point=point))
                seq += 1
            visits.append(Visit(repetition=rep, target=target, trials=tuple(trials)))
    return visits


def trial_count(visits: list[Visit]) -> int:
    return sum(len(v.trials) for v in visits)
