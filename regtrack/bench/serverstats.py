"""What the server itself counted during a trial (INFO deltas).

Load generators count error replies and misses as successful operations, so the server's
own counters are the check: keyspace misses, error replies, calls per command, CPU used.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import redis

from regtrack.bench.runtimes.base import CONTROL_NAME
from regtrack.core import procs
from regtrack.core.records import CommandCounts, ServerDelta


@dataclass
class Counters:
    at: float
    stats: dict[str, float]
    commands: dict[str, dict[str, float]] = field(default_factory=dict)
    errors: dict[str, float] = field(default_factory=dict)


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def snapshot(client: redis.Redis) -> Counters:
    stats: dict[str, float] = {}
    for section in ("stats", "cpu", "persistence"):
        for key, value in client.info(section).items():
            number = _number(value)
            if number is not None:
                stats[key] = number
    commands: dict[str, dict[str, float]] = {}
    for key, value in client.info("commandstats").items():
        if key.startswith("cmdstat_") and isinstance(value, dict):
            commands[key[len("cmdstat_") :]] = {
                k: n for k, v in value.items() if (n := _number(v)) is not None
            }
    errors: dict[str, float] = {}
    for key, value in client.info("errorstats").items():  # empty before Redis 6.2
        if key.startswith("errorstat_") and isinstance(value, dict):
            errors[key[len("errorstat_") :]] = _number(value.get("count")) or 0.0
    return Counters(at=time.monotonic(), stats=stats, commands=commands, errors=errors)


def _counts_since(before: dict[str, float], after: dict[str, float]) -> CommandCounts:
    def since(key: str) -> float:
        return after.get(key, 0.0) - before.get(key, 0.0)

    return CommandCounts(
        since("calls"), since("usec"), since("failed_calls"), since("rejected_calls")
    )


def delta(before: Counters, after: Counters) -> ServerDelta:
    """Differences that matter for validity and attribution, plus per-command calls."""

    def diff(key: str) -> float:
        return after.stats.get(key, 0.0) - before.stats.get(key, 0.0)

    wall = after.at - before.at
    cpu = diff("used_cpu_sys") + diff("used_cpu_user")
    commands = {}
    for name, figures in after.commands.items():
        counts = _counts_since(before.commands.get(name, {}), figures)
        if name != "info" and counts.calls > 0:
            commands[name] = counts
    errors = {
        name: count - before.errors.get(name, 0.0)
        for name, count in after.errors.items()
        if count - before.errors.get(name, 0.0) > 0
    }
    if "total_error_replies" in after.stats:
        error_replies = diff("total_error_replies")
    else:
        error_replies = sum(errors.values())
    # A background save or AOF rewrite forks and writes while the load runs: counted by
    # Redis 7+ (rdb_saves, aof_rewrites); before 7 one that ended during the trial moved
    # rdb_last_save_time or aof_base_size (set only by a save, a rewrite or loading); one
    # still running at either end is in progress, on any version.
    background = diff("rdb_saves") + diff("aof_rewrites")
    background += abs(diff("rdb_last_save_time")) + abs(diff("aof_base_size"))
    for key in ("rdb_bgsave_in_progress", "aof_rewrite_in_progress"):
        background += max(before.stats.get(key, 0.0), after.stats.get(key, 0.0))
    return ServerDelta(
        wall_s=wall,
        server_cpu_s=cpu,
        background_persistence=background,
        server_cpu_pct=100.0 * cpu / wall if wall > 0 else None,
        keyspace_hits=diff("keyspace_hits"),
        keyspace_misses=diff("keyspace_misses"),
        error_replies=error_replies,
        commands=commands,
        errors=errors,
    )


def command_calls(client: redis.Redis, command: str) -> int:
    """How many times the server has run ``command`` so far (INFO commandstats)."""
    stats = client.info("commandstats").get(f"cmdstat_{command.lower()}", {})
    return int(stats.get("calls", 0)) if isinstance(stats, dict) else 0


def wait_idle(client: redis.Redis, timeout: float = 60.0) -> bool:
    """Wait until only regtrack's own control connections are left.

    A pipelining load generator exits with requests still in flight; the server runs
    them after it has gone. Once every load generator connection is closed and freed,
    the server has run everything it was sent, so a count taken now is complete.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        clients = client.client_list()
        if all(c.get("name") == CONTROL_NAME for c in clients):
            return True
        time.sleep(0.01)
    return False


def wait_sockets(pid: int, at_most: int | None, client: redis.Redis, timeout: float = 60.0) -> bool:
    """Wait until server ``pid`` holds at most ``at_most`` sockets, its count before the
    load generator connected: every load generator connection is then closed and freed.

    A window that counts instructions waits this way because it runs nothing in the
    server: polling CLIENT LIST inside the window added a time-dependent 0.1-0.3% to
    instructions per op (seen under callgrind on a 2-vCPU VM). Where /proc/PID/fd cannot
    be read (``at_most`` None, or the count is gone) it falls back to CLIENT LIST
    (``wait_idle``).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        count = procs.socket_count(pid) if at_most is not None else None
        if count is None or at_most is None:
            return wait_idle(client, max(0.0, deadline - time.monotonic()))
        if count <= at_most:
            return True
        time.sleep(0.01)
    return False
