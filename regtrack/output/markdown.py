"""Untrusted text in Markdown (the step summary, the pull-request comment, `compare --format
markdown`): it reads as itself, never as a mention, link, image, HTML or formatting, and a
document never outgrows what GitHub takes.

Text that nothing in Markdown or GitHub acts on (words, numbers, '=', '.', '-', ...) is
written as it is, so clean output reads as before; anything else goes in a code span
whose backtick fence is longer than any run of backticks inside it, where nothing
renders. Every field is first made printable and cut (core/text.py), so no newline
can end its line and start a block of its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from regtrack.core.text import FIELD, printable

# Characters that never start anything by themselves: ASCII letters and digits, a few
# punctuation marks, and any printable character beyond ASCII ('|' ends a table's cell:
# ``cell`` escapes it).
PLAIN_RE = re.compile(r"(?:[A-Za-z0-9 .,;:%+=/()\[\]'\"?!{}^_@|-]|[^\x00-\x7f])*")
# ...and what they still make together: links and images (`](`, `][`), autolinks
# (`://`, `www.`), mentions and e-mail addresses (`@name`), emoji codes (`:name:`, or
# half of one at either end, which the text around a field may close), emphasis (`_`
# not inside a word), GitHub's issue references (`GH-1`), and at the start, where a
# field may begin a list item's text, a list marker or a link reference definition.
ACTIVE = re.compile(
    r"\]\(|\]\[|!\[|://|www\.|@[\w-]|:[\w+-]+(:|$)|^[\w+-]+:"
    r"|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|\bgh-\d|^(\d{1,9}[.)]|[-+])(\s|$)|^\[",
    re.IGNORECASE,
)
LIST = 1_000  # a list of fields (the points a gate pools) in one line


def code(text: object, limit: int | None = FIELD) -> str:
    """``text`` in a code span, whatever it holds: the fence is one backtick longer than
    the longest run inside, and a space pads text that starts or ends with a backtick or
    a space (CommonMark strips one from each side)."""
    shown = printable(text, limit)
    if not shown:
        return "` `"
    longest = max((len(run) for run in re.findall(r"`+", shown)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if shown[0] in "` " or shown[-1] in "` " else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def inline(text: object, limit: int | None = FIELD) -> str:
    """``text`` in running Markdown: as it is where nothing in it acts, else a code span
    (so too where it starts or ends with a space, which would end a ``**`` around it)."""
    shown = printable(text, limit)
    if PLAIN_RE.fullmatch(shown) and not ACTIVE.search(shown) and shown == shown.strip():
        return shown
    return code(shown, None)


def cell(text: object, limit: int | None = FIELD) -> str:
    """``text`` in a table cell: ``inline``, with each '|' escaped, as GitHub's tables
    read it even inside a code span (it would end the cell)."""
    return inline(text, limit).replace("|", "\\|")


def items(
    texts: Iterable[object],
    sep: str = ", ",
    quote: Callable[[object], str] = inline,
    limit: int = LIST,
) -> str:
    """Each of ``texts`` quoted and joined while the line stays within ``limit``
    characters; the rest counted ("and 97 more")."""
    texts = list(texts)
    shown: list[str] = []
    size = 0
    for i, text in enumerate(texts):
        quoted = quote(text)
        size += len(quoted) + (len(sep) if shown else 0)
        if shown and size > limit:
            return f"{sep.join(shown)}{sep}and {len(texts) - i} more"
        shown.append(quoted)
    return sep.join(shown)


def length(lines: Iterable[str], size: Callable[[str], int] = len) -> int:
    """The size of ``lines`` as a document: each line's ``size`` and its newline."""
    return sum(size(line) + 1 for line in lines)


def fit(lines: list[str], limit: int, note: str, size: Callable[[str], int] = len) -> list[str]:
    """``lines`` when their text (a newline after each) is within ``limit``; else the
    first of them that fit, then a blank line (a table ends there) and ``note``. Whole
    lines only, so no code span or table row is cut in two."""
    if length(lines, size) <= limit:
        return lines
    tail = ["", note]
    room = limit - length(tail, size)
    kept: list[str] = []
    for line in lines:
        room -= size(line) + 1
        if room < 0:
            break
        kept.append(line)
    return [*kept, *tail]
