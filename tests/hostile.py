"""Records whose every text field holds text an attacker chose: a pull request's workload,
labels, points, server settings and commit subjects, or what a crafted database stored.

``Names`` holds one text per field; each builder makes the record output reads from it
(analysis, results and core records, as tests/answers.py does), so one record can be
rendered with hostile names and again with ``Names.clean()`` and the two compared.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd
from hypothesis import strategies as st

from regtrack.analysis.bisect_records import Attribution
from regtrack.analysis.commands import CommandShare
from regtrack.analysis.commit_history import CommitStep
from regtrack.analysis.records import (
    ComparisonResult,
    Disagreement,
    GateContext,
    ServerFacts,
)
from regtrack.analysis.report_data import RunPage, RunSummary
from regtrack.analysis.run_shift import RunShift
from regtrack.core.checkup import Check, Checkup, Status
from regtrack.core.records import InvalidReason, TrialReason, TrialRecord
from regtrack.core.settings import Thresholds
from regtrack.plan.records import ServerData
from regtrack.results.records import LoadedRun, RunTarget, StoredBisection, StoredRun
from regtrack.results.run_row import HostFacts, LoadgenFacts
from regtrack.results.shard_union import Missing, PlanMerge
from regtrack.targets.target import BuildFacts
from tests import answers

# What breaks out of a code span, renders in Markdown or on GitHub, drives a terminal,
# is rich markup, or is HTML; hypothesis strings are made of these and of anything else.
SNIPPETS = [
    "`", "``", "```", "@octocat", "a@b.example", "[l](https://e.example)",
    "![i](https://e.example/i.png)", "[r]: https://e.example", "<script>alert(1)</script>",
    "</script>", "<img src=x onerror=alert(1)>", "</textarea>", "<!--", "-->", "|", "\\",
    "*", "**", "_", "~", "~~", "$x$", "#1", "GH-1", ":smile:", "www.e.example",
    "https://e.example", "&amp;", "&lt;", "&#60;", "\n", "\r\n", "\t", "\x00", "\x07",
    "\x1b]0;title\x07", "\x1b]8;;https://e.example\x1b\\link\x1b]8;;\x1b\\", "\x1b[2J",
    "\x1b[31m", "\x9b31m", "\x85", "\x7f", "\u202e", "\u2028", "\ufeff", "[bold red]",
    "[/]", "[link=https://e.example]", '"', "'", " ", "- ", "# ", "> ", "1. ", "---",
    "%{x}", "{{ x }}", "{% x %}", "[!NOTE]", "é", "😀",
]  # fmt: skip
# A character for each snippet (private use), ASCII, C1 controls and one of each other
# kind (no-break space, letters beyond ASCII, an emoji, bidi override, line and paragraph
# separators, byte-order mark, full-width '@' and '<', a combining mark): hypothesis draws
# a text of these in one step, where a list of snippets took a draw each (2,000 examples
# of nine names: 1.5 s instead of 4 s).
MARKS = {chr(0xE000 + i): snippet for i, snippet in enumerate(SNIPPETS)}
ALPHABET = (
    "".join(MARKS) + "".join(map(chr, range(0x80))) + "".join(map(chr, range(0x80, 0xA0)))
    + "\u00a0é中😀\u202e\u2028\u2029\ufeff＠＜\u0301"
)  # fmt: skip
hostile = st.text(ALPHABET, min_size=1, max_size=6).map(
    lambda text: "".join(MARKS.get(c, c) for c in text)
)


@dataclass(frozen=True)
class Names:
    """One text for each field a pull request or a crafted database chooses."""

    workload: str
    baseline: str
    candidate: str
    point: str
    key: str  # a server setting's name
    value: str  # its value
    subject: str  # a commit's subject
    reason: str  # why a trial is invalid, why a point does not gate, a forced difference
    host: str  # a shard's host, the machine's CPU model

    @classmethod
    def clean(cls) -> Names:
        """Plain words in every field: what a render of hostile names must be shaped like."""
        return cls(*(f"n{i}" for i in range(len(dataclasses.fields(cls)))))

    def texts(self) -> tuple[str, ...]:
        return dataclasses.astuple(self)


FIELDS = len(dataclasses.fields(Names))
names = st.lists(hostile, min_size=FIELDS, max_size=FIELDS, unique=True).map(lambda t: Names(*t))
# pandas 3's string columns match no value holding NUL (a workload "\x00" loses its chart
# on a run page), which is not what the pages' tests are about: their names hold none.
page_names = (
    st.lists(hostile.map(lambda t: t.replace("\x00", "\x01")), min_size=FIELDS,
             max_size=FIELDS, unique=True)
    .map(lambda t: Names(*t))
)  # fmt: skip
THRESHOLDS = Thresholds()


def comparison(n: Names) -> ComparisonResult:
    """A run of ``n.baseline`` and ``n.candidate`` at ``n.point`` of ``n.workload``: the
    candidate's cell untrusted for ``n.reason``, a point excluded from the gate, servers
    with ``n.key = n.value``, merged from ``n.host``, forced, with a shift and a
    disagreement: every text field of a comparison shown somewhere."""
    cells = pd.DataFrame(
        [
            {"workload": n.workload, "point": n.point, "point_order": 10, "target": target,
             "metric": "throughput", "value": value, "trusted": trusted, "problems": problems,
             "server_busy_pct": 99.0, "spread_pct": None}
            for target, value, trusted, problems in (
                (n.baseline, 400_000.0, True, ()),
                (n.candidate, 368_000.0, False, (n.reason,)),
            )
        ]
    )  # fmt: skip
    named = {"workload": n.workload, "baseline": n.baseline, "candidate": n.candidate}
    pooled = answers.pooled(points=(n.point,), excluded={n.point: n.reason}, **named)
    point = answers.point(point=n.point, trusted=False, problems=(n.reason,), **named)
    return ComparisonResult(
        baseline=n.baseline,
        targets=(n.baseline, n.candidate),
        metrics=("throughput",),
        cells=cells,
        comparisons=(point,),
        pooled=(pooled,),
        method="t",
        alpha=0.05,
        thresholds=THRESHOLDS,
        run_id=2,
        baseline_run_id=1,
        hosts=(n.host, "h2"),
        server=ServerFacts(
            server_config={n.key: n.value, "appendonly": "yes"},
            server_without={n.candidate: [n.key]},
            server_data={"persistent": True, "filesystem": n.value, "mount": n.host},
        ),
        run_shifts={"throughput": RunShift("throughput", 5.0, math.inf, n.reason)},
        forced=(n.reason,),
        disagreements=(
            Disagreement(
                workload=n.workload,
                point=n.point,
                candidate=n.candidate,
                throughput_change_pct=5.0,
                instructions_change_pct=-4.0,
                syscalls_change_pct=None,
            ),
        ),
    )


def context(n: Names) -> GateContext:
    environment = {
        "cpu_model": n.host,
        "cpu_count": 4,
        "kernel": n.value,
        "loadgen_version": n.subject,
        "server_cpus": "2",
        "client_cpus": "3",
    }
    return GateContext(
        repetitions=4,
        baseline=n.baseline,
        candidate=n.candidate,
        workload=n.workload,
        stopped="decided",
        seeds=n.reason,
        environment=environment,
        forced=(n.reason,),
    )


def attribution(n: Names) -> Attribution:
    """An explain table of ``n.candidate`` against ``n.baseline``; its function is named
    ``n.subject`` (a profile of the pull request's binary names its functions)."""
    function = {
        "function": n.subject,
        "baseline_per_op": 50.0,
        "candidate_per_op": 155.0,
        "diff_per_op": 105.0,
        "share_pct": 100.0,
    }
    return {
        **answers.EXPLAIN,
        "workload": n.workload,
        "point": n.point,  # type: ignore[typeddict-item]
        "baseline": n.baseline,
        "candidate": n.candidate,
        "functions": [function],
    }


def versions(n: Names) -> list[dict[str, str]]:
    """`regtrack versions` rows: how each spec resolved."""
    return [
        {"label": label, "kind": "git", "ref": n.key, "commit": n.value, "version": n.host,
         "date": "", "path": n.workload, "subject": n.subject, "source_repo": n.point}
        for label in (n.baseline, n.candidate)
    ]  # fmt: skip


def bisection(n: Names) -> StoredBisection:
    """answers.BISECTION with every stored text hostile: the request, the commits, their
    facts, a skip's reason, the explain table and the servers."""
    good, mid, bad = n.baseline, n.point, n.candidate
    stored: dict[str, Any] = {**answers.BISECTION}
    stored["config"] = {
        "request": answers.request(good=n.key, bad=n.value, metric=n.workload),
        "commits": [good, mid, bad],
        "facts": {mid: {"subject": n.subject, "author": n.host, "commit_date": n.reason}},
    }
    log = [dict(e) for e in answers.BISECTION["log"]]
    for entry, commit in zip(log, (good, bad, mid, mid, mid), strict=True):
        entry["commit"] = commit
    log[3]["reason"], log[4]["parent"] = n.reason, good
    stored["log"] = log
    result = dict(answers.BISECTION["result"])
    step = {
        **result["steps"][0],
        "last_good": good,
        "first_bad": mid,
        "interval": [good, bad],
        "explain": [attribution(n)],
        "between": [n.subject],
    }
    result.update(
        steps=[step],
        measured_commits=[good, mid, bad],
        shares={mid: 1.0},
        server_config={n.key: n.value},
        server_without={n.candidate: [n.key]},
    )
    stored["result"] = result
    return answers.stored_bisection(stored)


def history_rows(n: Names) -> pd.DataFrame:
    """Two runs of one series, as analysis.history.points gives them, a change marked."""
    rows = [
        {"run_id": run, "created_at": f"2025-01-0{run} 00:00:00", "fingerprint": "f",
         "comparability": "c0ffee", "server": n.value, "series": n.key, "source_repo": n.host,
         "label": n.candidate, "commit": f"{run}{n.value}", "subject": n.subject,
         "commit_date": "2025-01-01", "redis_version": n.reason, "workload": n.workload,
         "point": n.point, "point_order": 10, "metric": "throughput", "value": value,
         "min": value, "max": value, "n_valid": 2, "change_pct": change,
         "step_before": None, "step_after": None}
        for run, value, change in ((1, 400_000.0, None), (2, 360_000.0, -10.0))
    ]  # fmt: skip
    return pd.DataFrame(rows)


def by_commit(n: Names) -> tuple[pd.DataFrame, list[CommitStep]]:
    """The history along commits (analysis.commit_history.series) and its step."""
    rows = history_rows(n).assign(
        position=[0, 1], tick=[f"c1 {n.subject}", f"c2 {n.subject}"], vs_first_pct=[0.0, -10.0],
        step_pct=[None, -10.0], step_from=[None, f"1{n.value}"],
    )  # fmt: skip
    step = CommitStep(
        workload=n.workload,
        point=n.point,
        metric="throughput",
        source_repo=n.host,
        comparability="c0ffee",
        before=f"1{n.value}",
        after=f"2{n.value}",
        subject=n.subject,
        change_pct=-10.0,
    )
    return rows, [step]


def merged(n: Names) -> list[PlanMerge]:
    return [
        PlanMerge(
            plan_id=n.key,
            run_id=1,
            added=4,
            sources=[n.workload, n.host],
            missing=[Missing(2, 3, 1, 2)],
            planned=8,
            apart=[n.reason],
        )
    ]


def checkup(n: Names) -> Checkup:
    """doctor's checks, what they found naming another user's processes."""
    return Checkup(
        checks=(
            Check(n.key, Status.PROBLEM, n.value, n.reason),
            Check("busy", Status.WARNING, n.subject, n.host),
        ),
        server_cpus="2",
        client_cpus="3",
    )


def trial(n: Names) -> TrialRecord:
    record = TrialRecord(
        seq=1,
        repetition=0,
        target_label=n.candidate,
        workload=n.workload,
        point=n.point,
        params={},
        started_at="now",
        ops_per_sec=1000.0,
    )
    record.mark_invalid(InvalidReason.OTHER, n.reason)
    return record


def run_page(n: Names) -> RunPage:
    """A run page's data: the run with its versions, machine, load generator and an
    invalid trial, its comparison, an explain table and a command's share."""
    build = BuildFacts(flags=(f"CFLAGS={n.value}",), compiler=n.host)
    targets = tuple(
        RunTarget(label, f"{label}={n.key}", kind="git", commit=n.value, subject=n.subject,
                  redis_version=n.reason, build=build, image=n.host,
                  server_config={n.key: n.value})
        for label in (n.baseline, n.candidate)
    )  # fmt: skip
    run = StoredRun(
        id=2, targets=targets, created_at="2025-01-02", command=("regtrack", "run", n.subject),
        status="incomplete", status_detail=n.reason, workload=n.workload, seeds=n.value,
        environment=HostFacts(cpu_model=n.host), loadgen=LoadgenFacts(name=n.key),
        server={n.key: n.value},
        server_data=ServerData(dir=n.point, mount=n.host, filesystem=n.value, persistent=True),
    )  # fmt: skip
    trials = pd.DataFrame(
        [{"seq": 1, "repetition": 0, "target": n.candidate, "workload": n.workload,
          "point": n.point, "mode": "throughput", "ops_per_sec": 1.0, "valid": False,
          "reasons": (TrialReason(InvalidReason.OTHER, n.reason),), "seed": n.subject}]
    )  # fmt: skip
    result = comparison(n)
    summary = summarize(n)
    share = CommandShare(
        workload=n.workload,
        point=n.point,
        point_order=10,
        target=n.candidate,
        command=n.key,
        calls=10.0,
        share_pct=100.0,
        usec_per_call=1.0,
        failed_calls=0.0,
        trusted=False,
        client_p99_ms=None,
    )
    return RunPage(
        run=LoadedRun(run, trials),
        result=result,
        summary=summary,
        attribution=[attribution(n)],
        commands=[share],
    )


def summarize(n: Names) -> RunSummary:
    """The run's line of the index, as analysis.report_data.summarize makes it."""
    return RunSummary(
        id=2, created_at="2025-01-02", status="incomplete", status_detail=n.reason,
        versions=[{"label": label, "version": n.reason, "spec": f"{label}={n.key}"}
                  for label in (n.baseline, n.candidate)],
        workloads=[n.workload], n_trials=1, n_invalid=1, verdicts={n.subject: 1},
        forced=[n.reason], server=comparison(n).server,
    )  # fmt: skip
