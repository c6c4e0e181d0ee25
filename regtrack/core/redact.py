"""Secrets out of everything regtrack stores, shows or writes: one rule for every URL.

A URL's password (``user:password@``), a lone token (``TOKEN@``, which git and redis-py
both take as the password) and its query string (where tokens also travel) are replaced
by ``***``; control characters become ``?``. Used by every place that stores or prints a
source repository or a server URL, and on the command line a run records.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

HIDDEN = "***"


def parts(url: str) -> tuple[str, str, str, str]:
    """(scheme, userinfo, host part, query) of ``url``, split by hand so that nothing in
    a password (an unencoded ``?``, ``/``, ``#`` or ``@``) can end up in the host part:
    the userinfo is everything up to the last ``@``."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    userinfo, at, hostpart = rest.rpartition("@")
    if not at:
        userinfo, hostpart = "", rest
    hostpart, _, query = hostpart.partition("?")
    return scheme, userinfo, hostpart, query


def url(text: str) -> str:
    """``text`` as it may be shown, written or logged."""
    scheme, userinfo, hostpart, query = parts(text)
    # user:password@ keeps the user; a lone SECRET@ is what git and redis-py take as one
    name = userinfo.split(":", 1)[0]
    user = f"{name}:{HIDDEN}@" if ":" in userinfo else f"{HIDDEN}@" * bool(userinfo)
    shown = f"{scheme + '://' if scheme else ''}{user}{hostpart}{'?' + HIDDEN if query else ''}"
    return "".join(c if c.isprintable() else "?" for c in shown)


def location(text: str) -> str:
    """A source repository's location as stored and shown: URLs redacted; a local path or
    an scp-like ``git@host:path`` (no secret there: ssh uses keys) as it is."""
    return url(text) if "://" in text else "".join(c if c.isprintable() else "?" for c in text)


def argv(args: Iterable[str]) -> list[str]:
    """A command line as a run stores it: every argument holding a URL redacted."""
    return [url(arg) if "://" in arg else arg for arg in args]


# A scheme (RFC 3986: a letter, then letters, digits, '+', '.', '-') followed by "://".
# Matched from the start of a run of scheme characters only (the lookbehind), each part
# possessive: a run is scanned once, where a match tried at every letter of a long word
# scanned to its end each time (40,000 letters: 12.5 s; 2 MB: hours).
SCHEME = r"(?<![a-z0-9+.-])[0-9+.-]*+[a-z][a-z0-9+.-]*+://"
USERINFO_RE = re.compile(rf"({SCHEME})([^\s/?#@]++)@", re.IGNORECASE)
SCHEME_RE = re.compile(SCHEME, re.IGNORECASE)
# A run of URL characters up to a '?', from the run's start: what may hold a URL whose
# query follows (once per run, not once per URL inside it).
BEFORE_QUERY_RE = re.compile(r"(?<![^\s?#'\"])[^\s?#'\"]*+\?")
QUERY_RE = re.compile(r"[^\s'\"]*+")


def scrub(message: str) -> str:
    """Any URL's credentials in free text (an error message, a traceback) redacted: its
    userinfo's password (or lone token) and its query string. Linear in the text."""

    def hide(m: re.Match[str]) -> str:
        info = m.group(2)
        return m.group(1) + (f"{info.split(':', 1)[0]}:{HIDDEN}" if ":" in info else HIDDEN) + "@"

    return _hide_queries(USERINFO_RE.sub(hide, message))


def _hide_queries(text: str) -> str:
    """Each query string (to the next space or quote) that follows a URL in the same run
    of URL characters, replaced by ``***``."""
    out, done = [], 0
    for m in BEFORE_QUERY_RE.finditer(text):
        if m.start() < done or not SCHEME_RE.search(m.group(0)):
            continue  # inside a query already hidden, or no URL before the '?'
        query = QUERY_RE.match(text, m.end())
        assert query is not None  # it matches the empty string
        out += [text[done : m.end()], HIDDEN]
        done = query.end()
    return "".join([*out, text[done:]])
