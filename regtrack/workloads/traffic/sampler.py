"""A bounded, read-only sample of a live server's commands (MONITOR).

Its own connection sends ``COMMAND`` (the server's key table, read only) and ``MONITOR``,
then only reads: it stops by itself after ``seconds`` or ``max_commands`` commands,
whichever comes first, and on Ctrl-C, closing the MONITOR connection each time. Each
line is parsed and redacted as it arrives (monitor_line.py), so no argument of it is kept.
MONITOR costs a busy server work for every command it runs (benchmarks/capture_overhead.py
measures how much): keep the bound short.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import redis

from regtrack.core import interrupts
from regtrack.workloads.traffic import keyspecs
from regtrack.workloads.traffic.monitor_line import Observed, parse
from regtrack.workloads.traffic.redaction import Redactor

MAX_COMMANDS = 1_000_000  # the most one sample keeps in memory
POLL_S = 0.1
# MONITOR's output waits in the server's memory until read (a normal client's output
# buffer has no limit by default): a sample reading this far behind the server stops.
MAX_LAG_S = 1.0


@dataclass(frozen=True)
class Sample:
    """What one sample saw, redacted, and why it stopped."""

    records: tuple[Observed, ...]
    seconds: float  # how long MONITOR ran
    stopped_by: str  # "time", "count", or "lag" (it fell MAX_LAG_S behind the server)
    unparsed: int  # lines that were not a command (none expected)
    secrets_dropped: int  # commands whose arguments were dropped unread
    keep_names: bool
    key_table: str  # where key positions came from: "server (COMMAND)" or "built-in"


def take(
    client: redis.Redis, seconds: float, max_commands: int, keep_names: bool = False
) -> Sample:
    """MONITOR over a connection of ``client``'s pool (which must not decode replies) until
    ``seconds`` pass or ``max_commands`` commands arrive."""
    redactor = Redactor(keep_names=keep_names)
    source = "built-in"
    try:
        redactor.key_table = keyspecs.from_command_table(client.command())
        source = "server (COMMAND)"
    except redis.ResponseError:
        pass  # COMMAND refused (an ACL): the built-in table
    connection = client.connection_pool.get_connection()
    records: list[Observed] = []
    unparsed = 0
    stopped_by = "time"
    first = (0.0, 0.0)  # when the first record was read, and its server time
    try:
        connection.send_command("MONITOR")
        reply = connection.read_response()
        if reply not in (b"OK", "OK"):
            raise redis.ResponseError(f"MONITOR answered {reply!r}")
        started = time.monotonic()
        deadline = started + seconds
        while len(records) < max_commands:
            interrupts.check()
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if not connection.can_read(timeout=min(left, POLL_S)):
                continue
            line = connection.read_response()
            record = parse(line if isinstance(line, bytes) else str(line).encode(), redactor)
            if record is None:
                unparsed += 1
                continue
            records.append(record)
            if len(records) == 1:
                first = (time.monotonic(), record.time)
            elif (time.monotonic() - first[0]) - (record.time - first[1]) > MAX_LAG_S:
                stopped_by = "lag"  # the server is holding our backlog in its memory
                break
        else:
            stopped_by = "count"
        elapsed = time.monotonic() - started
    finally:
        connection.disconnect()  # MONITOR ends with its connection, never back to the pool
    return Sample(
        records=tuple(records),
        seconds=elapsed,
        stopped_by=stopped_by,
        unparsed=unparsed,
        secrets_dropped=redactor.secrets_dropped,
        keep_names=keep_names,
        key_table=source,
    )
