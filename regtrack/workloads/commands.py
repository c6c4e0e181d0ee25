"""What regtrack knows about Redis commands: since which version they exist, which block,
which a workload may not send.

Used to reject a mix before it runs against a server that lacks one of its commands, to
keep blocking commands out of a load generator process that also sends others (memtier
rotates commands per connection, so a BRPOP stalls the rotation), and to refuse a
workload file that would administer the server (it may be a pull request's).
"""

from __future__ import annotations

import re

# First Redis version with the command (the form a mix can use). Missing: assumed old.
SINCE: dict[str, str] = {
    "XADD": "5.0",
    "XREADGROUP": "5.0",
    "XREAD": "5.0",
    "XACK": "5.0",
    "XGROUP": "5.0",
    "XCLAIM": "5.0",
    "XPENDING": "5.0",
    "XLEN": "5.0",
    "XRANGE": "5.0",
    "XDEL": "5.0",
    "XTRIM": "5.0",
    "XINFO": "5.0",
    "ZPOPMIN": "5.0",
    "ZPOPMAX": "5.0",
    "BZPOPMIN": "5.0",
    "BZPOPMAX": "5.0",
    "UNLINK": "4.0",
    "XAUTOCLAIM": "6.2",
    "LMOVE": "6.2",
    "BLMOVE": "6.2",
    "GETDEL": "6.2",
    "GETEX": "6.2",
    "ZRANGESTORE": "6.2",
    "HRANDFIELD": "6.2",
    "SMISMEMBER": "6.2",
    "COPY": "6.2",
    "LPOS": "6.0.6",
    "FCALL": "7.0",
    "FCALL_RO": "7.0",
    "FUNCTION": "7.0",
    "EVAL_RO": "7.0",
    "EVALSHA_RO": "7.0",
    "LMPOP": "7.0",
    "BLMPOP": "7.0",
    "ZMPOP": "7.0",
    "BZMPOP": "7.0",
    "SINTERCARD": "7.0",
    "EXPIRETIME": "7.0",
    "HEXPIRE": "7.4",
    "HPEXPIRE": "7.4",
    "HGETDEL": "8.0",
    "HGETEX": "8.0",
    "HSETEX": "8.0",
}

KNOWN = set(SINCE) | {
    "GET", "SET", "SETNX", "SETEX", "PSETEX", "MGET", "MSET", "DEL", "EXISTS", "EXPIRE",
    "PEXPIRE", "TTL", "PTTL", "PERSIST", "INCR", "INCRBY", "DECR", "DECRBY", "APPEND",
    "STRLEN", "GETSET", "TYPE", "KEYS", "SCAN", "RENAME", "LPUSH", "RPUSH", "LPOP", "RPOP",
    "LLEN", "LRANGE", "LREM", "LTRIM", "LINDEX", "LSET", "RPOPLPUSH", "BRPOPLPUSH", "BLPOP",
    "BRPOP", "SADD", "SREM", "SMEMBERS", "SISMEMBER", "SCARD", "SPOP", "HSET", "HSETNX",
    "HGET", "HMSET", "HMGET", "HGETALL", "HDEL", "HEXISTS", "HINCRBY", "HLEN", "HKEYS",
    "HVALS", "ZADD", "ZREM", "ZRANGE", "ZREVRANGE", "ZRANGEBYSCORE", "ZREVRANGEBYSCORE",
    "ZCARD", "ZSCORE", "ZINCRBY", "ZCOUNT", "ZRANK", "ZREMRANGEBYSCORE", "MULTI", "EXEC",
    "DISCARD", "WATCH", "UNWATCH", "EVAL", "EVALSHA", "SCRIPT", "PUBLISH", "PING", "ECHO",
    "WAIT", "DBSIZE", "INFO", "CONFIG", "CLIENT", "OBJECT", "MEMORY", "EXPIREAT",
    "PEXPIREAT", "LPUSHX", "RPUSHX", "ZREMRANGEBYRANK", "SMOVE", "HINCRBYFLOAT", "SETRANGE",
    "GETRANGE", "ZREVRANK", "SINTER", "SUNION", "SDIFF", "SRANDMEMBER",
}  # fmt: skip

# What a workload may not send, in a setup step or a mix: Redis's @admin category (7.x and
# 8.x; 6.2's is a subset), which can write files (CONFIG SET dir + SAVE, ACL SAVE, CLUSTER
# SAVECONFIG), load code (MODULE LOAD), reconfigure, replicate or stop the server; and two
# @dangerous ones outside it: MIGRATE connects to any host, RESTORE parses a payload the
# server does not check by default (sanitize-dump-payload no). By command: None refuses it
# whole, a set only those subcommands (CONFIG GET is fine: redis-benchmark sends it).
# The server refuses the @admin ones too: setup and load generators log in as the user
# without them (bench/runtimes/access.py); this names them before anything starts.
REFUSED: dict[str, frozenset[str] | None] = {
    **dict.fromkeys(
        ["ACL", "BGREWRITEAOF", "BGSAVE", "DEBUG", "FAILOVER", "LASTSAVE", "LATENCY",
         "MIGRATE", "MODULE", "MONITOR", "PFDEBUG", "PFSELFTEST", "PSYNC", "REPLCONF",
         "REPLICAOF", "RESTORE", "RESTORE-ASKING", "ROLE", "SAVE", "SHUTDOWN", "SLAVEOF",
         "SLOWLOG", "SYNC"]
    ),
    "CONFIG": frozenset({"SET", "REWRITE", "RESETSTAT"}),
    "CLIENT": frozenset({"KILL", "LIST", "NO-EVICT", "PAUSE", "UNBLOCK", "UNPAUSE"}),
    "CLUSTER": frozenset(
        {"ADDSLOTS", "ADDSLOTSRANGE", "BUMPEPOCH", "COUNT-FAILURE-REPORTS", "DELSLOTS",
         "DELSLOTSRANGE", "FAILOVER", "FLUSHSLOTS", "FORGET", "MEET", "REPLICAS", "REPLICATE",
         "RESET", "SAVECONFIG", "SET-CONFIG-EPOCH", "SETSLOT", "SLAVES"}
    ),
}  # fmt: skip

ALWAYS_BLOCKING = {"BLPOP", "BRPOP", "BRPOPLPUSH", "BLMOVE", "BZPOPMIN", "BZPOPMAX", "BLMPOP",
                   "BZMPOP", "WAIT"}  # fmt: skip
SOMETIMES_BLOCKING = {"XREAD", "XREADGROUP"}  # with a BLOCK argument


def name(args: list[str] | tuple[str, ...]) -> str:
    return args[0].upper() if args else ""


def blocks(args: list[str] | tuple[str, ...]) -> bool:
    """Whether the command can wait for data (and so stall a rotation of commands)."""
    cmd = name(args)
    if cmd in ALWAYS_BLOCKING:
        return True
    return cmd in SOMETIMES_BLOCKING and any(a.upper() == "BLOCK" for a in args[1:])


def refused(args: list[str] | tuple[str, ...]) -> str | None:
    """The command as refused ("CONFIG SET", "SAVE"), or None when a workload may send it."""
    cmd = name(args)
    if cmd not in REFUSED:
        return None
    subcommands = REFUSED[cmd]
    if subcommands is None:
        return cmd
    sub = args[1].upper() if len(args) > 1 else ""
    return f"{cmd} {sub}" if sub in subcommands else None


def check(where: str, args: list[str], extra: list[str], min_redis: str) -> None:
    """What every workload file's command must be (mixes and lifecycles alike): not an
    administrative one, known (or listed in ``extra`` for a module's), no newer than the
    file's ``min_redis``. ValueError with one line naming ``where`` otherwise."""
    if found := refused(args):
        raise ValueError(
            f"{where}: {found} administers the server (it can write files, load "
            "code or reconfigure it); a workload's setup and commands may not send it"
        )
    if name(args) not in KNOWN and name(args) not in {e.upper() for e in extra}:
        raise ValueError(
            f"{where}: unknown command {args[0]!r}; check the spelling, or list it "
            "in extra_commands if a module provides it"
        )
    need = since(args)
    if need and version_tuple(need) > version_tuple(min_redis):
        raise ValueError(
            f"{where}: {name(args)} needs Redis {need} but min_redis is "
            f"{min_redis}; raise min_redis to {need}"
        )


def version_tuple(version: str) -> tuple[int, ...]:
    """ "7.0.15" -> (7, 0, 15); anything unparsable sorts as very new."""
    parts = re.findall(r"\d+", version)
    return tuple(int(p) for p in parts[:3]) if parts else (999,)


def since(args: list[str] | tuple[str, ...]) -> str | None:
    return SINCE.get(name(args))


def stat_names(args: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The INFO commandstats names a command may be counted under (lower case, and with
    ``|subcommand`` for container commands since 7.0)."""
    cmd = name(args).lower()
    if len(args) > 1 and cmd in {"xgroup", "xinfo", "script", "function", "client", "config",
                                 "object", "memory"}:  # fmt: skip
        return (cmd, f"{cmd}|{args[1].lower()}")
    return (cmd,)
