"""The CI decision: one outcome from a comparison's gating answers, and what is still open."""

from __future__ import annotations

from typing import Any

from regtrack.analysis.metrics import METRIC_BY_NAME

DISAGREEMENT_PCT = 2.0


def disagreements(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Points where throughput and instructions per op tell different stories.

    Fewer instructions should mean more throughput; when a candidate is faster while
    executing more instructions per op (or slower with fewer), something callgrind cannot
    see is at work, typically syscalls or memory behaviour, and the user must know.
    """
    by_key: dict[tuple, dict[str, dict[str, Any]]] = {}
    for r in result["comparisons"]:
        by_key.setdefault((r["workload"], r["point"], r["candidate"]), {})[r["metric"]] = r
    out = []
    for (workload, point, candidate), metrics in by_key.items():
        tput, instr = metrics.get("throughput"), metrics.get("instructions_per_op")
        if not tput or not instr or not (tput["trusted"] and instr["trusted"]):
            continue  # an untrusted number is flagged already; it cannot disagree
        if tput["change_pct"] is None or instr["change_pct"] is None:
            continue
        faster = tput["change_pct"] > DISAGREEMENT_PCT
        slower = tput["change_pct"] < -DISAGREEMENT_PCT
        more = instr["change_pct"] > DISAGREEMENT_PCT
        fewer = instr["change_pct"] < -DISAGREEMENT_PCT
        if (faster and more) or (slower and fewer):
            sys_change = metrics.get("syscalls_per_op", {}).get("change_pct")
            out.append(
                {
                    "workload": workload,
                    "point": point,
                    "candidate": candidate,
                    "throughput_change_pct": tput["change_pct"],
                    "instructions_change_pct": instr["change_pct"],
                    "syscalls_change_pct": sys_change,
                }
            )
    return out


def gate(result: dict[str, Any]) -> dict[str, Any]:
    """The CI decision from the pooled answers of the gating metrics.

    ``regression`` if any is a regression; ``not measured`` if none had blocks with valid
    trials on both sides; ``inconclusive`` if one could not be decided (its minimum
    detectable effect says how far the budget got); otherwise ``no regression``.
    """
    gating = [r for r in result["pooled"] if r["gating"]]
    by_verdict: dict[str, list[dict[str, Any]]] = {}
    for r in gating:
        by_verdict.setdefault(r["verdict"], []).append(r)
    if by_verdict.get("regression"):
        outcome = "regression"
    elif not any(r["n_blocks"] for r in gating):
        outcome = "not measured"
    elif by_verdict.get("inconclusive"):
        outcome = "inconclusive"
    else:
        outcome = "no regression"
    return {"outcome": outcome, "cells": gating, "by_verdict": by_verdict}


def undecided_modes(result: dict[str, Any]) -> tuple[str, ...]:
    """The trial modes whose gating metrics more repetitions could still decide; none once
    a regression is found (the gate has its answer) or every gating answer is in."""
    decision = gate(result)
    if decision["outcome"] in ("regression", "no regression", "not measured"):
        return ()
    modes = {METRIC_BY_NAME[r["metric"]].modes[0] for r in decision["by_verdict"]["inconclusive"]}
    return tuple(sorted(modes, reverse=True))
