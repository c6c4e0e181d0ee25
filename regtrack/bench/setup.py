"""Put a live server in the state a workload measures from: keys written, setup run.

This runs on the server under test (bench work); the workload files only say what to do.
A workload file may be a pull request's, so what it sends goes over a connection of the
user the load generators log in as (``default``, without the @admin commands:
bench/runtimes/access.py), never over regtrack's administrator connection: a setup step
``CONFIG SET dir`` is refused by the server itself, on Redis 6.x too. The workload model
names those commands before anything starts (workloads/commands.REFUSED); the server's
refusal is the backstop.
"""

from __future__ import annotations

import time

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.core.redis_options import QUIET_CONNECT
from regtrack.workloads.driver import DriverWorkload
from regtrack.workloads.lifecycle import LifecycleWorkload
from regtrack.workloads.model import GetPipelineWorkload, MixWorkload, Workload
from regtrack.workloads.points import get_keys, substitute

POPULATE_BATCH = 1000
# Payload bytes queued before regtrack waits for the replies (populate, per-key setup):
# with 64 MiB values (core/limits.DATA_SIZE) a batch is one value, and the server's query
# buffer never holds more than this from regtrack.
BATCH_BYTES = 64 * 1024 * 1024


def prepare_server(client: redis.Redis, workload: Workload, loadgen: str) -> dict[str, str]:
    """Put the server in the state the workload measures from; returns saved replies
    (e.g. a script's SHA) for the commands to use. ``client`` is regtrack's control
    connection: the work runs as the load user of the same server (load_user)."""
    loader = load_user(client)
    try:
        if isinstance(workload, GetPipelineWorkload):
            populate(loader, workload, loadgen)
            return {}
        if isinstance(workload, LifecycleWorkload):
            lifecycle_setup(loader, workload)
            return {}
        if isinstance(workload, DriverWorkload):
            return {}  # the user's program sets up what it needs
        return run_setup(loader, workload)
    finally:
        loader.close()


def load_user(client: redis.Redis) -> redis.Redis:
    """A connection to ``client``'s server without credentials: the ``default`` user the
    load generators are, with their rights and no more. Unnamed, because Redis 6.x
    refuses CLIENT (SETNAME too) to a user without @admin."""
    kw = client.connection_pool.connection_kwargs
    return redis.Redis(
        host=kw["host"],
        port=kw["port"],
        socket_timeout=kw.get("socket_timeout"),
        socket_connect_timeout=kw.get("socket_connect_timeout"),
        decode_responses=True,
        retry=Retry(NoBackoff(), 0),
        **QUIET_CONNECT,
    )


def _fits(size: int, most: int) -> int:
    """How many items of ``size`` bytes a batch takes: ``most``, fewer to stay within
    BATCH_BYTES, never none."""
    return max(1, min(most, BATCH_BYTES // max(1, size)))


def populate(client: redis.Redis, workload: GetPipelineWorkload, loadgen: str) -> None:
    """Write every key the GETs will read, then check the server holds exactly those."""
    value = b"x" * workload.data_size  # bytes: redis-py sends it without a copy per key
    per_mset = _fits(workload.data_size, POPULATE_BATCH)
    per_execute = per_mset * _fits(workload.data_size * per_mset, 20)
    pipe = client.pipeline(transaction=False)
    batch: dict[str, bytes] = {}
    for i, key in enumerate(get_keys(loadgen, workload.keys), start=1):
        batch[key] = value
        if len(batch) == per_mset:
            pipe.mset(batch)
            batch = {}
        if i % per_execute == 0:
            pipe.execute()
    if batch:
        pipe.mset(batch)
    pipe.execute()
    size = client.dbsize()
    if size != workload.keys:
        raise CannotMeasure(
            f"populate wrote {workload.keys} keys but the server holds {size}: "
            "is maxmemory set with eviction?"
        )
    settle_rehash(client, workload.keys)


def run_setup(client: redis.Redis, workload: MixWorkload) -> dict[str, str]:
    """The workload's setup steps, in order, through redis-py (not timed)."""
    saved: dict[str, str] = {}
    payload = b"x" * workload.data_size
    per_execute = _fits(workload.data_size, POPULATE_BATCH)
    for i, step in enumerate(workload.setup):
        args = [substitute(a, saved) for a in step.command]
        try:
            if step.per_key:
                pipe = client.pipeline(transaction=False)
                for n in range(1, workload.keys + 1):
                    pipe.execute_command(*_fill(args, n, payload))
                    if n % per_execute == 0:
                        pipe.execute()
                pipe.execute()
                continue
            reply = client.execute_command(*_fill(args, 1, payload))
        except redis.exceptions.NoPermissionError as exc:
            raise BadInput(
                f"workload {workload.name}: setup[{i}] {' '.join(args)[:80]} was refused "
                f"({exc}): a workload runs as a user without administrative commands"
            ) from None
        except redis.ResponseError as exc:
            raise CannotMeasure(
                f"workload {workload.name}: setup[{i}] {' '.join(args)[:80]} failed: {exc}"
            ) from None
        if step.save_as:
            saved[step.save_as] = reply if isinstance(reply, str) else str(reply)
    settle_rehash(client, int(client.dbsize()))
    return saved


def lifecycle_setup(client: redis.Redis, workload: LifecycleWorkload) -> None:
    """A lifecycle's setup commands (a consumer group, say), in order; ``${now}`` is the
    one placeholder a setup may use (workloads/lifecycle.py)."""
    now = f"{time.time():.3f}"
    for i, command in enumerate(workload.setup_commands()):
        args = [a.replace("${now}", now) for a in command]
        try:
            client.execute_command(*args)
        except redis.exceptions.NoPermissionError as exc:
            raise BadInput(
                f"workload {workload.name}: setup[{i}] {' '.join(args)[:80]} was refused "
                f"({exc}): a workload runs as a user without administrative commands"
            ) from None
        except redis.ResponseError as exc:
            raise CannotMeasure(
                f"workload {workload.name}: setup[{i}] {' '.join(args)[:80]} failed: {exc}"
            ) from None


def _fill(args: list[str], n: int, payload: bytes) -> list[str | bytes]:
    return [payload if a == "__data__" else a.replace("__key__", str(n)) for a in args]


def settle_rehash(client: redis.Redis, keys: int) -> None:
    """Finish the keyspace's incremental rehash before anything is measured.

    Populating N keys leaves the main hash table half-way through its last resize; each
    lookup then does a rehash step, and serverCron adds more as time passes. Measured
    during that, instructions per GET depend on when the trial starts (2% apart between
    runs of one build at 100k keys under callgrind). RANDOMKEY does one rehash step per
    call in every version, and the old table has at most N buckets, so N calls finish it.
    """
    pipe = client.pipeline(transaction=False)
    for start in range(0, keys, POPULATE_BATCH):
        for _ in range(min(POPULATE_BATCH, keys - start)):
            pipe.randomkey()
        pipe.execute()
