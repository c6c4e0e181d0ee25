"""`regtrack mix capture`: a workload file from what a live server is actually doing.

Read-only by construction: the connection sends nothing but INFO (RESP2, no HELLO, no
CLIENT SETNAME/SETINFO), twice, N seconds apart, and one CONFIG GET per setting of
``CAPTURED_SETTINGS`` (never a pattern, so never a secret). The per-command call deltas become the
ratios of a mix; the arguments are templates the user must check (key patterns and
payload sizes cannot be seen in INFO).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import redis
from redis.connection import parse_url

from regtrack.core import redact
from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.core.redis_options import QUIET_CONNECT
from regtrack.workloads import commands

PASSWORD_VARIABLE = "REGTRACK_REDIS_PASSWORD"
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
# The performance-relevant settings `mix capture` reads (CONFIG GET, one name at a time)
# and writes into the file's [server] table, so a team replays its traffic against its own
# configuration. Persistence, I/O threads, eviction, the cron, lazy freeing, encodings.
# Never secrets (requirepass, masterauth, ACL files), paths or network settings.
CAPTURED_SETTINGS = (
    "appendonly", "appendfsync", "save", "maxmemory", "maxmemory-policy", "hz",
    "aof-use-rdb-preamble", "no-appendfsync-on-rewrite", "auto-aof-rewrite-percentage",
    "auto-aof-rewrite-min-size", "io-threads", "io-threads-do-reads", "maxmemory-samples",
    "dynamic-hz", "active-expire-effort", "activedefrag", "lazyfree-lazy-eviction",
    "lazyfree-lazy-expire", "lazyfree-lazy-server-del", "lazyfree-lazy-user-del",
    "lazyfree-lazy-user-flush", "hash-max-listpack-entries", "hash-max-ziplist-entries",
    "list-max-listpack-size", "list-max-ziplist-size", "set-max-intset-entries",
    "zset-max-listpack-entries", "zset-max-ziplist-entries", "stream-node-max-bytes",
    "stream-node-max-entries",
)  # fmt: skip
# Known to every version regtrack measures; the others are written optional ("name?"),
# so a version without them replays without them.
EVERYWHERE = {"appendonly", "appendfsync", "save", "maxmemory", "maxmemory-policy", "hz"}


@dataclass(frozen=True)
class Capture:
    url: str  # redacted: it is written into the workload file and shown
    seconds: float
    version: str
    calls: dict[str, int]  # command (as commandstats names it) -> calls in the interval
    settings: dict[str, str] = field(default_factory=dict)  # CAPTURED_SETTINGS it knows
    settings_problem: str | None = None  # why they could not be read (CONFIG refused)

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    @property
    def per_second(self) -> float:
        return self.total_calls / self.seconds if self.seconds else 0.0

    def most_called(self, n: int = 5) -> list[tuple[str, int]]:
        """The ``n`` commands called most, with their calls, most first."""
        return sorted(self.calls.items(), key=lambda kv: -kv[1])[:n]


def password(file: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The server's password from the first line of ``file``, else $REGTRACK_REDIS_PASSWORD,
    else None (the URL's own, if any). Both keep it off the command line, which every local
    user can read (/proc/PID/cmdline)."""
    if file is not None:
        try:
            lines = Path(file).read_text().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            why = getattr(exc, "strerror", None) or "not text"
            raise BadInput(f"--password-file {file}: {why}") from None
        if not lines or not lines[0]:
            raise BadInput(f"--password-file {file}: its first line is empty")
        return lines[0]
    return (os.environ if environ is None else environ).get(PASSWORD_VARIABLE) or None


def connect(url: str, secret: str | None, decode: bool = True) -> redis.Redis:
    try:
        options = parse_url(url)
    except ValueError as exc:
        problem = str(exc).replace(url, redact.url(url))
        raise BadInput(f"--url {redact.url(url)}: {problem}; use redis://HOST:PORT") from None
    options.pop("connection_class", None)  # rediss:// (TLS) keeps its ssl settings
    if secret is not None:
        options["password"] = secret  # the URL's user name (an ACL user) is kept
    return redis.Redis(**options, socket_timeout=10, decode_responses=decode, **QUIET_CONNECT)


def sample(
    url: str, seconds: float, secret: str | None = None, during: Callable[[], float] | None = None
) -> Capture:
    """Two INFO readings ``seconds`` apart: the commands the server ran in between.
    ``secret`` is the password (see ``password``), used instead of the URL's. ``during``,
    if given, runs between the readings instead of the wait and says how long it took
    (the MONITOR sample, traffic/sampled.py)."""
    if seconds <= 0:
        raise BadInput("--seconds must be positive")
    with reading(url, secret) as client:
        first = client.info("commandstats")
        if during is None:
            time.sleep(seconds)
        else:
            seconds = during()
        second = client.info("commandstats")
        version = str(client.info("server").get("redis_version", "unknown"))
        settings, problem = _settings(client)
    calls: dict[str, int] = {}
    for key, stats in second.items():
        if not key.startswith("cmdstat_") or not isinstance(stats, dict):
            continue
        before = first.get(key, {}).get("calls", 0) if isinstance(first.get(key), dict) else 0
        delta = int(stats.get("calls", 0)) - int(before)
        name = key[len("cmdstat_") :]
        if delta > 0 and name != "info":  # our own INFO calls
            calls[name] = delta
    return Capture(redact.url(url), seconds, version, calls, settings, problem)


@contextlib.contextmanager
def reading(url: str, secret: str | None) -> Iterator[redis.Redis]:
    """A connection to the live server for the block; a wrong password or an unreachable
    server ends it with one line (exit 2, exit 3), the credentials never in it."""
    client = connect(url, secret)
    shown = redact.url(url)
    try:
        yield client
    except redis.AuthenticationError as exc:
        raise BadInput(
            f"{shown}: {_scrub(exc, url, secret)}; give the password in a file "
            f"(--password-file) or in ${PASSWORD_VARIABLE}"
        ) from None
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        raise CannotMeasure(f"cannot read INFO from {shown}: {_scrub(exc, url, secret)}") from None
    finally:
        client.close()


def _settings(client: redis.Redis) -> tuple[dict[str, str], str | None]:
    """CAPTURED_SETTINGS as the server reports them; a server that refuses CONFIG (a
    managed service, an ACL) still gives its mix, with the reason instead."""
    found: dict[str, str] = {}
    for name in CAPTURED_SETTINGS:
        try:
            reply = client.config_get(name)
        except redis.ResponseError as exc:
            return found, f"CONFIG GET refused: {str(exc).splitlines()[0][:120]}"
        if name in reply:
            found[name] = str(reply[name])
    return found, None


def _scrub(exc: BaseException, url: str, secret: str | None = None) -> str:
    """An error's text without the credentials, should the library have echoed them."""
    _, userinfo, _, query = redact.parts(url)
    text = str(exc).replace(url, redact.url(url))
    for hidden in (userinfo, *userinfo.split(":", 1), query, secret or ""):
        if len(hidden) >= 3:  # never blank out every "a" of a message
            text = text.replace(hidden, "***")
    return text


def toml_list(args: list[str]) -> str:
    return "[" + ", ".join(toml_str(a) for a in args) + "]"


def toml_str(text: str) -> str:
    """A TOML basic string that parses whatever ``text`` holds: quotes, backslashes and
    control characters escaped, a lone surrogate (undecodable argv) replaced."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\\ufffd")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def comment(text: str) -> str:
    """Text from the server (its version, command names) made safe for a # comment."""
    return "".join(c if c.isprintable() else "?" for c in text)


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
    lines = _header(capture, total, shares, skipped)
    lines += [
        f"name = {toml_str(name)}",
        'kind = "mix"',
        f"description = {toml_str('Captured from ' + capture.url)}",
        f'min_redis = "{".".join(str(p) for p in floor)}"',
        "data_size = 128",
        "keys = 100000",
        "clients = 50",
        "pipelines = [1, 10]",
        "",
        *server_table(capture),
    ]
    lines += _commands(ratios)
    return "\n".join(lines).rstrip() + "\n"


def _header(
    capture: Capture, total: int, shares: dict[str, float], skipped: list[str]
) -> list[str]:
    """Where the mix comes from, what to fill in, and what was left out."""
    lines = [
        f"# Captured by `regtrack mix capture` from {comment(capture.url)} "
        f"(Redis {comment(capture.version)}) over",
        f"# {capture.seconds:g} s: {total} commands, {total / capture.seconds:,.0f} per second.",
        "# The ratios are what the server ran. FILL IN what INFO cannot show: key names and",
        "# patterns (__key__), payload size (data_size), the setup your queue needs, and",
        "# whether commands belong in separate processes. docs/workloads.md explains the format.",
    ]
    if skipped:
        lines.append("# Not replayed (no template, or under 0.5% of the traffic):")
        lines += [
            f"#   {comment(c)}: {capture.calls[c]} calls ({100 * shares[c]:.1f}%)" for c in skipped
        ]
    return lines


def _commands(ratios: dict[str, int]) -> list[str]:
    """The setup the stream commands need, then the commands: blocking ones in a process
    of their own, so they do not stall the others."""
    lines = []
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
        return lines + _process("main", order, ratios) + _process("blocking", blocking, ratios)
    for cmd in order or blocking:
        lines += _command("[[commands]]", cmd, ratios[cmd])
    return lines


def server_table(capture: Capture) -> list[str]:
    """The [server] table: the live server's settings, replayed with every version."""
    if capture.settings_problem:
        return [f"# [server] not captured: {comment(capture.settings_problem)}", ""]
    if not capture.settings:
        return []
    lines = [
        f"[server]   # CONFIG GET on {comment(capture.url)} (Redis {comment(capture.version)});",
        "# a name ending in ? is skipped, with a warning, by a version that does not know it",
    ]
    for name, value in capture.settings.items():
        key = name if name in EVERYWHERE else toml_str(f"{name}?")
        lines.append(f"{key} = {toml_str(value)}")
    return [*lines, ""]


def _setup_line(args: list[str]) -> str:
    return f"command = {toml_list(args)}"


def _command(header: str, cmd: str, ratio: int) -> list[str]:
    return [header, f"args = {toml_list(TEMPLATES[cmd])}", f"ratio = {ratio}", ""]


def _process(name: str, cmds: list[str], ratios: dict[str, int]) -> list[str]:
    out = ["[[process]]", f"name = {toml_str(name)}", ""]
    for cmd in cmds:
        out += _command("[[process.commands]]", cmd, ratios[cmd])
    return out
