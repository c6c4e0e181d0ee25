"""The CI decision: one outcome from a comparison's gating answers, and what is still open."""

from __future__ import annotations

from collections.abc import Iterable

from regtrack.analysis.metrics import METRIC_BY_NAME
from regtrack.analysis.records import ComparisonResult, Disagreement, GateDecision, PointComparison

DISAGREEMENT_PCT = 2.0


def disagreements(comparisons: Iterable[PointComparison]) -> list[Disagreement]:
    """Points where throughput and instructions per op tell different stories.

    Fewer instructions should mean more throughput; when a candidate is faster while
    executing more instructions per op (or slower with fewer), something callgrind cannot
    see is at work, typically syscalls or memory behaviour, and the user must know.
    """
    by_key: dict[tuple[str, str, str], dict[str, PointComparison]] = {}
    for r in comparisons:
        by_key.setdefault((r.workload, r.point, r.candidate), {})[r.metric] = r
    out = []
    for (workload, point, candidate), metrics in by_key.items():
        tput, instr = metrics.get("throughput"), metrics.get("instructions_per_op")
        if not tput or not instr or not (tput.trusted and instr.trusted):
            continue  # an untrusted number is flagged already; it cannot disagree
        if tput.change_pct is None or instr.change_pct is None:
            continue
        faster = tput.change_pct > DISAGREEMENT_PCT
        slower = tput.change_pct < -DISAGREEMENT_PCT
        more = instr.change_pct > DISAGREEMENT_PCT
        fewer = instr.change_pct < -DISAGREEMENT_PCT
        if (faster and more) or (slower and fewer):
            syscalls = metrics.get("syscalls_per_op")
            out.append(
                Disagreement(
                    workload=workload,
                    point=point,
                    candidate=candidate,
                    throughput_change_pct=tput.change_pct,
                    instructions_change_pct=instr.change_pct,
                    syscalls_change_pct=syscalls.change_pct if syscalls else None,
                )
            )
    return out


def gate(result: ComparisonResult) -> GateDecision:
    """The CI decision from the pooled answers of the gating metrics.

    ``regression`` if any is a regression; ``not measured`` if none had blocks with valid
    trials on both sides; ``inconclusive`` if one could not be decided (its minimum
    detectable effect says how far the budget got); otherwise ``no regression``.
    """
    gating = tuple(r for r in result.pooled if r.gating)
    verdicts = {r.verdict for r in gating}
    if "regression" in verdicts:
        outcome = "regression"
    elif not any(r.n_blocks for r in gating):
        outcome = "not measured"
    elif "inconclusive" in verdicts:
        outcome = "inconclusive"
    else:
        outcome = "no regression"
    return GateDecision(outcome=outcome, gating=gating, syscalls=result.syscalls)


def undecided_modes(result: ComparisonResult) -> tuple[str, ...]:
    """The trial modes whose gating metrics more repetitions could still decide; none once
    a regression is found (the gate has its answer) or every gating answer is in."""
    decision = gate(result)
    if decision.outcome in ("regression", "no regression", "not measured"):
        return ()
    modes = {METRIC_BY_NAME[r.metric].measured_by for r in decision.with_verdict("inconclusive")}
    return tuple(sorted(modes, reverse=True))
