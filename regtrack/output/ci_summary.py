"""What `regtrack ci` says: the headline, GitHub annotations, the Markdown summary, JSON.

Labels, the workload's name, point names, setting values and the stored environment are
a pull request's text: the summary quotes each (output/markdown.py) and stays within
GitHub's limit for a step summary; the headline shows them printable (core/text.py).
"""

from __future__ import annotations

from typing import Any

from regtrack.analysis import syscall_breakdown
from regtrack.analysis.records import (
    SCHEMA_VERSION,
    ComparisonResult,
    GateContext,
    GateDecision,
    PooledComparison,
    server_fields,
    shifts_json,
)
from regtrack.core.text import printable
from regtrack.output import markdown
from regtrack.output.answer_text import (
    change_text,
    forced_line,
    mde_text,
    misses_moved,
    server_caption,
    shift_text,
)
from regtrack.output.tables import render

OUTCOME_HEADLINE = {
    "regression": "❌ Regression",
    "no regression": "✅ No regression",
    "inconclusive": "⚠️ Undecided: no regression found, but the gate could not decide",
    "not measured": "⛔ Could not measure",
}
METRIC_TITLE = {
    "instructions_per_op": "instructions per op",
    "cycles_per_op": "simulated cycles per op",
    "throughput": "throughput",
    "open_loop_p99": "p99 latency (open loop)",
    "tasks_per_sec": "tasks/s (capacity)",
    "server_cpu_per_task": "server CPU per task",
    "task_p99": "task latency p99",
    "syscalls_per_op": "syscalls per op",
}
# GitHub takes 1 MiB (1,048,576 bytes) of summary per step; the rest is cut with a note.
MAX_SUMMARY_BYTES = 1_000_000
# The headline is regtrack's words and numbers, a few hundred characters; longer is not.
HEADLINE = 2_000
ENVIRONMENT = ("cpu_model", "cpu_count", "kernel", "loadgen_version", "server_cpus", "client_cpus")


def _rose(decision: GateDecision, r: PooledComparison) -> str:
    """ "getppid +1.000/op (0 -> 1)": the calls behind a syscalls answer that is worse
    (empty otherwise: the JSON holds every breakdown)."""
    behind = decision.syscalls_behind(r)
    if behind is None or r.verdict not in ("regression", "inconclusive") or not behind.rose():
        return ""
    return ", ".join(printable(syscall_breakdown.text(c)) for c in behind.rose()[:3])


def _answer(r: PooledComparison, decision: GateDecision | None = None) -> str:
    """ "instructions per op +0.01% [-0.03, +0.05] no change (detectable ±0.1%)" """
    title = METRIC_TITLE.get(r.metric) or printable(r.metric)
    if r.change_pct is None and r.n_blocks >= 2:
        return f"{title} - (no estimate)"
    # Invalid trials (contended, client-bound, ...) can leave too few complete blocks:
    # change_text says how many there are ("n/a (1 complete block, 2 needed)").
    text = f"{title} {change_text(r)}"
    if r.change_pct is None:
        return text
    if r.verdict != "inconclusive" and r.mde_pct is not None:
        text += f" (detectable: {mde_text(r.mde_pct)})"
    rose = _rose(decision, r) if decision is not None else ""
    if rose:
        text += f"; calls that rose: {rose}"
    return text


def ci_headline(decision: GateDecision, context: GateContext) -> str:
    """The first line: the outcome, each gating answer, and for an undecided gate the
    smallest change this budget could have detected."""
    answers = "; ".join(_answer(r, decision) for r in decision.gating)
    head = OUTCOME_HEADLINE[decision.outcome]
    if context.forced:
        head = f"{head} (FORCED: not like with like)"
    reps = f"{context.repetitions} repetitions"
    if decision.outcome == "inconclusive":
        why = {
            "budget": "the time budget ran out",
            "max-repetitions": "--max-repetitions",
            "merged": "every shard merged so far",
        }
        stop = why.get(context.stopped or "", "the plan ended")
        return f"{head} after {reps} ({stop}): {answers}"
    return f"{head} after {reps}: {answers}"


def ci_annotations(decision: GateDecision, forced: tuple[str, ...] = ()) -> list[str]:
    """GitHub Actions workflow commands, so an undecided or forced gate is never silently
    green."""
    outcome = decision.outcome
    answers = "; ".join(_answer(r, decision) for r in decision.gating)
    lines = [f"::warning title=regtrack: forced::{forced_line(forced)}"] if forced else []
    if outcome == "regression":
        lines.append(f"::error title=regtrack: regression::{answers}")
    elif outcome == "inconclusive":
        lines.append(f"::warning title=regtrack: undecided::{answers}")
    return lines


def ci_json(
    result: ComparisonResult, decision: GateDecision, context: GateContext
) -> dict[str, Any]:
    """What a machine reads (docs/ci.md, "JSON"): the outcome, whether it was decided, each
    gating answer, then every pooled and point record."""
    return {
        "schema_version": SCHEMA_VERSION,
        "outcome": decision.outcome,
        "decided": decision.decided,
        "headline": ci_headline(decision, context),
        "repetitions": context.repetitions,
        "stopped": context.stopped,
        "seeds": context.seeds,
        "forced": list(context.forced),
        **server_fields(result.server),
        "run_shifts": shifts_json(result.run_shifts),  # across runs: each run's shift
        "gate": [r.to_json() for r in decision.gating],
        # which syscalls moved per op, each candidate and workload (largest moves first)
        "syscalls": [b.to_json() for b in result.syscalls],
        "pooled": [r.to_json() for r in result.pooled],
        "records": [r.to_json() for r in result.comparisons],
    }


def _by_call(decision: GateDecision, r: PooledComparison) -> list[str]:
    """The summary's line under a syscalls answer: the calls that moved most per op."""
    behind = decision.syscalls_behind(r)
    if behind is None or not behind.moved():
        return []
    moved = ", ".join(markdown.inline(syscall_breakdown.text(c)) for c in behind.moved()[:5])
    return [f"  - by call: {moved}"]


def ci_summary(result: ComparisonResult, decision: GateDecision, context: GateContext) -> str:
    """The Markdown a CI job shows: the verdict first, then why, then the tables; cut to
    GitHub's limit for a step summary, whatever the names in it."""
    md = markdown.inline
    lines = [
        f"## regtrack: {md(ci_headline(decision, context), HEADLINE)}",
        "",
        f"Candidate {markdown.code(context.candidate)} vs baseline "
        f"{markdown.code(context.baseline)} · workload {markdown.code(context.workload)} · "
        f"{context.repetitions} interleaved, seed-matched repetitions · run {result.run_id} · "
        f"seeds: {md(context.seeds or 'unknown')} · {server_caption(result.server, md)}",
        "",
    ]
    if context.forced:
        lines += [f"**{forced_line(context.forced, md)}**", ""]
    for metric, shift in (result.run_shifts or {}).items():
        if any(r.metric == metric for r in decision.gating) and result.baseline_run_id:
            title = METRIC_TITLE.get(metric) or md(metric)
            lines += [f"{title}: {shift_text(result.baseline_run_id, shift, md)}", ""]
    if not decision.gating:
        lines.append("- no gating metric was measured")
    for r in decision.gating:
        points = markdown.items(r.points) or "no point"
        why = misses_moved(result.comparisons, r) if r.metric == "cycles_per_op" else ""
        lines.append(
            f"- **{METRIC_TITLE.get(r.metric) or md(r.metric)}** over {points} "
            f"({r.n_blocks} blocks): {change_text(r)}{f' ({why})' if why else ''}"
        )
        for point, why in r.excluded.items():
            lines.append(f"  - {md(point)} does not gate: {md(why)}")
        lines += _by_call(decision, r)
    lines += ["", *render(result, "markdown").split("\n")]
    lines.append(
        f"Method: one pooled change per metric over the gating points (the mean of each "
        f"seed-matched block's log ratios), with a {md(result.method)} interval that stays "
        f"valid however often the gate looks; family-wise error {100 * result.alpha:g}% "
        "split over the gating metrics; a point is called only when the pooled change is. "
        "A regression needs the whole interval on the worse side and the estimate beyond "
        "the threshold (docs/methodology.md)."
    )
    if context.environment:
        env = {k: md(context.environment.get(k)) for k in ENVIRONMENT}
        lines.append(
            f"Environment: {env['cpu_model']}, {env['cpu_count']} CPUs, kernel "
            f"{env['kernel']}, {env['loadgen_version']}, server CPU "
            f"{env['server_cpus']}, client CPU {env['client_cpus']}."
        )
    hosts = result.hosts
    if len(hosts) > 1:
        lines.append(
            f"Merged from {len(hosts)} hosts ({markdown.items(hosts)}): every block was "
            "compared on the host that measured it, and hosts are a level of the model "
            "(docs/scale-out.md); the environment above is the first shard's."
        )
    note = (
        f"The summary is cut here to stay within GitHub's {MAX_SUMMARY_BYTES:,}-byte limit for "
        "a step summary: `regtrack ci --json` and the report hold everything."
    )
    kept = markdown.fit(lines, MAX_SUMMARY_BYTES, note, size=lambda line: len(line.encode()))
    return "\n".join(kept) + "\n"
