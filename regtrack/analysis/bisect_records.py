"""A bisection's records as it stores them (results/bisections.py): its log entries, the
changes it found with their explain tables, its answer. Read back from JSON a database
may hold edited by hand, so every field is checked (pydantic) where it is read.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, NotRequired, Self, TypeVar

from typing_extensions import TypedDict  # pydantic checks it (typing's: Python 3.12+)

from regtrack.analysis.records import ChangeSummary, JsonRecord, ServerFacts
from regtrack.core.errors import BadInput

R = TypeVar("R", bound=JsonRecord)


@functools.cache
def _adapter(cls: type) -> Any:
    import pydantic

    return pydantic.TypeAdapter(cls)


def _checked(cls: type[R], data: Any) -> R:
    """A record of a bisection's stored JSON, every field checked against its type (JSON
    lists become tuples; unknown keys, from another regtrack, are left out): a database
    edited by hand is one line (BadInput), not a crash where a field is first used."""
    import pydantic

    from regtrack.core.settings import one_line

    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    try:
        if not isinstance(data, dict):
            raise TypeError(f"an object, not {type(data).__name__}")
        return _adapter(cls).validate_python({k: v for k, v in data.items() if k in names})
    except (pydantic.ValidationError, TypeError) as exc:
        why = one_line(exc) if isinstance(exc, pydantic.ValidationError) else str(exc)
        raise BadInput(
            f"a stored bisection's {cls.__name__} is not what regtrack writes ({why}): was "
            "the database edited? Start a new bisection"
        ) from None


class _Sparse(JsonRecord):
    """A record stored in a bisection's JSON: only the fields it has are written (an entry's
    kind is which fields it has), read back with every field checked."""

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in super().to_json().items() if v is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        return _checked(cls, data)


@dataclass(frozen=True, kw_only=True)
class BisectLogEntry(_Sparse):
    """One line of a bisection's log (flows/bisect.py): an end's run (``role`` "end"), a
    commit placed against a cut (``cut``, ``share``, ``vs_good``), one that does not build
    (``reason``), or a step confirmed against its parent (``parent``, ``confirm_run_id``)."""

    commit: str
    run_id: int | None = None
    role: str | None = None
    judged: str | None = None
    reason: str | None = None
    cut: float | None = None
    share: float | None = None
    decided: bool | None = None
    vs_good: ChangeSummary | None = None
    parent: str | None = None
    confirm_run_id: int | None = None
    change: ChangeSummary | None = None


class FunctionShare(TypedDict):
    """One function's row of an explain table (analysis/attribution.py)."""

    function: str
    baseline_per_op: float
    candidate_per_op: float
    diff_per_op: float
    share_pct: float | None  # None: the totals did not change
    # explain --metric cycles: how its misses per op moved (l1_misses, ll_misses,
    # branch_misses: candidate minus baseline)
    misses_diff_per_op: NotRequired[dict[str, float]]


class Attribution(TypedDict):
    """The explain table of one point: which functions' instructions per op moved."""

    point: str
    workload: str
    baseline: str
    candidate: str
    n_baseline: int
    n_candidate: int
    baseline_total: float
    candidate_total: float
    diff_total: float
    change_pct: float | None
    functions: list[FunctionShare]
    metric: NotRequired[str]  # instructions (absent: a table stored before) | cycles


@dataclass(frozen=True, kw_only=True)
class BisectStep(_Sparse):
    """A change a bisection found: a step (``first_bad`` after ``last_good``) or a spread
    change half in by ``first_bad``; a step of neighbours is confirmed against its parent
    (``run_id``, ``parent_run_id``, ``change``, the functions that moved: ``explain``)."""

    kind: str = "step"
    last_good: str
    first_bad: str
    between: tuple[str, ...] = ()
    share: float | None = None
    interval: tuple[str, str] | None = None
    interval_share: float | None = None
    run_id: int | None = None
    parent_run_id: int | None = None
    change: ChangeSummary | None = None
    explain: list[Attribution] | None = None  # analysis/attribution.py's tables


@dataclass(frozen=True, kw_only=True)
class BisectAnswer(JsonRecord):
    """What a finished bisection found, stored with it and read by its text, JSON and page:
    the ends' change, every change found, how much of the ends' change they carry (by
    estimate), and the commits placed by estimate, skipped, or measured. Stored as the
    flat JSON object it always was (the servers' facts beside the rest)."""

    ends: ChangeSummary | None = None
    steps: tuple[BisectStep, ...] = ()
    shares: dict[str, float] = field(default_factory=dict)  # each commit's, by estimate
    carried: float | None = None
    more_may_be_left: bool = False
    by_estimate: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()  # did not build
    measured_commits: tuple[str, ...] = ()
    more_than_one_step: tuple[str, ...] = ()  # stored before bisection by position
    server: ServerFacts | None = None  # None: stored before server settings were

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        server = data.pop("server") or {}
        if not self.more_than_one_step:
            del data["more_than_one_step"]
        return {**data, **server}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        """The stored answer, checked (a server's facts sit beside the rest)."""
        if isinstance(data, dict) and "server_config" in data:
            data = {**data, "server": data}
        return _checked(cls, data)
