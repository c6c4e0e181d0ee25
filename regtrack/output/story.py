"""The end of `regtrack run` comparing versions: the story a release thread tells, one
candidate at a time. Throughput, p99 latency at the offered load, instructions per op, each
decided or with what more would decide it, then the functions behind a change of
instructions (as `regtrack explain` shows them)."""

from __future__ import annotations

from collections.abc import Sequence

from regtrack.analysis.bisect_records import Attribution
from regtrack.analysis.records import ComparisonResult, PooledComparison
from regtrack.core.text import printable
from regtrack.output.answer_text import change_text, mde_text

TOLD = ("throughput", "open_loop_p99", "instructions_per_op")
TITLE = {
    "throughput": "throughput",
    "open_loop_p99": "p99 latency (open loop)",
    "instructions_per_op": "instructions per op",
}
FUNCTIONS = 3


def _line(r: PooledComparison) -> str:
    where = ", ".join(r.points) or "no point"
    text = f"  {TITLE[r.metric]} at {where}: {change_text(r)}"
    if r.verdict == "inconclusive" and r.mde_pct is not None:
        text += f"; detectable so far: {mde_text(r.mde_pct)} (--until-decided measures more)"
    return text


def _functions(found: Sequence[Attribution]) -> str:
    if not found:
        return ""
    table = found[0]
    moved = sorted(
        (f for f in table["functions"] if f["diff_per_op"] and not f["function"].startswith("(")),
        key=lambda f: -abs(f["diff_per_op"]),
    )[:FUNCTIONS]
    if not moved:
        return ""
    shown = ", ".join(f"{printable(f['function'])} {f['diff_per_op']:+,.1f}" for f in moved)
    return (
        f"  functions behind the instructions at {printable(table['point'])} (Ir/op): {shown}"
        f" (regtrack explain --baseline {printable(table['baseline'])} --candidate "
        f"{printable(table['candidate'])})"
    )


def story(
    result: ComparisonResult, repetitions: int, functions: dict[str, list[Attribution]]
) -> str:
    """Per candidate: its told answers and the functions behind them (``functions``: by
    candidate, the explain tables of its first point)."""
    lines = []
    for candidate in result.targets:
        if candidate == result.baseline:
            continue
        answers = [r for r in result.pooled if r.candidate == candidate and r.metric in TOLD]
        if not answers:
            continue
        answers.sort(key=lambda r: TOLD.index(r.metric))
        lines.append(
            f"{printable(candidate)} vs {printable(result.baseline)} "
            f"({repetitions} interleaved repetitions):"
        )
        lines += [_line(r) for r in answers]
        if line := _functions(functions.get(candidate, [])):
            lines.append(line)
    return "\n".join(lines)
