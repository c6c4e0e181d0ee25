"""Invalid-trial reasons stored as free text (schema 8 and older), read back as codes.

Before the codes, a trial's reasons were one text joined with "; ", each reason worded by
the place that found it. The migration to schema 9 splits that text and names each part's
code by the words those places wrote; a part no rule knows is kept whole as OTHER. The
rules are frozen here: they describe what older regtracks wrote, not today's labels.
"""

from __future__ import annotations

import re

from regtrack.core.records import InvalidReason, TrialReason, stored_text

# Reasons written as "<words>: <detail>": the detail is what follows.
_PREFIXED = (
    ("client-bound: ", InvalidReason.CLIENT_BOUND),
    ("not server-bound: ", InvalidReason.NOT_SERVER_BOUND),
    ("contended: ", InvalidReason.CONTENDED),
    ("server died: ", InvalidReason.SERVER_DIED),
    ("server refused the trial: ", InvalidReason.SERVER_REFUSED),
    ("paired windows failed: ", InvalidReason.WINDOWS_FAILED),
    ("lost the server during the trial: ", InvalidReason.SERVER_LOST),
    ("warm-up failed: ", InvalidReason.WARMUP_FAILED),
    ("not repeatable: ", InvalidReason.NOT_REPEATABLE),
    ("server not saturated: ", InvalidReason.NOT_SATURATED),
    ("built-in driver: ", InvalidReason.BUILTIN_DRIVER),
)
# Reasons recognised by their wording: the whole text is the detail.
_WORDED = (
    (re.compile(r"the server exited during the "), InvalidReason.SERVER_DIED),
    (re.compile(r"the server counted \d+ GET calls, "), InvalidReason.CALLS_SHORT),
    (re.compile(r"\S+ ran \d+ times, the declared ratios expect"), InvalidReason.RATIOS_OFF),
    (re.compile(r"a background save or AOF rewrite ran "), InvalidReason.BACKGROUND_SAVE),
    (
        re.compile(r"(memtier_benchmark|redis-benchmark|built-in driver) "),
        InvalidReason.LOADGEN_FAILED,
    ),
)
# "<n> GET misses (...)", "<n> error replies (...)": the detail is "<n> (...)", as written now.
_COUNTED = (
    (re.compile(r"(\d+) GET misses (.*)", re.DOTALL), InvalidReason.GET_MISSES),
    (re.compile(r"(\d+) error replies (.*)", re.DOTALL), InvalidReason.ERROR_REPLIES),
)


def parse(text: object) -> tuple[TrialReason, ...]:
    """The reasons one stored text held, in order; any value (a crafted database may hold
    numbers or bytes) gives reasons, never an error."""
    return tuple(_one(part) for part in stored_text(text).split("; ") if part.strip())


def _one(part: str) -> TrialReason:
    for prefix, code in _PREFIXED:
        if part.startswith(prefix):
            return TrialReason(code, part[len(prefix) :])
    for pattern, code in _COUNTED:
        counted = pattern.fullmatch(part)
        if counted:
            return TrialReason(code, f"{counted[1]} {counted[2]}")
    for pattern, code in _WORDED:
        if pattern.match(part):
            return TrialReason(code, part)
    return TrialReason(InvalidReason.OTHER, part)


def rows(texts: list[tuple[int, object]]) -> list[tuple[int, int, str, str]]:
    """trial_reasons rows (trial id, position, code, detail) for (trial id, stored text)."""
    return [
        (trial_id, position, reason.code.value, reason.detail)
        for trial_id, text in texts
        for position, reason in enumerate(parse(text))
    ]
