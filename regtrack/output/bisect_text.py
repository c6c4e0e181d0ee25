"""What `regtrack bisect` says: the commit found, its change, the functions that moved, the log."""

from __future__ import annotations

import json
from typing import Any

from regtrack.output.tables import attribution, interval_text, server_caption

SHORT = 7


def _change(record: dict[str, Any] | None) -> str:
    if not record or record.get("change_pct") is None:
        return "no valid measurement"
    return (
        f"{record['change_pct']:+.2f}% "
        f"{interval_text(record['ci_low_pct'], record['ci_high_pct'], digits=2)}"
        f" ({record['verdict']})"
    )


def _runs(step: dict[str, Any]) -> str:
    both = [step.get("parent_run_id"), step.get("run_id")]
    if both[0] == both[1] or both[0] is None:
        return f"run {step['run_id']}, side by side"
    return f"runs {both[0]} and {both[1]}, seed by seed"


def _commit(sha: str, facts: dict[str, dict[str, str]]) -> str:
    f = facts.get(sha, {})
    return f"{sha[:12]} {f.get('subject', '')}".rstrip()


def log_lines(bisection: dict[str, Any]) -> list[str]:
    """Every step of the search, in order: what was measured (which run) and the verdict."""
    facts = bisection["config"]["facts"]
    lines = []
    for n, entry in enumerate(bisection["log"], start=1):
        what = _commit(entry["commit"], facts)
        if entry.get("role") == "end":
            lines.append(f"{n:>3}. end    {what}: run {entry['run_id']}")
        elif "confirm_run_id" in entry:
            lines.append(
                f"{n:>3}. confirm {entry['parent'][:SHORT]} -> {what}: run "
                f"{entry['confirm_run_id']}, {_change(entry.get('change'))}"
            )
        elif entry.get("reason"):
            lines.append(f"{n:>3}. skip   {what}: {entry['reason']}")
        else:
            run = f"run {entry['run_id']}, " if entry.get("run_id") else ""
            judged = entry.get("judged") or "undecided, measured again"
            change = _change(entry.get("vs_good"))
            lines.append(f"{n:>3}. step   {what}: {run}{judged}, {change} vs good")
    return lines


def render(bisection: dict[str, Any], fmt: str = "table") -> str:
    """The answer first, then the explain table of each step found, then the log."""
    if fmt == "json":
        return json.dumps(bisection, indent=2)
    config, result = bisection["config"], bisection["result"] or {}
    facts, request = config["facts"], config["request"]
    out = [
        f"bisect {bisection['id']}: {request['good']}..{request['bad']} "
        f"({len(config['commits'])} commits on the first-parent line), metric "
        f"{request['metric']}, threshold {request['threshold']:g}%",
        f"ends: bad vs good {_change(result.get('ends'))}",
        f"measured {len(result.get('measured_commits', []))} commits "
        f"(including both ends) in {len(bisection.get('runs', []))} runs",
    ]
    if "server_config" in result:  # bisections stored before settings existed lack it
        out.append(server_caption(result))
    if result.get("more_than_one_step"):
        shown = ", ".join(c[:SHORT] for c in result["more_than_one_step"])
        out.append(
            f"NOTE: the range holds more than one step: {shown} "
            "measured like neither end (regtrack bisect --all-steps finds every step)"
        )
    if result.get("skipped"):
        shown = ", ".join(c[:SHORT] for c in result["skipped"])
        out.append(f"skipped (no build or no decision): {shown}")
    for step in result.get("steps", []):
        bad = step["first_bad"]
        f = facts.get(bad, {})
        out += ["", f"First bad commit: {bad}", f"  {f.get('subject', '')}"]
        out.append(f"  author {f.get('author', '?')}, date {f.get('commit_date', '?')}")
        if step.get("between"):
            out.append(
                "  or one of the unmeasured commits before it: "
                + ", ".join(c[:SHORT] for c in step["between"])
            )
        if "change" in step:
            out.append(
                f"  change against its parent {step['last_good'][:SHORT]}: "
                f"{_change(step['change'])} ({_runs(step)})"
            )
        if step.get("explain"):
            out += ["", attribution(step["explain"], "table").rstrip()]
    out += ["", "Log:", *log_lines(bisection)]
    return "\n".join(out) + "\n"
