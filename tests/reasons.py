"""Reading stored invalid-trial reasons in tests: the codes to assert on, the detail to
check a message's wording."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from regtrack.core.records import InvalidReason, TrialReason

WITH_CODE = "EXISTS (SELECT 1 FROM trial_reasons r WHERE r.trial_id = trials.id AND r.code = '{}')"


def has_code(code: InvalidReason) -> str:
    """SQL condition on ``trials``: the trial carries ``code``."""
    return WITH_CODE.format(code.value)


def stored_reasons(db: Path, where: str = "1") -> list[tuple[TrialReason, ...]]:
    """Each trial's reasons, in plan order, of the trials (``t``, target ``g``) matching
    ``where``."""
    conn = sqlite3.connect(db)
    try:
        ids = [
            row[0]
            for row in conn.execute(
                "SELECT t.id FROM trials t JOIN targets g ON g.id = t.target_id"
                f" WHERE {where} ORDER BY t.seq"
            )
        ]
        return [
            tuple(
                TrialReason.stored(code, detail)
                for code, detail in conn.execute(
                    "SELECT code, detail FROM trial_reasons WHERE trial_id = ? ORDER BY position",
                    (trial_id,),
                )
            )
            for trial_id in ids
        ]
    finally:
        conn.close()


def codes(reasons: tuple[TrialReason, ...]) -> set[InvalidReason]:
    return {r.code for r in reasons}
