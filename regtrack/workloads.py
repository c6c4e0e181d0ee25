"""Workload points, the data they need on the server, and what makes a trial's replies wrong.

redis-benchmark's ``-t get -r N`` reads ``key:%012d`` keys and reports a plausible rate even
when every GET misses, so the keys are written first and misses make a trial invalid.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import redis

from regtrack.config import GetPipelineWorkload
from regtrack.errors import CannotMeasure

POPULATE_BATCH = 1000


@dataclass(frozen=True)
class Point:
    """One measurable setting of a workload, e.g. get-pipeline at pipeline=10."""

    workload: str
    label: str
    params: dict[str, Any] = field(hash=False, compare=False)


def points(workload: GetPipelineWorkload) -> list[Point]:
    return [
        Point(
            workload=workload.name,
            label=f"pipeline={depth}",
            params={
                "command": "GET",
                "pipeline": depth,
                "clients": workload.clients,
                "threads": workload.threads,
                "data_size": workload.data_size,
                "keyspace": workload.keys,
            },
        )
        for depth in workload.pipelines
    ]


def benchmark_key(i: int) -> str:
    """The key redis-benchmark builds from ``key:__rand_int__`` with ``-r``."""
    return f"key:{i:012d}"


def populate(client: redis.Redis, workload: GetPipelineWorkload) -> None:
    """Write every key the GETs will read, then check the server holds exactly those."""
    value = "x" * workload.data_size
    pipe = client.pipeline(transaction=False)
    for start in range(0, workload.keys, POPULATE_BATCH):
        stop = min(start + POPULATE_BATCH, workload.keys)
        pipe.mset({benchmark_key(i): value for i in range(start, stop)})
        if (start // POPULATE_BATCH) % 20 == 19:
            pipe.execute()
    pipe.execute()
    size = client.dbsize()
    if size != workload.keys:
        raise CannotMeasure(
            f"populate wrote {workload.keys} keys but the server holds {size}: "
            "is maxmemory set with eviction?"
        )
    settle_rehash(client, workload.keys)


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


def reply_problems(delta: dict[str, Any]) -> list[str]:
    """Reasons the replies of a trial cannot be trusted (misses, error replies)."""
    problems = []
    misses = int(delta.get("keyspace_misses", 0))
    if misses > 0:
        problems.append(f"{misses} GET misses (keys not populated or evicted)")
    errors = int(delta.get("error_replies", 0))
    if errors > 0:
        problems.append(f"{errors} error replies")
    return problems
