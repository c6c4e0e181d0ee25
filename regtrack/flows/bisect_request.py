"""What `regtrack bisect` was asked, and the bisection it starts: its ends resolved, the
first-parent commits between them listed, all recorded so that --resume has them."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from regtrack.core.errors import BadInput
from regtrack.core.options import Options
from regtrack.core.settings import load_settings
from regtrack.results import bisections
from regtrack.results.store import Store
from regtrack.targets.sources import SourceRepo


@dataclass
class Request:
    """What `regtrack bisect` was asked; stored with the bisection, so --resume has it."""

    good: str
    bad: str
    metric: str  # instructions | throughput
    threshold: float
    all_steps: bool
    budget: str  # per measurement (the ends, each step)
    max_repetitions: int
    options: Options


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
    config = {
        # Stored without the URL's credentials: every commit is in the cached mirror by now.
        "request": {
            **dataclasses.asdict(request),
            "options": {**dataclasses.asdict(request.options), "source_repo": repo.location},
        },
        "commits": commits,
        "facts": {c: repo.describe(c) for c in commits},
        "source_repo": repo.location,
    }
    return store, bisections.create(store, config)


def request_of(config: Mapping[str, Any]) -> Request:
    """The request a stored bisection was started with (for --resume)."""
    asked = dict(config["request"])
    asked["options"] = Options(**asked["options"])
    return Request(**asked)
