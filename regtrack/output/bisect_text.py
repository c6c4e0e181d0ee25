"""What `regtrack bisect` says: the commit found, its change, the functions that moved, the log.

Commit subjects, authors, the request and the log are stored text (a crafted database, or a
pull request's commits, chose it): every piece is shown printable (core/text.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from regtrack.analysis.bisect_records import BisectAnswer, BisectLogEntry, BisectStep
from regtrack.analysis.records import SCHEMA_VERSION, ChangeSummary
from regtrack.core.text import printable
from regtrack.output.answer_text import interval_text, server_caption
from regtrack.output.tables import attribution
from regtrack.results.bisection_plan import BisectionPlan
from regtrack.results.records import StoredBisection

SHORT = 7


def change_text(record: ChangeSummary | None) -> str:
    """ "+3.10% [+2.05, +4.12] (regression)": a bisection's change, its interval readable
    or said to be too wide (answer_text.interval_text), as the log and the search's lines say it."""
    if record is None or record.change_pct is None:
        return "no valid measurement"
    return (
        f"{record.change_pct:+.2f}% "
        f"{interval_text(record.ci_low_pct, record.ci_high_pct, digits=2)}"
        f" ({printable(record.verdict)})"
    )


def _runs(step: BisectStep) -> str:
    if step.parent_run_id == step.run_id or step.parent_run_id is None:
        return f"run {step.run_id}, side by side"
    return f"runs {step.parent_run_id} and {step.run_id}, seed by seed"


def _commit(sha: str, plan: BisectionPlan) -> str:
    return f"{printable(sha[:12])} {printable(plan.facts_of(sha).subject or '')}".rstrip()


def _known(fact: str | None) -> str:
    """A commit's fact as shown: "?" where it was not stored."""
    return "?" if fact is None else fact


def _short(sha: str) -> str:
    return printable(sha[:SHORT])


def _shas(commits: Iterable[str]) -> str:
    return ", ".join(map(_short, commits))


def heading(step: BisectStep) -> str:
    """A found change's first line: a step's first bad commit, or where a spread change
    (a drift, or many small steps) is half in."""
    share = step.share
    carries = f" ({100 * abs(share):.0f}% of the ends' change)" if share is not None else ""
    first_bad = printable(step.first_bad)
    if step.kind == "step" or step.interval is None:
        return f"First bad commit: {first_bad}{carries}"
    start, end = step.interval
    return (
        f"Spread change from {_short(start)} to {_short(end)} (a drift or many small steps, "
        f"no one step carries it): half of it is in by {first_bad}{carries}"
    )


def log_lines(bisection: StoredBisection) -> list[str]:
    """Every step of the search, in order: what was measured (which run) and the verdict."""
    lines = []
    for n, entry in enumerate(map(BisectLogEntry.from_json, bisection.log), start=1):
        what = _commit(entry.commit, bisection.config)
        if entry.role == "end":
            lines.append(f"{n:>3}. end    {what}: run {entry.run_id}")
        elif entry.confirm_run_id is not None and entry.parent:
            lines.append(
                f"{n:>3}. confirm {_short(entry.parent)} -> {what}: run "
                f"{entry.confirm_run_id}, {change_text(entry.change)}"
            )
        elif entry.reason:
            lines.append(f"{n:>3}. skip   {what}: {printable(entry.reason)}")
        elif entry.cut is not None:
            how = "decided" if entry.decided else "by its estimate"
            lines.append(
                f"{n:>3}. step   {what}: run {entry.run_id}, {100 * (entry.share or 0):.0f}% "
                f"of the way to bad, {printable(entry.judged)} at {100 * entry.cut:.0f}% ({how}), "
                f"{change_text(entry.vs_good)} vs good"
            )
        else:
            run = f"run {entry.run_id}, " if entry.run_id else ""
            judged = printable(entry.judged or "undecided, measured again")
            vs_good = change_text(entry.vs_good)
            lines.append(f"{n:>3}. step   {what}: {run}{judged}, {vs_good} vs good")
    return lines


def render(bisection: StoredBisection, fmt: str = "table") -> str:
    """The answer first, then the explain table of each step found, then the log."""
    if fmt == "json":
        return json.dumps({"schema_version": SCHEMA_VERSION, **bisection.to_json()}, indent=2)
    plan = bisection.config
    answer = BisectAnswer.from_json(bisection.result or {})
    request = plan.request
    good, bad, metric = map(printable, (request.good, request.bad, request.metric))
    out = [
        f"bisect {bisection.id}: {good}..{bad} "
        f"({len(plan.commits)} commits on the first-parent line), metric "
        f"{metric}, threshold {request.threshold:g}%",
        f"ends: bad vs good {change_text(answer.ends)}",
        f"measured {len(answer.measured_commits)} commits "
        f"(including both ends) in {len(bisection.runs)} runs",
    ]
    if answer.server is not None:  # bisections stored before settings existed lack it
        out.append(server_caption(answer.server))
    if len(answer.steps) > 1:
        out.append(f"NOTE: the range holds {len(answer.steps)} changes, found in order below")
    if answer.more_may_be_left:
        out.append(
            f"NOTE: what was found carries {100 * (answer.carried or 0):.0f}% of the ends' "
            "change, by estimate: the range may hold more (regtrack bisect --all-steps "
            "searches the rest)"
        )
    if answer.by_estimate:
        out.append(
            "placed by their point estimate (not decided within the budget, or too near the "
            f"cut to be): {_shas(answer.by_estimate)}"
        )
    if answer.more_than_one_step:  # a bisection stored before bisection by position
        out.append(
            f"NOTE: the range holds more than one step: {_shas(answer.more_than_one_step)} "
            "measured like neither end (regtrack bisect --all-steps finds every step)"
        )
    if answer.skipped:
        out.append(f"skipped (no build): {_shas(answer.skipped)}")
    for step in answer.steps:
        f = plan.facts_of(step.first_bad)
        out += ["", heading(step), f"  {printable(f.subject or '')}"]
        author, date = (printable(_known(fact)) for fact in (f.author, f.commit_date))
        out.append(f"  author {author}, date {date}")
        if step.between:
            out.append(
                f"  or one of the commits before it that do not build: {_shas(step.between)}"
            )
        if step.run_id is not None:
            out.append(
                f"  change against its parent {_short(step.last_good)}: "
                f"{change_text(step.change)} ({_runs(step)})"
            )
        if step.explain:
            out += ["", attribution(step.explain, "table").rstrip()]
    out += ["", "Log:", *log_lines(bisection)]
    return "\n".join(out) + "\n"
