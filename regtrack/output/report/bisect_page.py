"""The HTML page of one bisection: the commit found, its change, the functions that moved,
every step with its run. Built from what `regtrack bisect` stored; nothing is measured."""

from __future__ import annotations

from typing import Any

from regtrack.analysis.bisect_records import BisectAnswer, BisectLogEntry
from regtrack.output import bisect_text
from regtrack.output.answer_text import server_caption
from regtrack.output.report.pages import run_file
from regtrack.results.records import StoredBisection


def bisect_file(bisection_id: int) -> str:
    return f"bisect-{bisection_id}.html"


def page(bisection: StoredBisection) -> dict[str, Any]:
    """What the template shows: request, answer (steps with facts, change, explain), log."""
    plan = bisection.config
    answer = BisectAnswer.from_json(bisection.result or {})
    steps = []
    for step in answer.steps:
        steps.append(
            {
                **step.to_json(),
                "heading": bisect_text.heading(step),
                "facts": plan.facts_of(step.first_bad),
                "parent_facts": plan.facts_of(step.last_good),
                "run_file": run_file(step.run_id) if step.run_id else None,
                "parent_run_file": run_file(step.parent_run_id) if step.parent_run_id else None,
            }
        )
    log = []
    entries = map(BisectLogEntry.from_json, bisection.log)
    for entry, line in zip(entries, bisect_text.log_lines(bisection), strict=True):
        run_id = entry.run_id or entry.confirm_run_id
        log.append({"text": line.strip(), "run_file": run_file(run_id) if run_id else None})
    return {
        "id": bisection.id,
        "file": bisect_file(bisection.id),
        "status": bisection.status,
        "created_at": bisection.created_at,
        "request": plan.request,
        "commits": len(plan.commits),
        "ends": answer.ends.to_json() if answer.ends else None,
        "steps": steps,
        "more_than_one_step": list(answer.more_than_one_step),
        "by_estimate": list(answer.by_estimate),
        "skipped": list(answer.skipped),
        "measured": len(answer.measured_commits),
        "server": server_caption(answer.server) if answer.server is not None else "",
        "runs": list(bisection.runs),
        "log": log,
    }
