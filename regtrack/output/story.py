"""The end of `regtrack run` comparing versions: the story a release thread tells, one
candidate at a time. Throughput, p99 latency at the offered load, instructions per op (for a
task lifecycle: tasks/s, task latency at the stated load, server CPU per task), each
decided or with what more would decide it, then the functions behind a change of
instructions (as `regtrack explain` shows them)."""

from __future__ import annotations

from collections.abc import Sequence

from regtrack.analysis import interval, stats
from regtrack.analysis.bisect_records import Attribution
from regtrack.analysis.records import ComparisonResult, PooledComparison
from regtrack.core.text import printable
from regtrack.output.answer_text import change_text

TOLD = (
    "throughput", "open_loop_p99", "instructions_per_op", "cycles_per_op", "tasks_per_sec",
    "task_p50", "task_p99", "server_cpu_per_task",
)  # fmt: skip
TITLE = {
    "throughput": "throughput",
    "open_loop_p99": "p99 latency (open loop)",
    "instructions_per_op": "instructions per op",
    "cycles_per_op": "simulated cycles per op",
    "tasks_per_sec": "tasks/s (capacity)",
    "task_p50": "task latency p50",
    "task_p99": "task latency p99",
    "server_cpu_per_task": "server CPU per task",
}
FUNCTIONS = 3


def _line(r: PooledComparison, more: str) -> str:
    """One answer; an undecided one with what more would decide it (``more``: how to ask
    for it)."""
    where = ", ".join(r.points) or "no point"
    text = f"  {TITLE[r.metric]} at {where}: {change_text(r)}"
    if r.verdict != "inconclusive":
        return text
    change = interval.stored(r.change_pct, r.ci_low_pct, r.ci_high_pct, n=r.n_blocks)
    extra = stats.extra_repetitions(change, r.threshold_pct) if r.n_blocks >= 2 else None
    if extra is not None:
        text += f"; about {extra} more blocks would decide it ({more})"
    elif r.n_blocks >= 2:
        text += f"; not within {stats.MAX_EXTRA_REPETITIONS} more blocks at this noise"
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
    result: ComparisonResult,
    repetitions: int,
    functions: dict[str, list[Attribution]],
    more: str = "--until-decided measures them",
) -> str:
    """Per candidate: its told answers and the functions behind them (``functions``: by
    candidate, the explain tables of its first point; ``more``: how more blocks are asked
    for)."""
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
        lines += [_line(r, more) for r in answers]
        if line := _functions(functions.get(candidate, [])):
            lines.append(line)
    return "\n".join(lines)
