"""Which arguments of a command are keys, which are values (payloads), which are the rest.

Keys come from the server's own table when the sampler could read it (``COMMAND``, read
only: first key, last key, step), else from ``STATIC`` below; commands whose keys move
with their arguments (EVAL's numkeys, XREADGROUP's STREAMS, LMPOP's numkeys) are read
here, as the server's ``COMMAND GETKEYS`` would, without asking it per call. Values are
what an application stores: redacted to their size (and a pseudonym) before anything
keeps them. What is neither (COUNT, BLOCK timeouts, field names, queue names that are
arguments) is kept as its redacted shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

KEY, VALUE, ARG, SCRIPT, SHA = "key", "value", "arg", "script", "sha"


@dataclass(frozen=True)
class KeyRange:
    """COMMAND's legacy key spec: positions counted with the command name as 0; ``last``
    negative counts from the end (-1: the last argument)."""

    first: int
    last: int
    step: int


_ONE = KeyRange(1, 1, 1)
_ALL = KeyRange(1, -1, 1)
_POP = KeyRange(1, -2, 1)  # BLPOP k1 k2 ... timeout
STATIC: dict[str, KeyRange] = {
    **dict.fromkeys(
        ["GET", "SET", "SETNX", "SETEX", "PSETEX", "GETDEL", "GETEX", "GETSET", "APPEND",
         "STRLEN", "INCR", "INCRBY", "INCRBYFLOAT", "DECR", "DECRBY", "EXPIRE", "PEXPIRE",
         "EXPIREAT", "PEXPIREAT", "TTL", "PTTL", "PERSIST", "TYPE", "EXPIRETIME", "LPUSH",
         "RPUSH", "LPUSHX", "RPUSHX", "LPOP", "RPOP", "LLEN", "LRANGE", "LREM", "LTRIM",
         "LINDEX", "LSET", "LPOS", "SADD", "SREM", "SMEMBERS", "SISMEMBER", "SMISMEMBER",
         "SCARD", "SPOP", "SRANDMEMBER", "HSET", "HSETNX", "HMSET", "HGET", "HMGET",
         "HGETALL", "HDEL", "HEXISTS", "HINCRBY", "HINCRBYFLOAT", "HLEN", "HKEYS", "HVALS",
         "ZADD", "ZREM", "ZRANGE", "ZREVRANGE", "ZRANGEBYSCORE", "ZREVRANGEBYSCORE", "ZCARD",
         "ZSCORE", "ZINCRBY", "ZCOUNT", "ZRANK", "ZREVRANK", "ZREMRANGEBYSCORE",
         "ZREMRANGEBYRANK", "ZPOPMIN", "ZPOPMAX", "XADD", "XLEN", "XRANGE", "XREVRANGE",
         "XDEL", "XTRIM", "XACK", "XCLAIM", "XAUTOCLAIM", "XPENDING", "SETRANGE", "GETRANGE",
         "PUBLISH", "HRANDFIELD", "SETBIT", "GETBIT", "PFADD", "PFCOUNT"]
        , _ONE,
    ),
    **dict.fromkeys(["DEL", "UNLINK", "EXISTS", "MGET", "WATCH", "TOUCH", "SINTER",
                     "SUNION", "SDIFF"], _ALL),
    **dict.fromkeys(["BLPOP", "BRPOP", "BZPOPMIN", "BZPOPMAX"], _POP),
    **dict.fromkeys(["RPOPLPUSH", "LMOVE", "BRPOPLPUSH", "BLMOVE", "RENAME", "SMOVE",
                     "COPY"], KeyRange(1, 2, 1)),
    "MSET": KeyRange(1, -1, 2),
    "XGROUP": KeyRange(2, 2, 1),
    "XINFO": KeyRange(2, 2, 1),
}  # fmt: skip
# numkeys at this position, the keys right after it
NUMKEYS = {"EVAL": 2, "EVALSHA": 2, "EVAL_RO": 2, "EVALSHA_RO": 2, "FCALL": 2, "FCALL_RO": 2,
           "LMPOP": 1, "ZMPOP": 1, "SINTERCARD": 1, "BLMPOP": 2, "BZMPOP": 2}  # fmt: skip
# Commands whose arguments may carry credentials: dropped at parse, never read further.
SECRET_ARGS = {"AUTH", "HELLO", "MIGRATE", "ACL", "CONFIG"}


def roles(
    command: str, args: Sequence[bytes], server: Mapping[str, KeyRange] | None = None
) -> list[str]:
    """One role per argument (``args`` without the command name)."""
    out = [ARG] * len(args)
    for i in _keys(command, args, server or {}):
        out[i] = KEY
    for i in _values(command, args, out):
        out[i] = VALUE
    if command in {"EVAL", "EVAL_RO"} and args:
        out[0] = SCRIPT
    elif command in {"EVALSHA", "EVALSHA_RO"} and args:
        out[0] = SHA
    elif command == "SCRIPT" and len(args) > 1 and args[0].upper() == b"LOAD":
        out[1] = SCRIPT
    return out


def _keys(command: str, args: Sequence[bytes], server: Mapping[str, KeyRange]) -> list[int]:
    n = len(args)
    if command in NUMKEYS:
        at = NUMKEYS[command] - 1
        count = _int(args[at]) if at < n else None
        return list(range(at + 1, min(n, at + 1 + count))) if count else []
    if command in {"XREAD", "XREADGROUP"}:
        upper = [a.upper() for a in args]
        if b"STREAMS" not in upper:
            return []
        rest = n - upper.index(b"STREAMS") - 1
        start = upper.index(b"STREAMS") + 1
        return list(range(start, start + rest // 2))
    spec = STATIC.get(command) or server.get(command)
    if spec is None or spec.first <= 0:
        return []
    last = spec.last if spec.last > 0 else n + 1 + spec.last
    return [p - 1 for p in range(spec.first, last + 1, max(spec.step, 1)) if 0 < p <= n]


def _values(command: str, args: Sequence[bytes], roles: list[str]) -> list[int]:
    """Positions holding what the application stores or sends (payloads, members, ids)."""
    n = len(args)
    if command in {"SET", "SETNX", "GETSET", "APPEND", "PUBLISH", "LPUSHX", "RPUSHX"}:
        return [1] if n > 1 else []
    if command in {"SETEX", "PSETEX", "LREM", "LSET", "SETRANGE"}:
        return [2] if n > 2 else []
    if command in {"LPUSH", "RPUSH", "SADD", "SREM", "SMISMEMBER", "SISMEMBER", "PFADD"}:
        return list(range(1, n))
    if command in {"HSET", "HMSET", "HSETNX"}:
        return list(range(2, n, 2))
    if command in {"ZADD", "ZREM", "ZSCORE", "ZRANK", "ZREVRANK"}:
        return _zset_members(command, args)
    if command == "MSET":
        return list(range(1, n, 2))
    if command == "XADD":
        return _xadd_values(args)
    return []


def _zset_members(command: str, args: Sequence[bytes]) -> list[int]:
    if command != "ZADD":
        return list(range(1, len(args)))
    i = 1
    while i < len(args) and args[i].upper() in {b"NX", b"XX", b"GT", b"LT", b"CH", b"INCR"}:
        i += 1
    return list(range(i + 1, len(args), 2))  # score member score member ...


def _xadd_values(args: Sequence[bytes]) -> list[int]:
    i, n = 1, len(args)
    while i < n:
        word = args[i].upper()
        if word == b"NOMKSTREAM":
            i += 1
        elif word in {b"MAXLEN", b"MINID"}:
            i += 3 if i + 1 < n and args[i + 1] in {b"=", b"~"} else 2
        elif word == b"LIMIT":
            i += 2
        else:
            break
    return list(range(i + 2, n, 2))  # the entry id at i, then field value pairs


def _int(raw: bytes) -> int | None:
    try:
        value = int(raw)
    except ValueError:
        return None
    return value if 0 <= value <= 100_000 else None


def from_command_table(table: Mapping[str, Mapping[str, object]]) -> dict[str, KeyRange]:
    """The server's ``COMMAND`` reply (as redis-py parses it) as key ranges by name."""
    out: dict[str, KeyRange] = {}
    for name, info in table.items():
        try:
            spec = KeyRange(
                int(info["first_key_pos"]), int(info["last_key_pos"]), int(info["step_count"])
            )
        except (KeyError, TypeError, ValueError):
            continue
        out[str(name).upper()] = spec
    return out
