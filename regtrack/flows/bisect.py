"""`regtrack bisect`: where a metric got worse, measuring as few commits as it can.

The ends are measured first, together, until the verdict machinery of `ci` decides that
bad is worse than good by the threshold (or that it is not: nothing to bisect). Each step
then builds one first-parent commit (cached) and measures it until its position against a
cut (half of the change of the interval searched) is decided, or, once its budget is
spent, its point estimate places it (analysis/bisection.py: never skipped for want of a
verdict, so steps smaller than the threshold still halve the range). With instructions per
op (or simulated cycles per op: as deterministic) and fixed seeds a step is the commit
measured alone, with the ends' run's seeds, and compared with it seed by seed (the ends'
run measures more seeds with a step that needs more than it has); throughput drifts
between runs, so a throughput step measures good, the commit and bad side by side. A
commit that does not build is skipped like `git bisect skip`. Each step found is measured
once more as parent and child side by side: its change with the interval, and the
functions that moved (explain).

Every measurement is an ordinary run (its config names the bisection); the search's own
log is in the store (results.bisections), and --resume replays it without measuring again.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from regtrack.analysis import bisection, comparison, run_shift
from regtrack.analysis.bisect_records import BisectLogEntry
from regtrack.analysis.records import ChangeSummary, PooledComparison
from regtrack.bench.job import Job, parse_duration
from regtrack.bench.measuring import Measuring
from regtrack.bench.prepare import prepare_job
from regtrack.bench.runner import BlockRule
from regtrack.core import environment
from regtrack.core.errors import BadInput
from regtrack.core.records import Progress
from regtrack.core.settings import Thresholds
from regtrack.flows import orchestrate
from regtrack.plan.records import BisectionRole, RunPurpose
from regtrack.results import bisections, comparability, loaded
from regtrack.results.store import Store
from regtrack.targets.build import MakeFailed
from regtrack.targets.sources import is_commit
from regtrack.targets.versions import SHORT_SHA, VersionSpec

METRIC_COLUMN = {
    "instructions": "instructions_per_op",
    "cycles": "cycles_per_op",
    "throughput": "throughput",
}
# Counted, not timed: repeatable between runs, so a step is measured alone (see above).
COUNTED = frozenset({"instructions", "cycles"})


@dataclass
class Hooks:
    """How the command line hears about progress; bisect itself never prints. A change it
    reports reads as the bisection's log shows it (``change_text``: output.bisect_text)."""

    say: orchestrate.Say
    progress: Callable[[], AbstractContextManager[Progress]]
    change_text: Callable[[ChangeSummary | None], str]
    phase: Callable[[str], None] = lambda text: None


class NothingToBisect(BadInput):
    """Bad is not worse than good by the threshold (exit 2, with what was measured)."""


def short(commit: str) -> str:
    return commit[:SHORT_SHA]


class Bisector:
    """One bisection: measures commits on demand and remembers every answer in the store."""

    def __init__(
        self,
        store: Store,
        bisection_id: int,
        hooks: Hooks,
        db: str | None,
        wait: bool,
        measuring: Measuring,
    ):
        stored = bisections.get(store, bisection_id)
        self.request = stored.config.request
        self.commits = stored.config.commits
        if not all(is_commit(c) for c in self.commits):  # never handed to git as options
            raise BadInput(
                f"bisection {bisection_id}'s stored commits are not all full commit ids: the "
                "database was changed by something other than regtrack; start a new bisection"
            )
        self.store, self.id, self.hooks, self.db, self.wait = store, bisection_id, hooks, db, wait
        self.measuring = measuring  # how its runs measure (bench/measuring.py)
        self.thresholds = Thresholds().uniform(self.request.threshold)
        self.column = METRIC_COLUMN[self.request.metric]
        self.run_of: dict[str, int] = {}  # commit -> the search's run that measured it
        self.unbuilt: set[str] = set()
        self.alike: set[tuple[int, int]] = set()  # (base run, candidate run) checked alike
        self.placed: set[tuple[str, float]] = set()  # (commit, cut) logged already
        self.ends_pct = 0.0  # bad against good, once measured (ends)
        self.warned_seeds = False  # said once per bisection, at its first run
        self.confirmed: dict[tuple[str, str], int] = {}
        for entry in map(BisectLogEntry.from_json, stored.log):  # a resumed bisection
            if entry.confirm_run_id and entry.parent:
                self.confirmed[(entry.parent, entry.commit)] = entry.confirm_run_id
            elif entry.run_id:
                self.run_of[entry.commit] = entry.run_id
            if entry.judged == bisection.SKIPPED:
                self.unbuilt.add(entry.commit)
            if entry.cut is not None:
                self.placed.add((entry.commit, entry.cut))

    @property
    def good(self) -> str:
        return self.commits[0]

    @property
    def bad(self) -> str:
        return self.commits[-1]

    def log(self, **entry: Any) -> None:
        bisections.log_step(self.store, self.id, BisectLogEntry(**entry).to_json())

    def measure(
        self, commits: list[str], undecided: Callable[[int], bool], role: str, reuse: bool = True
    ) -> int:
        """One run of ``commits`` (short-SHA labels), adding blocks while ``undecided``;
        ``reuse``: a complete run that measured them alike answers instead."""
        specs = [VersionSpec(short(c), "git", c, c) for c in commits]
        options = self.request.options
        if role != "ends":  # the ends' seeds: a step pairs with the ends' run seed by seed
            options = dataclasses.replace(options, seed_offset=self._ends_offset())
        job = prepare_job(specs, options, self.hooks.phase)
        if job.seed_problem and not self.warned_seeds:
            self.warned_seeds = True
            self.hooks.say(
                f"warning: hash seeds are not controlled ({job.seed_problem}): each step "
                "is compared with the ends' run without seed pairs, so a step smaller than "
                "the 2-4% processes differ by may stay undecided (docs/methodology.md, Seeds)"
            )
        reused = self._reusable(job, role) if reuse else None
        if reused is not None:
            self.hooks.say(f"bisect: run {reused} measured {', '.join(map(short, commits))} alike")
            return reused
        cap = self.request.max_repetitions
        if role == "step" and self.request.metric in COUNTED:
            # Seed pairs only for the ends' repetitions (_grow_with_ends adds more).
            cap = min(cap, self._repetitions(self.run_of[self.bad]))
        modes = job.modes
        rule = BlockRule(
            needed=lambda st, rid: modes if undecided(rid) else (),
            budget_s=parse_duration(self.request.budget, "--budget"),
            max_repetitions=max(cap, job.settings.repetitions),
        )
        purpose = RunPurpose("sequential", bisection=BisectionRole(self.id, role))
        _, run_id, status = orchestrate.measure(
            job, self.measuring, self.db, self.hooks.say, self.hooks.progress, wait=self.wait,
            sequential=rule, purpose=purpose,
        )  # fmt: skip
        orchestrate.fail_if_incomplete(self.store, run_id, status)
        return run_id

    def _ends_offset(self) -> int:
        """The seed offset of the ends' run (bench/seeds.py)."""
        return loaded.stored_run(self.store, self.run_of[self.bad]).seed_offset

    def _reusable(self, job: Job, role: str) -> int | None:
        """A complete run of a bisection in this database that measured these very commits
        in this role, alike (comparability key, metric, points): measuring them again would
        only repeat it (a re-bisection, or --all-steps after a plain one)."""
        loadgen = job.loadgen.as_dict()
        here = comparability.key(job.config(), environment.capture(job.cpus, loadgen), loadgen)
        commits = [t.commit for t in job.targets]
        points = tuple(p.label for p in job.points)
        for run in loaded.stored_runs(self.store).values():
            if (
                run.status == "complete"
                and run.bisection is not None
                and run.bisection.role == role
                and [t.commit for t in run.targets] == commits
                and (run.metric, run.points) == (job.metric, points)
                and (role == "ends" or run.seed_offset == job.settings.seed_offset)
                and not comparability.differences(run.key, here)
            ):
                return run.id
        return None

    def change(self, base: str, cand: str, cand_run: int | None = None) -> PooledComparison | None:
        """The pooled change of ``cand`` against ``base`` on the bisected metric: within
        ``cand``'s run when ``base`` was measured in it too, else seed by seed across runs."""
        crun = cand_run if cand_run is not None else self.run_of[cand]
        labels = {t["label"] for t in self.store.targets(crun)}
        if short(base) in labels:
            result = comparison.compare(loaded.run(self.store, crun), short(base), self.thresholds)
        else:
            brun = self.run_of[base]
            self._check_alike(brun, crun)
            result = comparison.compare_runs(
                loaded.run(self.store, brun),
                short(base),
                loaded.run(self.store, crun),
                short(cand),
                loaded.alike(self.store, crun),
                self.thresholds,
            )
        for record in result.pooled:
            if record.metric == self.column and record.candidate == short(cand):
                return record
        return None

    def _check_alike(self, base_run: int, cand_run: int) -> None:
        """Runs compared across (a step with the ends' run) must have been measured alike:
        a resumed bisection after a valgrind or compiler upgrade would compare counts the
        tools moved, without a word."""
        if (base_run, cand_run) in self.alike:
            return
        base, cand = (loaded.stored_run(self.store, r).key for r in (base_run, cand_run))
        diffs = comparability.differences(base, cand)
        if diffs:
            raise BadInput(
                f"run {cand_run} of bisection {self.id} was not measured like its run "
                f"{base_run} ({'; '.join(diffs)}): its commits cannot be compared; start a "
                "new bisection"
            )
        self.alike.add((base_run, cand_run))

    def verdict(self, base: str, cand: str, cand_run: int | None = None) -> str:
        record = self.change(base, cand, cand_run)
        return record.verdict if record else "inconclusive"

    def ends(self) -> PooledComparison:
        """Measure good and bad together; refuse when bad is not worse by the threshold."""
        if self.bad not in self.run_of:
            self.hooks.say(f"bisect: measuring the ends {short(self.good)}, {short(self.bad)}")
            run_id = self.measure(
                [self.good, self.bad],
                lambda rid: self.verdict(self.good, self.bad, rid) == "inconclusive",
                "ends",
            )
            for commit in (self.good, self.bad):
                self.run_of[commit] = run_id
                self.log(commit=commit, run_id=run_id, role="end")
        record = self.change(self.good, self.bad)
        self.ends_pct = _number(record.change_pct if record else None, 0.0)
        if record is None or record.verdict != "regression":
            ends = record.summary().to_json() if record else None
            bisections.finish(self.store, self.id, "refused", {"ends": ends})
            measured = self.hooks.change_text(summary(record))
            raise NothingToBisect(
                f"bad ({self.request.bad}) is not worse than good ({self.request.good}) by "
                f"{self.request.threshold:g}% in {self.column}: measured {measured}; "
                "nothing to bisect (another --threshold, --point or --metric?)"
            )
        return record

    def _changes(self, commit: str, run_id: int) -> tuple[bisection.Change, bisection.Change]:
        """The commit's change against good and against bad, as measured by ``run_id``."""
        out = []
        for end in (self.good, self.bad):
            record = self.change(end, commit, run_id)
            out.append(
                bisection.Change(
                    _number(record.change_pct if record else None, 0.0),
                    _number(record.ci_low_pct if record else None, -100.0),
                    _number(record.ci_high_pct if record else None, math.inf),
                )
            )
        return out[0], out[1]

    def _placement(self, commit: str, run_id: int, cut: float) -> bisection.Placement:
        return bisection.placement(*self._changes(commit, run_id), cut, self.ends_pct)

    def place(self, index: int, cut: float) -> bisection.Placement | None:
        """Measure one commit until its position against ``cut`` is decided (or the budget
        is spent: its point estimate places it); None when it does not build. A commit
        measured already is placed from its run."""
        commit = self.commits[index]
        if commit in self.unbuilt:
            return None
        run_id = self.run_of.get(commit)
        if run_id is None:
            try:
                run_id = self._measure_step(commit, cut)
            except MakeFailed as exc:
                if exc.passing:  # the machine's trouble: stop here, --resume builds it again
                    raise
                self.log(commit=commit, judged=bisection.SKIPPED, reason=f"does not build: {exc}")
                self.hooks.say(f"bisect: skipped {short(commit)}: it does not build")
                self.unbuilt.add(commit)
                return None
            self.run_of[commit] = run_id
        placed = self._placement(commit, run_id, cut)
        if (commit, cut) not in self.placed:  # a resumed search replays without a new line
            self.placed.add((commit, cut))
            record = self.change(self.good, commit, run_id)
            side = "above" if placed.above else "below"
            how = "decided" if placed.decided else "by its estimate: undecided"
            vs_good = summary(record)
            self.log(
                commit=commit,
                run_id=run_id,
                judged=f"{side} the cut",
                cut=cut,
                share=placed.share,
                decided=placed.decided,
                vs_good=vs_good,
            )
            self.hooks.say(
                f"bisect: {short(commit)} is {100 * placed.share:.0f}% of the way to bad, "
                f"{side} the cut at {100 * cut:.0f}% ({how}): "
                f"{self.hooks.change_text(vs_good)} vs good"
            )
        return placed

    def _measure_step(self, commit: str, cut: float) -> int:
        """The commit alone (instructions, cycles), or between good and bad again
        (throughput), until its position against ``cut`` is decided."""
        started = time.monotonic()
        counted = self.request.metric in COUNTED
        together = [commit] if counted else [self.good, commit, self.bad]
        run_id = self.measure(
            together, lambda rid: not self._placement(commit, rid, cut).decided, "step"
        )
        if counted:
            self._grow_with_ends(commit, run_id, cut, started)
        return run_id

    def _grow_with_ends(self, commit: str, run_id: int, cut: float, started: float) -> None:
        """An instruction step pairs only with the repetitions the ends' run has: while it
        is undecided at their number, the ends' run and the step's grow together by a block
        (the next seeds of the offset they share), within the step's budget and
        --max-repetitions, so a step is decided by more seeds rather than by its estimate."""
        budget = parse_duration(self.request.budget, "--budget")
        ends = self.run_of[self.bad]
        # Two runs' shifts stay in the interval however many seeds are added.
        shift = run_shift.for_runs(loaded.alike(self.store, run_id), (self.column,))[self.column]
        floor_sd = math.sqrt(shift.of_difference().variance)
        while not (placed := self._placement(commit, run_id, cut)).decided:
            have = self._repetitions(run_id)
            elapsed = time.monotonic() - started
            # Two more repetitions of both: the step's two trials and the ends' four.
            block_s = 3 * 2 * elapsed / have
            blocks = int(max(0.0, budget - elapsed) // block_s)
            reach = min(self.request.max_repetitions, have + 2 * blocks)
            if (
                have < self._repetitions(ends)  # it stopped short of them: its budget
                or reach <= have
                or not placed.may_decide(have, reach, floor_sd)  # near the cut: by estimate
            ):
                return
            more = have + 2
            self.hooks.say(
                f"bisect: {short(commit)} needs more seed pairs than the ends' run has: "
                f"both measure repetitions {have + 1} and {more}"
            )
            for rid in (ends, run_id):
                status = orchestrate.extend(
                    self.store, rid, more, self.measuring, self.hooks.say, self.hooks.progress,
                    self.wait,
                )  # fmt: skip
                orchestrate.fail_if_incomplete(self.store, rid, status)

    def _repetitions(self, run_id: int) -> int:
        return loaded.stored_run(self.store, run_id).repetitions


def _number(value: Any, missing: float) -> float:
    """A stored number, or ``missing`` where the record has none (JSON null, NaN)."""
    return float(value) if value is not None and math.isfinite(float(value)) else missing


def summary(record: PooledComparison | None) -> ChangeSummary | None:
    """A pooled record's numbers, as a bisection stores them."""
    return record.summary() if record else None
