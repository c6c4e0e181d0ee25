"""The pull-request comment the GitHub Action keeps up to date: the gate's verdict table,
built from `regtrack ci --json` output with the words the step summary uses.

One comment per pull request (and per gate, with a comment id): the hidden marker on its
first line is how the next push finds it and edits it instead of adding another.

Every name in it (labels, the workload, points, forced differences) is a pull request's
text: each is quoted (output/markdown.py), and the body stays within GitHub's limit
whatever their length, or GitHub refuses the edit and a stale verdict stays up.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regtrack.analysis import syscall_breakdown
from regtrack.analysis.records import PointComparison, PooledComparison
from regtrack.analysis.syscall_breakdown import SyscallBreakdown, SyscallChange
from regtrack.core.errors import BadInput
from regtrack.core.text import FIELD
from regtrack.output import markdown
from regtrack.output.answer_text import UNTRUSTED, change_text, format_value, misses_moved
from regtrack.output.ci_summary import HEADLINE, METRIC_TITLE

MARKER_PREFIX = "<!-- regtrack:ci"
# GitHub refuses a comment body over 65,536 characters: the per-point details give way
# first, then whole lines from the end of the rest (markdown.fit). 65,000 characters are
# at most 260,000 UTF-8 bytes, under the 262,144 bytes GitHub has been measured to take.
MAX_BODY = 65_000
TRIMMED = (
    "The comment is cut here to stay within GitHub's 65,536-character limit: the "
    "artifact's JSON and report hold everything."
)
# The workflow run's address as `regtrack github comment` makes it from the runner's
# variables ($GITHUB_SERVER_URL/$GITHUB_REPOSITORY/actions/runs/$GITHUB_RUN_ID): anything
# else is shown as text, not made a link.
RUN_URL_RE = re.compile(r"https?://[\w.:-]+/[\w.-]+/[\w.-]+/actions/runs/\d+", re.ASCII)
VERDICT_ICON = {
    "regression": "❌",
    "improvement": "🚀",
    "no change": "✅",
    "inconclusive": "⚠️",
}
# What `regtrack ci` exit codes mean (core/errors.py), for a gate that wrote no verdict.
EXIT_MEANING = {
    0: "no regression",
    1: "a regression",
    2: "bad usage or input",
    3: "could not measure: a tool missing, a server that would not start, no valid trial",
    4: "an internal error, a bug in regtrack",
    5: "one shard measured, nothing decided",
    130: "interrupted",
}


def marker(comment_id: str = "") -> str:
    """The hidden first line that identifies this gate's comment; ``comment_id`` keeps
    several gates of one pull request (other workloads, other versions) apart."""
    if comment_id and not re.fullmatch(r"[A-Za-z0-9_.]+(-[A-Za-z0-9_.]+)*", comment_id):
        raise BadInput(f"comment id {comment_id!r}: use letters, digits, '_', '.' and single '-'")
    return f"{MARKER_PREFIX}:{comment_id} -->" if comment_id else f"{MARKER_PREFIX} -->"


@dataclass(frozen=True)
class CiVerdict:
    """What a `regtrack ci --json` file says, read strictly: a file of another shape is
    refused rather than posted half-empty."""

    outcome: str
    headline: str
    repetitions: int
    baseline: str
    candidate: str
    workload: str
    gate: tuple[PooledComparison, ...]
    records: tuple[PointComparison, ...]
    forced: tuple[str, ...]
    syscalls: tuple[SyscallBreakdown, ...] = ()  # which calls moved (older JSON: none)

    @classmethod
    def read(cls, path: Path) -> CiVerdict:
        """The verdict in ``path``; BadInput (exit 2) when it is missing or not ci JSON."""
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise BadInput(f"{path}: no such file (regtrack ci --json {path} writes it)") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BadInput(f"{path}: not regtrack ci JSON ({exc})") from None
        return cls.from_json(data, str(path))

    @classmethod
    def from_json(cls, data: Any, where: str = "the ci JSON") -> CiVerdict:
        try:
            records = [PointComparison.from_json(r) for r in data["records"]]
            gate = [PooledComparison.from_json(r) for r in data["gate"]]
            for r in (*gate, *records):  # words of regtrack's own, shown as they are
                if r.verdict not in VERDICT_ICON:
                    raise ValueError(f"verdict {str(r.verdict)[:40]!r}")
            first = data["records"][0] if data["records"] else {}
            return cls(
                outcome=str(data["outcome"]),
                headline=str(data["headline"]),
                repetitions=int(data["repetitions"]),
                baseline=str(first.get("baseline", "?")),
                candidate=str(first.get("candidate", "?")),
                workload=str(first.get("workload", "?")),
                gate=tuple(gate),
                records=tuple(records),
                forced=tuple(str(f) for f in data.get("forced") or []),
                syscalls=tuple(_breakdown(b) for b in data.get("syscalls") or []),
            )
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise BadInput(f"{where}: not regtrack ci JSON (missing or bad {exc})") from None


def _breakdown(data: Any) -> SyscallBreakdown:
    """One candidate's syscalls by name from the ci JSON, each number checked."""
    calls = tuple(
        SyscallChange(
            name=str(c["name"]),
            baseline_per_op=float(c["baseline_per_op"]),
            candidate_per_op=float(c["candidate_per_op"]),
        )
        for c in data["calls"]
    )
    return SyscallBreakdown(
        workload=str(data["workload"]),
        baseline=str(data["baseline"]),
        candidate=str(data["candidate"]),
        points=tuple(str(p) for p in data["points"]),
        calls=calls,
    )


@dataclass(frozen=True)
class CommentContext:
    """Where the verdict came from, for the comment's last line (all optional)."""

    comment_id: str = ""
    run_url: str | None = None  # the workflow run whose log and artifact hold the rest
    artifact: str | None = None  # the artifact with the HTML report and the database
    commit: str | None = None  # the pull request's head commit that was measured
    exit_code: int | None = None  # `regtrack ci`'s, when it wrote no verdict


def comment_body(verdict: CiVerdict | None, context: CommentContext) -> str:
    """The comment: the marker, the headline, the gating answers as a table, every point
    in a fold, and where the report is. ``verdict`` None: ci ended without one, and the
    comment says so (a stale green verdict must not stay on the pull request)."""
    head = [marker(context.comment_id)]
    if verdict is None:
        code = context.exit_code
        why = (
            "did not finish"
            if code is None
            else f"ended with exit {code} ({EXIT_MEANING.get(code, 'see its log')})"
        )
        head += [f"## regtrack: ⛔ No verdict: `regtrack ci` {why}", ""]
        return "\n".join([*head, "The job's log says why.", "", _footer(context)]) + "\n"
    head += [f"## regtrack: {markdown.inline(verdict.headline, HEADLINE)}", ""]
    head += [
        f"Candidate {markdown.code(verdict.candidate)} vs baseline "
        f"{markdown.code(verdict.baseline)} · workload {markdown.code(verdict.workload)} · "
        f"{verdict.repetitions} interleaved, seed-matched repetitions",
        "",
    ]
    if verdict.forced:
        forced = markdown.items(verdict.forced, "; ")
        head += [f"**FORCED comparison, not like with like: {forced}**", ""]
    head += _gate_table(verdict)
    head += _syscall_lines(verdict)
    tail = ["", _footer(context)]
    lines = [*head, *_details(verdict, MAX_BODY - markdown.length(head + tail)), *tail]
    if markdown.length(lines) > MAX_BODY:  # the rest alone is too long: its last lines give way
        lines = [*markdown.fit(head, MAX_BODY - markdown.length(tail), TRIMMED), *tail]
    return "\n".join(lines) + "\n"


def _gate_table(verdict: CiVerdict) -> list[str]:
    if not verdict.gate:
        return ["No gating metric was measured."]
    lines = [
        "| | gating metric | over | blocks | change [interval] and verdict | threshold |",
        "|---|---|---|---:|---|---:|",
    ]
    for a in verdict.gate:
        threshold = "-" if a.threshold_pct is None else f"±{a.threshold_pct:g}%"
        points = markdown.items(a.points, quote=markdown.cell) or "-"
        why = misses_moved(verdict.records, a) if a.metric == "cycles_per_op" else ""
        lines.append(
            f"| {VERDICT_ICON.get(a.verdict, '')} | {_metric(a.metric)} | {points} | "
            f"{a.n_blocks} | {change_text(a)}{f' ({why})' if why else ''} | {threshold} |"
        )
    return lines


def _syscall_lines(verdict: CiVerdict) -> list[str]:
    """Which syscalls moved per op, where the gate counted them by name."""
    lines = []
    for b in verdict.syscalls:
        if b.moved():
            moved = ", ".join(markdown.inline(syscall_breakdown.text(c)) for c in b.moved()[:5])
            lines.append(f"Syscalls per op by call ({markdown.code(b.candidate)}): {moved}")
    return ["", *lines] if lines else []


def _details(verdict: CiVerdict, room: int) -> list[str]:
    """Every metric at every point, folded; rows that would overrun GitHub's limit (``room``
    characters) are counted instead (the artifact has them all)."""
    if not verdict.records:
        return []
    counted = ["", f"{len(verdict.records)} records are in the artifact's JSON."]
    open_ = [
        "",
        f"<details><summary>Every metric and point ({len(verdict.records)} records)</summary>",
        "",
        f"| metric | point | {markdown.cell(verdict.baseline)} | "
        f"{markdown.cell(verdict.candidate)} | change [interval] and verdict | gates |",
        "|---|---|---:|---:|---|---|",
    ]
    close = ["", "</details>"]
    untrusted = any(not r.trusted for r in verdict.records)
    note = [f"\n{UNTRUSTED} no valid trial in this cell: do not trust its value."] * untrusted
    more = f"\n{len(verdict.records)} more records are in the artifact's JSON."
    # room kept for the count of the rest
    used = markdown.length(open_ + note + close) + len(more) + 1
    if used > room:
        return counted
    rows: list[str] = []
    for i, r in enumerate(verdict.records):
        row = _row(r)
        if used + len(row) + 1 > room:
            rows.append(f"\n{len(verdict.records) - i} more records are in the artifact's JSON.")
            break
        rows.append(row)
        used += len(row) + 1
    return [*open_, *rows, *note, *close]


def _row(r: PointComparison) -> str:
    mark = "" if r.trusted else f" {UNTRUSTED}"
    change = change_text(r)
    return (
        f"| {_metric(r.metric)}{f' ({markdown.cell(r.unit)})' if r.unit else ''} | "
        f"{markdown.cell(r.point)} | "
        f"{format_value(r.baseline_value, r.unit)}{mark} | "
        f"{format_value(r.candidate_value, r.unit)}{mark} | {change} | "
        f"{'yes' if r.gating else 'no'} |"
    )


def _metric(name: str) -> str:
    return METRIC_TITLE.get(name) or markdown.cell(name)


def _footer(context: CommentContext) -> str:
    parts = ["<sub>One comment, edited on every push"]
    if context.commit:
        parts.append(f"measured at {markdown.inline(context.commit[:12])}")
    if context.run_url:
        url = context.run_url
        link = len(url) <= FIELD and RUN_URL_RE.fullmatch(url)
        parts.append(f"[workflow run]({url})" if link else f"workflow run {markdown.code(url)}")
    if context.artifact:
        parts.append(f"HTML report and database: artifact {markdown.code(context.artifact)}")
    return " · ".join(parts) + "</sub>"
