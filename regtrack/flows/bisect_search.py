"""The whole search of one bisection, resumable: its ends, the changes found by position
(analysis/bisection.py), each step measured side by side with its parent, the answer
stored with the bisection."""

from __future__ import annotations

from dataclasses import dataclass

from regtrack.analysis import attribution, bisection, comparison
from regtrack.analysis.bisect_records import Attribution, BisectAnswer, BisectStep
from regtrack.analysis.records import ChangeSummary
from regtrack.core.errors import Interrupted
from regtrack.flows.bisect import COUNTED, Bisector, NothingToBisect, short, summary
from regtrack.results import bisections, loaded


def run(bisector: Bisector) -> BisectAnswer:
    """The whole search (resumable): ends, the changes found, each step measured side by
    side with its parent."""
    try:
        ends = bisector.ends()
        commits, n = bisector.commits, len(bisector.commits)
        search = bisection.locate(n, bisector.place, bisector.request.all_steps)
        steps = []
        for f in search.found:
            confirmed = Confirmation()
            if f.kind == "step" and f.first_bad == f.last_good + 1:
                confirmed = confirm(bisector, commits[f.last_good], commits[f.first_bad])
            step = BisectStep(
                kind=f.kind,
                last_good=commits[f.last_good],
                first_bad=commits[f.first_bad],
                between=tuple(commits[f.last_good + 1 : f.first_bad]),
                share=f.jump,
                interval=(commits[f.interval[0]], commits[f.interval[1]]),
                interval_share=f.change,
                run_id=confirmed.run_id,
                parent_run_id=confirmed.parent_run_id,
                change=confirmed.change,
                explain=confirmed.explain,
            )
            steps.append(step)
    except NothingToBisect:
        raise
    except BaseException as exc:  # the log so far stays; --resume continues from it
        status = "interrupted" if isinstance(exc, Interrupted | KeyboardInterrupt) else "failed"
        bisections.finish(bisector.store, bisector.id, status)
        raise
    answer = BisectAnswer(
        ends=ends.summary(),
        steps=tuple(steps),
        shares={commits[i]: share for i, share in sorted(search.shares.items())},
        carried=bisection.covered(search.found),
        more_may_be_left=bisection.covered(search.found) < 1 - bisection.MIN_SHARE,
        by_estimate=tuple(commits[i] for i in sorted(search.by_estimate)),
        skipped=tuple(commits[i] for i in sorted(search.skipped)),
        measured_commits=tuple(c for c in commits if c in bisector.run_of),
        # What the servers ran with (every run of a bisection runs with the same settings).
        server=comparison.server_facts(
            loaded.stored_run(bisector.store, bisector.run_of[bisector.bad])
        ),
    )
    bisections.finish(bisector.store, bisector.id, "done", answer.to_json())
    return answer


@dataclass(frozen=True)
class Confirmation:
    """A step of neighbours measured against its parent: the run of the two (the parent's
    own where instruction counts are compared across runs), the change and the functions
    that moved; empty for a step that is not confirmed."""

    run_id: int | None = None
    parent_run_id: int | None = None
    change: ChangeSummary | None = None
    explain: list[Attribution] | None = None


def confirm(bisector: Bisector, parent: str, child: str) -> Confirmation:
    """A step's change against its parent, with the functions that moved (explain).

    Instructions (or simulated cycles) per op: from the search's own runs of the two
    commits, seed by seed (counts do not drift between runs). Throughput: the two measured
    again side by side, since throughput measured in different runs is not comparable."""
    if bisector.request.metric in COUNTED:
        parent_run, run_id = bisector.run_of[parent], bisector.run_of[child]
    else:
        run_id = bisector.confirmed.get((parent, child))
        if run_id is None:
            bisector.hooks.say(f"bisect: measuring {short(parent)} and {short(child)} together")
            run_id = bisector.measure(
                [parent, child],
                lambda rid: bisector.verdict(parent, child, rid) == "inconclusive",
                "confirm",
            )
        parent_run = run_id
    explain: list[Attribution] = []
    if bisector.request.metric in COUNTED:
        point = bisector.request.options.pipelines
        costs = loaded.costs(bisector.store, run_id)
        explain = attribution.attribute(
            costs,
            short(parent),
            short(child),
            f"pipeline={point[0]}" if point and len(point) == 1 else None,
            15,
            baseline_run=costs
            if parent_run == run_id
            else loaded.costs(bisector.store, parent_run),
            metric=bisector.request.metric,
        )
    record = bisector.change(parent, child, run_id if parent_run == run_id else None)
    if (parent, child) not in bisector.confirmed:
        bisector.confirmed[(parent, child)] = run_id
        bisector.log(commit=child, parent=parent, confirm_run_id=run_id, change=summary(record))
    return Confirmation(run_id, parent_run, summary(record), explain)
