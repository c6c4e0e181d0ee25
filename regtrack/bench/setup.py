"""Put a live server in the state a workload measures from: keys written, setup run.

This runs on the server under test (bench work); the workload files only say what to do.
"""

from __future__ import annotations

import redis

from regtrack.core.errors import CannotMeasure
from regtrack.workloads.model import GetPipelineWorkload, MixWorkload, Workload
from regtrack.workloads.points import get_keys, substitute

POPULATE_BATCH = 1000


def prepare_server(client: redis.Redis, workload: Workload, loadgen: str) -> dict[str, str]:
    """Put the server in the state the workload measures from; returns saved replies
    (e.g. a script's SHA) for the commands to use."""
    if isinstance(workload, GetPipelineWorkload):
        populate(client, workload, loadgen)
        return {}
    return run_setup(client, workload)


def populate(client: redis.Redis, workload: GetPipelineWorkload, loadgen: str) -> None:
    """Write every key the GETs will read, then check the server holds exactly those."""
    value = "x" * workload.data_size
    pipe = client.pipeline(transaction=False)
    batch: dict[str, str] = {}
    for i, key in enumerate(get_keys(loadgen, workload.keys), start=1):
        batch[key] = value
        if len(batch) == POPULATE_BATCH:
            pipe.mset(batch)
            batch = {}
        if i % (20 * POPULATE_BATCH) == 0:
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
    payload = "x" * workload.data_size
    for i, step in enumerate(workload.setup):
        args = [substitute(a, saved) for a in step.command]
        try:
            if step.per_key:
                pipe = client.pipeline(transaction=False)
                for n in range(1, workload.keys + 1):
                    pipe.execute_command(*_fill(args, n, payload))
                    if n % POPULATE_BATCH == 0:
                        pipe.execute()
                pipe.execute()
                continue
            reply = client.execute_command(*_fill(args, 1, payload))
        except redis.ResponseError as exc:
            raise CannotMeasure(
                f"workload {workload.name}: setup[{i}] {' '.join(args)[:80]} failed: {exc}"
            ) from None
        if step.save_as:
            saved[step.save_as] = reply if isinstance(reply, str) else str(reply)
    settle_rehash(client, int(client.dbsize()))
    return saved


def _fill(args: list[str], n: int, payload: str) -> list[str]:
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
