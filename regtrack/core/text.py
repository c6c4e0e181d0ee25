"""Untrusted text as it may be shown: names, labels, point names, server setting values,
commit subjects and whatever a crafted database stored, all of which a pull request can
choose. Every character that is not printable (C0 and C1 controls, DEL, bidi overrides,
line separators) is shown as its escape (``\\x1b``), so no terminal acts on it, and a
field is cut to ``FIELD`` characters, so no output grows without bound.

Markdown adds its own rules on top (output/markdown.py); HTML is escaped by its templates.
"""

from __future__ import annotations

# The longest field shown. The longest honest one is a commit subject (git's advice is 50
# characters, GitHub's lists cut at 72); labels, points and setting values are far
# shorter. 200 keeps any of them whole, and keeps a table row of the pull-request
# comment near 1 kB, so hundreds fit under GitHub's 65,536 characters.
FIELD = 200
CUT = "…"


def printable(text: object, limit: int | None = FIELD, newlines: bool = False) -> str:
    """``text`` with each character that is not printable shown as its Python escape
    (``\\x1b``, ``\\n``, ``\\u202e``; ``newlines``: "\\n" kept), and cut to ``limit``
    characters with "…" at the end (None: not cut). Linear in the kept part."""
    text = text if isinstance(text, str) else str(text)
    cut = limit is not None and len(text) > limit
    if cut:
        text = text[:limit]
    if not text.isprintable():
        text = "".join(
            c if c.isprintable() or (newlines and c == "\n") else ascii(c)[1:-1] for c in text
        )
    if limit is not None and (cut or len(text) > limit):
        text = text[: max(limit - 1, 0)] + CUT
    return text
