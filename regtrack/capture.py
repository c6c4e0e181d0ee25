"""`regtrack mix capture`: a workload file from what a live server is actually doing.

Read-only by construction: the connection sends nothing but INFO (RESP2, no HELLO, no
CLIENT SETNAME/SETINFO), twice, N seconds apart. The per-command call deltas become the
ratios of a mix; the arguments are templates the user must check (key patterns and
payload sizes cannot be seen in INFO).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import redis
from redis.connection import parse_url

from regtrack import commands
from regtrack.errors import BadInput, CannotMeasure
from regtrack.runtimes.base import QUIET_CONNECT

MIN_SHARE = 0.005  # commands below 0.5% of the traffic are listed, not replayed
MAX_RATIO = 50

# Argument templates for commands a queue typically sends; __key__ / __data__ as memtier.
TEMPLATES: dict[str, list[str]] = {
    "GET": ["GET", "key:__key__"],
    "SET": ["SET", "key:__key__", "__data__"],
    "SETEX": ["SETEX", "key:__key__", "300", "__data__"],
    "PSETEX": ["PSETEX", "key:__key__", "300000", "__data__"],
    "SETNX": ["SETNX", "lock:__key__", "__data__"],
    "GETDEL": ["GETDEL", "key:__key__"],
    "DEL": ["DEL", "key:__key__"],
    "UNLINK": ["UNLINK", "key:__key__"],
    "EXISTS": ["EXISTS", "key:__key__"],
    "EXPIRE": ["EXPIRE", "key:__key__", "300"],
    "PEXPIRE": ["PEXPIRE", "key:__key__", "300000"],
    "TTL": ["TTL", "key:__key__"],
    "INCR": ["INCR", "counter:__key__"],
    "INCRBY": ["INCRBY", "counter:__key__", "1"],
    "MGET": ["MGET", "key:__key__"],
    "LPUSH": ["LPUSH", "queue", "__data__"],
    "RPUSH": ["RPUSH", "queue", "__data__"],
    "LPOP": ["LPOP", "queue"],
    "RPOP": ["RPOP", "queue"],
    "BRPOP": ["BRPOP", "queue", "1"],
    "BLPOP": ["BLPOP", "queue", "1"],
    "LLEN": ["LLEN", "queue"],
    "LRANGE": ["LRANGE", "queue", "0", "9"],
    "LREM": ["LREM", "queue", "1", "__data__"],
    "RPOPLPUSH": ["RPOPLPUSH", "queue", "queue:processing"],
    "LMOVE": ["LMOVE", "queue", "queue:processing", "LEFT", "RIGHT"],
    "HSET": ["HSET", "job:__key__", "status", "__data__"],
    "HGET": ["HGET", "job:__key__", "status"],
    "HMGET": ["HMGET", "job:__key__", "status"],
    "HGETALL": ["HGETALL", "job:__key__"],
    "HDEL": ["HDEL", "job:__key__", "status"],
    "HINCRBY": ["HINCRBY", "job:__key__", "attempts", "1"],
    "SADD": ["SADD", "set", "member:__key__"],
    "SREM": ["SREM", "set", "member:__key__"],
    "SISMEMBER": ["SISMEMBER", "set", "member:__key__"],
    "SMEMBERS": ["SMEMBERS", "set"],
    "ZADD": ["ZADD", "schedule", "1700000000", "member:__key__"],
    "ZREM": ["ZREM", "schedule", "member:__key__"],
    "ZRANGEBYSCORE": ["ZRANGEBYSCORE", "schedule", "0", "1700000000", "LIMIT", "0", "10"],
    "ZPOPMIN": ["ZPOPMIN", "schedule"],
    "ZCARD": ["ZCARD", "schedule"],
    "XADD": ["XADD", "stream", "MAXLEN", "~", "100000", "*", "data", "__data__"],
    "XREADGROUP": [
        "XREADGROUP",
        "GROUP",
        "group",
        "consumer",
        "COUNT",
        "1",
        "STREAMS",
        "stream",
        ">",
    ],
    "XACK": ["XACK", "stream", "group", "0-0"],
    "XLEN": ["XLEN", "stream"],
    "XAUTOCLAIM": ["XAUTOCLAIM", "stream", "group", "consumer", "60000", "0-0", "COUNT", "10"],
    "PUBLISH": ["PUBLISH", "events", "__data__"],
    "PING": ["PING"],
}
NEEDS_GROUP = {"XREADGROUP", "XACK", "XAUTOCLAIM"}


@dataclass(frozen=True)
class Capture:
    url: str
    seconds: float
    version: str
    calls: dict[str, int]  # command (as commandstats names it) -> calls in the interval


def _connect(url: str) -> redis.Redis:
    try:
        options = parse_url(url)
    except ValueError as exc:
        raise BadInput(f"--url {url!r}: {exc}; use redis://HOST:PORT") from None
    options.pop("connection_class", None)  # rediss:// (TLS) keeps its ssl settings
    return redis.Redis(**options, socket_timeout=10, decode_responses=True, **QUIET_CONNECT)


def sample(url: str, seconds: float) -> Capture:
    """Two INFO readings ``seconds`` apart: the commands the server ran in between."""
    if seconds <= 0:
        raise BadInput("--seconds must be positive")
    client = _connect(url)
    try:
        first = client.info("commandstats")
        time.sleep(seconds)
        second = client.info("commandstats")
        version = str(client.info("server").get("redis_version", "unknown"))
    except redis.AuthenticationError as exc:
        raise BadInput(f"{url}: {exc}; put the password in the URL") from None
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        raise CannotMeasure(f"cannot read INFO from {url}: {exc}") from None
    finally:
        client.close()
    calls: dict[str, int] = {}
    for key, stats in second.items():
        if not key.startswith("cmdstat_") or not isinstance(stats, dict):
            continue
        before = first.get(key, {}).get("calls", 0) if isinstance(first.get(key), dict) else 0
        delta = int(stats.get("calls", 0)) - int(before)
        name = key[len("cmdstat_") :]
        if delta > 0 and name != "info":  # our own INFO calls
            calls[name] = delta
    return Capture(url=url, seconds=seconds, version=version, calls=calls)


def _toml_list(args: list[str]) -> str:
    return "[" + ", ".join(_toml_str(a) for a in args) + "]"


def _toml_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def workload_text(capture: Capture, name: str) -> str:
    """A mix workload file (TOML) with the observed ratios and what to fill in."""
    total = sum(capture.calls.values())
    if total == 0:
        raise CannotMeasure(
            f"{capture.url} ran no commands in {capture.seconds:g} s: capture while it is busy"
        )
    shares = {cmd: n / total for cmd, n in capture.calls.items()}
    replayed = {
        cmd.upper(): share
        for cmd, share in shares.items()
        if share >= MIN_SHARE and cmd.upper() in TEMPLATES
    }
    skipped = sorted(c for c in shares if c.upper() not in replayed)
    if not replayed:
        raise CannotMeasure(
            f"none of the commands {capture.url} ran has a template to replay "
            f"({', '.join(sorted(shares))}); write the mix by hand (docs/workloads.md)"
        )
    smallest = min(replayed.values())
    ratios = {c: max(1, min(MAX_RATIO, round(s / smallest))) for c, s in replayed.items()}
    floor = max(
        (commands.version_tuple(commands.since([c]) or "2.8") for c in ratios), default=(2, 8)
    )
    lines = [
        f"# Captured by `regtrack mix capture` from {capture.url} (Redis {capture.version}) over",
        f"# {capture.seconds:g} s: {total} commands, {total / capture.seconds:,.0f} per second.",
        "# The ratios are what the server ran. FILL IN what INFO cannot show: key names and",
        "# patterns (__key__), payload size (data_size), the setup your queue needs, and",
        "# whether commands belong in separate processes. docs/workloads.md explains the format.",
    ]
    if skipped:
        lines.append("# Not replayed (no template, or under 0.5% of the traffic):")
        lines += [f"#   {c}: {capture.calls[c]} calls ({100 * shares[c]:.1f}%)" for c in skipped]
    lines += [
        f"name = {_toml_str(name)}",
        'kind = "mix"',
        f'description = "Captured from {capture.url}"',
        f'min_redis = "{".".join(str(p) for p in floor)}"',
        "data_size = 128",
        "keys = 100000",
        "clients = 50",
        "pipelines = [1, 10]",
        "",
    ]
    if NEEDS_GROUP & set(ratios):
        lines += [
            "[[setup]]   # consumer group for the stream commands",
            _setup_line(["XGROUP", "CREATE", "stream", "group", "$", "MKSTREAM"]),
            "",
        ]
    blocking = [c for c in ratios if commands.blocks(TEMPLATES[c])]
    others = [c for c in ratios if c not in blocking]
    order = sorted(others, key=lambda c: -ratios[c])
    if blocking and others:
        lines += _process("main", order, ratios) + _process("blocking", blocking, ratios)
    else:
        for cmd in order or blocking:
            lines += _command("[[commands]]", cmd, ratios[cmd])
    return "\n".join(lines).rstrip() + "\n"


def _setup_line(args: list[str]) -> str:
    return f"command = {_toml_list(args)}"


def _command(header: str, cmd: str, ratio: int) -> list[str]:
    return [header, f"args = {_toml_list(TEMPLATES[cmd])}", f"ratio = {ratio}", ""]


def _process(name: str, cmds: list[str], ratios: dict[str, int]) -> list[str]:
    out = ["[[process]]", f"name = {_toml_str(name)}", ""]
    for cmd in cmds:
        out += _command("[[process.commands]]", cmd, ratios[cmd])
    return out


def summary(capture: Capture) -> dict[str, Any]:
    total = sum(capture.calls.values())
    return {
        "commands": total,
        "per_second": total / capture.seconds if capture.seconds else 0.0,
        "top": sorted(capture.calls.items(), key=lambda kv: -kv[1])[:5],
    }
