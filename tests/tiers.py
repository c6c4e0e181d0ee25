"""Which tier of the suite runs (scripts/test.sh: the first, which CI runs, or both with
--extended), for property tests whose cost grows with their examples.

The hostile-input property tests that read a whole database or page per example (the
crafted database, hostile names in pages) draw a fifth of their examples in the first
tier: their strategies' kinds of hostile value (types, encodings, markup, control
characters) all come up within a few hundred draws, while 2,000 cost minutes of CI. The
second tier draws all of them."""

from __future__ import annotations

import os

VARIABLE = "REGTRACK_TEST_TIER"
FIRST_TIER_SHARE = 5


def extended() -> bool:
    return os.environ.get(VARIABLE) == "extended"


def examples(full: int) -> int:
    """``full`` examples in the second tier, a fifth of them in the first."""
    return full if extended() else max(1, full // FIRST_TIER_SHARE)
