"""The one record of a measured change: its estimate in percent, its interval, and how
it was computed.

Every interval analysis makes is one (analysis/stats.py's Welch and paired t,
analysis/sequential.py's sequential ones), a bisection places commits with them
(analysis/bisection.py), and the records answers are made of store them under their
JSON names (analysis/records.py: PooledComparison.interval, ChangeSummary.interval). Plain
Python only, so the records that output reads need no scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Change:
    """A relative change in percent with its interval, from ``n`` observations.

    A sequential interval also says its minimum detectable effect and the alpha it was
    computed at; a Welch or bootstrap interval has neither (None). ``low_pct`` /
    ``high_pct`` are ``-100.0`` / ``math.inf`` when a look cannot bound the change yet (or a
    stored record has no bound). ``n`` is 0 and ``method`` None when not known (a
    change read back from a record that did not store them).
    """

    estimate_pct: float
    low_pct: float
    high_pct: float
    n: int = 0
    method: str | None = None
    mde_pct: float | None = None
    alpha: float | None = None


def stored(
    estimate_pct: float | None,
    low_pct: float | None,
    high_pct: float | None,
    *,
    n: int | None = None,
    method: str | None = None,
    mde_pct: float | None = None,
) -> Change | None:
    """A change as a record keeps it (change_pct, ci_low_pct, ci_high_pct, ...: JSON null
    for an end it could not bound, or one an older regtrack did not store): None without
    an estimate, a missing end read as unbounded."""
    if estimate_pct is None:
        return None
    return Change(
        estimate_pct,
        -100.0 if low_pct is None else low_pct,
        math.inf if high_pct is None else high_pct,
        n or 0,
        method,
        mde_pct,
    )
