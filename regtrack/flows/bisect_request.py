"""What `regtrack bisect` was asked, and the bisection it starts: its ends resolved, the
first-parent commits between them listed, all recorded so that --resume has them."""

from __future__ import annotations

import dataclasses

from regtrack.core.errors import BadInput
from regtrack.core.settings import load_settings
from regtrack.results import bisections
from regtrack.results.bisection_plan import BisectionPlan, BisectRequest, CommitFacts
from regtrack.results.store import Store
from regtrack.targets.sources import SourceRepo

Request = BisectRequest  # what the command line builds: the stored request itself


def start(request: Request, db: str | None) -> tuple[Store, int]:
    """Resolve the ends, list the first-parent commits between them, record the bisection."""
    repo = SourceRepo(request.options.source_repo)
    good, bad = repo.resolve(request.good), repo.resolve(request.bad)
    commits = [good.commit, *repo.first_parent(good.commit, bad.commit)]
    if len(commits) < 2 or commits[-1] != bad.commit:
        raise BadInput(
            f"--bad {request.bad} does not descend from --good {request.good} along the first "
            "parent: give an older good and a newer bad of one branch"
        )
    store = Store.open(db or load_settings().database)
    # Stored without the URL's credentials: every commit is in the cached mirror by now.
    options = dataclasses.replace(request.options, source_repo=repo.location)
    plan = BisectionPlan(
        request=dataclasses.replace(request, options=options),
        commits=tuple(commits),
        facts={c: CommitFacts(**repo.describe(c)) for c in commits},
        source_repo=repo.location,
    )
    return store, bisections.create(store, plan)
