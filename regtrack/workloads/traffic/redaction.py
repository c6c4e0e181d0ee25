"""What of a command's arguments may leave the server: shapes, sizes and pseudonyms.

Every argument is redacted when its line is parsed, before anything keeps it:

- a **value** (what the application stores: payloads, list elements, hash values) keeps
  its size, and its class (``{uuid}``, ``{hex}``, ...) when the whole value is an id; a
  pushed value (LPUSH, RPUSH, XADD: a queue's message) also keeps the pseudonyms of the
  ids inside it (uuids, hex and token-like runs, at most ``MAX_INNER``), never their text
  nor where they sat: kombu's message carries Celery's task id and delivery tag so;
- a **key** keeps its family (``rq:job:{uuid}``): ids, hex strings, numbers, timestamps,
  e-mail addresses and token-like runs become placeholders; ``--keep-names`` keeps the
  name itself as well;
- any other **argument** (COUNT 10, BLOCK 2000, field names, queue names) keeps its text
  with the same placeholders, when it is short printable ASCII; else only its size;
- a **script** body (EVAL, SCRIPT LOAD) is kept as seen: it is the code to replay.

Each placeholder, and each value, gets a pseudonym: a keyed hash whose key is drawn for
this capture and never written, so the same job id maps to the same pseudonym in one
capture (a producer's write can be linked to a consumer's read) and to nothing outside it.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
from dataclasses import dataclass, field

from regtrack.workloads.traffic import keyspecs

MAX_SHAPED = 200  # longer arguments are data: size only
# kombu's priority queues: the queue's name, this separator and the priority (0-9, kombu's
# PRIORITY_STEPS 0, 3, 6, 9 by default), every one of them in each of Celery's BRPOPs. The
# priority is a constant of the transport, not an id: kept, so each stays a key of its own.
KOMBU_PRIORITY = "\x06\x16"
_PRIORITY = re.compile(r"[0-9]{1,2}")  # longer (or any other text): an id, redacted
# Commands whose values are a queue's messages: the ids inside them may link a producer's
# push to a consumer's steps (lifecycle_infer.py). Only these are searched (a cost per line).
PUSHED = {"LPUSH", "RPUSH", "LPUSHX", "RPUSHX", "XADD"}
MAX_INNER = 16  # ids kept per pushed value, the first ones
MAX_SEARCHED = 65536  # longer pushed values keep their size alone
MAX_KEPT_NUMBER = 7  # a number argument longer than this (a timestamp, an id) is {int}
# Recognised variable parts, tried in this order; each becomes {name} with a pseudonym.
_PARTS = [
    ("ts", r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?"),
    ("uuid", r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"),
    ("email", r"[^\s:@/{}]+@[^\s:@/{}]+"),
    ("hex", r"(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}"),
    ("token", r"(?=[A-Za-z0-9+/=]*\d)(?=[A-Za-z0-9+/=]*[A-Za-z])[A-Za-z0-9+/=]{16,}"),
    ("name", r"[A-Za-z_\-]{25,}"),
    ("num", r"\d+\.\d+(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+"),
    ("int", r"\d+"),
]
_EDGE = r"(?<![A-Za-z0-9])(?:{})(?![A-Za-z0-9])"
_FINDER = re.compile("|".join(f"(?P<{n}>{_EDGE.format(p)})" for n, p in _PARTS))
_WHOLE = {n: re.compile(p) for n, p in _PARTS}
_INNER = re.compile("|".join(_EDGE.format(p) for n, p in _PARTS if n in {"uuid", "hex", "token"}))
_PLAIN = re.compile(r"[\x21-\x7e]+")  # printable ASCII without spaces
NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?")
PLACEHOLDER = re.compile(r"\{(" + "|".join(n for n, _ in _PARTS) + r")\}")


@dataclass(frozen=True)
class Arg:
    """One argument as it may be kept: its role (keyspecs), size, redacted shape and the
    pseudonyms of its variable parts."""

    role: str  # keyspecs.KEY, VALUE, ARG, SCRIPT or SHA
    size: int
    shape: str | None  # a key's family, an argument's text with placeholders, a value's
    # id class ("{uuid}") or None (size only)
    ids: tuple[str, ...] = ()  # pseudonyms of the placeholders (a value: of itself)
    name: str | None = None  # the key itself: only with --keep-names
    inner: tuple[str, ...] = ()  # a pushed value's: pseudonyms of the ids inside it

    @property
    def variable(self) -> bool:
        return bool(PLACEHOLDER.search(self.shape or ""))


@dataclass
class Redactor:
    """One capture's redaction: its secret pseudonym key (never written), its connection
    pseudonyms, whether key names are kept, and the server's key table if read."""

    keep_names: bool = False
    key_table: dict[str, keyspecs.KeyRange] = field(default_factory=dict)
    _secret: bytes = field(default_factory=lambda: os.urandom(32), repr=False)
    _connections: dict[str, str] = field(default_factory=dict, repr=False)
    secrets_dropped: int = 0  # commands whose arguments were dropped (AUTH, HELLO, ...)

    def connection(self, address: str) -> str:
        """``c1``, ``c2``, ... in order of first appearance; ``lua`` for scripts."""
        if address == "lua":
            return "lua"
        if address not in self._connections:
            self._connections[address] = f"c{len(self._connections) + 1}"
        return self._connections[address]

    def pseudonym(self, raw: bytes) -> str:
        return hashlib.blake2b(raw, key=self._secret, digest_size=6).hexdigest()

    def args(self, command: str, raw: list[bytes]) -> tuple[Arg, ...]:
        """The arguments of ``command`` as they may be kept (``raw`` is dropped after)."""
        pushed = command in PUSHED
        return tuple(
            self._arg(role, value, pushed)
            for role, value in zip(keyspecs.roles(command, raw, self.key_table), raw, strict=True)
        )

    def _arg(self, role: str, raw: bytes, pushed: bool = False) -> Arg:
        size = len(raw)
        if role == keyspecs.SCRIPT:
            return Arg(role, size, raw.decode("utf-8", "replace"))
        if role == keyspecs.SHA:
            text = raw.decode("ascii", "replace")
            return Arg(role, size, text if re.fullmatch(r"[0-9a-fA-F]{40}", text) else None)
        text = raw.decode("ascii", "replace") if _PLAIN.fullmatch(raw.decode("latin-1")) else None
        if role == keyspecs.KEY and text is None and b" " not in raw:
            text = raw.decode("latin-1")  # a key with control bytes (kombu's priorities)
        if role == keyspecs.VALUE:
            kind = _whole_part(text) if text is not None else None
            inner = self._inner(raw) if pushed and not kind and size <= MAX_SEARCHED else ()
            return Arg(
                role, size, f"{{{kind}}}" if kind else None, (self.pseudonym(raw),), inner=inner
            )
        if text is None or size > MAX_SHAPED:
            return Arg(role, size, None, (self.pseudonym(raw),))
        number = NUMBER.fullmatch(text)
        if role == keyspecs.ARG and number and len(text) <= MAX_KEPT_NUMBER:
            return Arg(role, size, text)
        head, sep, priority = text.partition(KOMBU_PRIORITY)
        kombu = role == keyspecs.KEY and bool(sep) and _PRIORITY.fullmatch(priority) is not None
        kept = sep + priority if kombu else ""
        shape, ids = self._shape(head if kept else text)
        name = text if role == keyspecs.KEY and self.keep_names else None
        return Arg(role, size, shape + kept, ids, name)

    def _inner(self, raw: bytes) -> tuple[str, ...]:
        """Pseudonyms of the ids inside a pushed value, in order, each once."""
        found = _INNER.finditer(raw.decode("latin-1"))
        ids = dict.fromkeys(self.pseudonym(m.group(0).encode("latin-1")) for m in found)
        return tuple(itertools.islice(ids, MAX_INNER))

    def _shape(self, text: str) -> tuple[str, tuple[str, ...]]:
        ids: list[str] = []

        def placeholder(m: re.Match[str]) -> str:
            ids.append(self.pseudonym(m.group(0).encode()))
            return "{" + str(m.lastgroup) + "}"

        return _FINDER.sub(placeholder, text), tuple(ids)


def _whole_part(text: str) -> str | None:
    """The class of a value that is one id as a whole (``{uuid}``), else None."""
    for name, pattern in _WHOLE.items():
        if name != "name" and pattern.fullmatch(text):
            return name
    return None
