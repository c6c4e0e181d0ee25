"""What a bisection was asked and the commits it searches: the plan `regtrack bisect` stores
when it starts (flows/bisect_request.py) and reads back to resume, show and report it.

Typed and frozen, with the JSON it has always been stored as (``to_json``) and a reader of
every shape a regtrack stored (``from_json``): what a regtrack stored is written back byte
for byte (keys it never wrote are ignored), and a document of another shape is a pydantic
ValidationError (results/bisections.py makes it one line).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

import pydantic

from regtrack.core.options import Options

OPTION_NAMES = tuple(f.name for f in dataclasses.fields(Options))


@dataclass(frozen=True)
class CommitFacts:
    """A commit's date, subject and author (SourceRepo.describe); None: not stored."""

    commit_date: str | None = None
    subject: str | None = None
    author: str | None = None

    def to_json(self) -> dict[str, str]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclass(frozen=True)
class BisectRequest:
    """What `regtrack bisect` was asked; stored with the bisection, so --resume has it."""

    good: str
    bad: str
    metric: str  # instructions | throughput
    threshold: float
    all_steps: bool
    budget: str  # per measurement (the ends, each step)
    max_repetitions: int
    options: Options
    # The options' names as stored, in order: an older regtrack's Options had fewer fields
    # (the rest read as their defaults), and its bisection is written back as it stored it.
    stored_options: tuple[str, ...] = OPTION_NAMES

    def to_json(self) -> dict[str, Any]:
        asked = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        options = dataclasses.asdict(self.options)
        asked["options"] = {name: options[name] for name in self.stored_options}
        del asked["stored_options"]
        return asked


@dataclass(frozen=True)
class BisectionPlan:
    """A bisection's request, the first-parent commits good..bad (good first, bad last), each
    commit's facts, and the source repository they came from (None: not stored)."""

    request: BisectRequest
    commits: tuple[str, ...]
    facts: Mapping[str, CommitFacts] = field(default_factory=dict)
    source_repo: str | None = None

    def facts_of(self, commit: str) -> CommitFacts:
        """The commit's facts; none known: every fact None."""
        return self.facts.get(commit, CommitFacts())

    def to_json(self) -> dict[str, Any]:
        """The stored document (``bisect --json`` shows it as it is)."""
        doc: dict[str, Any] = {
            "request": self.request.to_json(),
            "commits": list(self.commits),
            "facts": {commit: facts.to_json() for commit, facts in self.facts.items()},
        }
        if self.source_repo is not None:
            doc["source_repo"] = self.source_repo
        return doc

    @classmethod
    def from_json(cls, data: Any) -> Self:
        """The plan a regtrack stored (pydantic.ValidationError: not of a stored shape)."""
        doc = _Plan.model_validate(data)
        asked = doc.request
        return cls(
            request=BisectRequest(
                **asked.model_dump(exclude={"options"}),
                options=_options(asked.options),
                stored_options=tuple(k for k in asked.options if k in OPTION_NAMES),
            ),
            commits=tuple(doc.commits),
            facts={c: CommitFacts(**f.model_dump()) for c, f in doc.facts.items()},
            source_repo=doc.source_repo,
        )


class _Facts(pydantic.BaseModel, strict=True, extra="ignore"):
    commit_date: str | None = None
    subject: str | None = None
    author: str | None = None


class _Request(pydantic.BaseModel, strict=True, extra="ignore"):
    good: str
    bad: str
    metric: str
    threshold: float
    all_steps: bool
    budget: str
    max_repetitions: int
    options: dict[str, Any]


class _Plan(pydantic.BaseModel, strict=True, extra="ignore"):
    """The stored document, each key a regtrack wrote with its type."""

    request: _Request
    commits: list[str]
    facts: dict[str, _Facts]
    source_repo: str | None = None


@functools.cache
def _options_adapter() -> pydantic.TypeAdapter[Options]:
    return pydantic.TypeAdapter(Options)  # built on first use: importing stays cheap


def _options(stored: Mapping[str, Any]) -> Options:
    """The stored options, each of its field's type (an older one's missing: its default)."""
    return _options_adapter().validate_python({k: stored[k] for k in OPTION_NAMES if k in stored})
