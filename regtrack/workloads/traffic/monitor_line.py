"""One line of MONITOR's output, parsed and redacted at once into an ``Observed`` record.

The server writes each command as ``<unix time> [<db> <client address>] "CMD" "arg" ...``,
every argument quoted with C escapes (``\\"``, ``\\\\``, ``\\n``, ``\\r``, ``\\t``, ``\\a``,
``\\b``, ``\\xNN`` for every other unprintable byte), and ``[<db> lua]`` for a command a
script ran (sds.c ``sdscatrepr``, replication.c ``replicationFeedMonitors``). The
arguments of AUTH, HELLO, MIGRATE, ACL and CONFIG are never unquoted (the server already
hides AUTH's; a password may still sit in the others): the record keeps their name only.
A line that is not of this form gives None: the sample counts it, nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from regtrack.workloads.traffic import keyspecs
from regtrack.workloads.traffic.redaction import Arg, Redactor

_HEAD = re.compile(rb"(\d+(?:\.\d+)?) \[(\d+) ([^\]]*)\] ")
_ESCAPES = {ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("a"): 7, ord("b"): 8,
            ord('"'): 34, ord("\\"): 92}  # fmt: skip
_HEX = b"0123456789abcdefABCDEF"
_PLAIN_WORDS = re.compile(rb'"([^"]*)"')


@dataclass(frozen=True)
class Observed:
    """One command the server ran, as it may be kept (its arguments already redacted)."""

    time: float  # the server's clock, unix seconds
    connection: str  # a pseudonym: c1, c2, ... per client address; "lua" for scripts
    db: int
    lua: bool  # run by a script (EVAL/EVALSHA/FCALL), not sent by a client
    command: str  # upper case
    args: tuple[Arg, ...]
    redacted: bool = False  # its arguments were dropped unread (AUTH, HELLO, ...)


def words(body: bytes) -> list[bytes] | None:
    """The quoted words of a MONITOR line's body, unescaped; None if malformed."""
    if b"\\" not in body:  # the common line: no escapes, split at once
        plain = _PLAIN_WORDS.findall(body)
        if plain and b" ".join(b'"' + w + b'"' for w in plain) == body:
            return plain
    out: list[bytes] = []
    i, n = 0, len(body)
    while i < n:
        if body[i] != 0x22:  # '"'
            return None
        i += 1
        word = bytearray()
        while True:
            if i >= n:
                return None
            c = body[i]
            if c == 0x22:
                i += 1
                break
            if c != 0x5C:  # backslash
                word.append(c)
                i += 1
                continue
            if i + 1 >= n:
                return None
            e = body[i + 1]
            if e == ord("x"):
                pair = body[i + 2 : i + 4]
                if len(pair) != 2 or any(b not in _HEX for b in pair):
                    return None
                word.append(int(pair, 16))
                i += 4
            elif e in _ESCAPES:
                word.append(_ESCAPES[e])
                i += 2
            else:
                return None
        out.append(bytes(word))
        if i < n:
            if body[i] != 0x20:
                return None
            i += 1
            if i >= n:
                return None  # a trailing space
    return out or None


def parse(line: bytes, redactor: Redactor) -> Observed | None:
    """``line`` (without MONITOR's leading '+' and its CRLF) as a record, else None."""
    head = _HEAD.match(line)
    if head is None:
        return None
    body = line[head.end() :]
    first = re.match(rb'"([A-Za-z_|\-]{1,40})"(?: |$)', body)
    if first is None:
        return None
    command = first.group(1).decode().upper()
    try:
        when, db = float(head.group(1)), int(head.group(2))
    except ValueError:
        return None
    address = head.group(3).decode("ascii", "replace")
    connection = redactor.connection(address)
    if command in keyspecs.SECRET_ARGS:
        redactor.secrets_dropped += 1
        return Observed(when, connection, db, address == "lua", command, (), redacted=True)
    parsed = words(body)
    if parsed is None:
        return None
    return Observed(
        when, connection, db, address == "lua", command, redactor.args(command, parsed[1:])
    )


def quote(word: bytes) -> bytes:
    """``word`` as MONITOR quotes it (sdscatrepr): for tests and fixtures."""
    out = bytearray(b'"')
    for c in word:
        if c in (0x22, 0x5C):
            out += b"\\" + bytes([c])
        elif c in (10, 13, 9, 7, 8):
            out += b"\\" + {10: b"n", 13: b"r", 9: b"t", 7: b"a", 8: b"b"}[c]
        elif 0x20 <= c < 0x7F:
            out.append(c)
        else:
            out += b"\\x%02x" % c
    return bytes(out + b'"')
