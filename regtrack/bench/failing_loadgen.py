"""Stop a run whose load generator fails the same way on every version.

A ``--driver`` program with a bug (a wrong import, a missing argument) or a load generator
that cannot start fails each trial alike, whatever the version: every trial after the
first of each version only repeats the failure, and a driver's timeout can make that an
hour. A failure that differs between versions (a command one version lacks) is a finding,
and the run goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from regtrack.bench.plan import Visit
from regtrack.core.errors import CannotMeasure
from regtrack.core.records import InvalidReason
from regtrack.results.store import Store
from regtrack.results.stored_trials import StoredTrial


@dataclass
class SameFailure:
    """The trials seen so far: each version's load generator failures by their text,
    and whether any trial ended otherwise."""

    labels: frozenset[str]  # the versions of the run
    failures: dict[str, set[str]] = field(default_factory=dict)  # label -> failure texts
    other: bool = False  # a trial that did not end in a load generator failure

    def add(self, trial: StoredTrial) -> None:
        details = [r.detail for r in trial.reasons if r.code == InvalidReason.LOADGEN_FAILED]
        if trial.valid or not details:
            self.other = True
            return
        self.failures.setdefault(trial.target, set()).update(details)

    def why(self) -> str | None:
        """The one failure every version had in every trial so far (None: go on)."""
        if self.other or set(self.failures) != self.labels:
            return None
        texts = set().union(*self.failures.values())
        return texts.pop() if len(texts) == 1 else None


def check(watch: SameFailure, store: Store, run_id: int, visit: Visit) -> None:
    """After ``visit``: raise CannotMeasure once every version's trials failed alike (the
    store is read only while nothing but such failures were seen)."""
    if watch.other:
        return
    seqs = {t.seq for t in visit.trials}
    for trial in store.trials(run_id):
        if trial.seq in seqs:
            watch.add(trial)
    if (why := watch.why()) is not None:
        raise CannotMeasure(
            f"the load generator failed the same way on every version, so no trial can be "
            f"measured: {why}. Fix it and start a new run (run {run_id} keeps the failed "
            "trials)"
        )
