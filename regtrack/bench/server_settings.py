"""Every version runs with the server settings asked for, or the run does not start.

Before the first trial each version's server is started once without the settings and
asked (``CONFIG GET``) which of them it knows: an unknown one is an error naming the
version (exit 2), or, marked optional (``KEY?=VALUE``), dropped for that version with a
warning. Then it is started with them and every value is read back: a server that
starts but ignores or rewrites a setting would otherwise be measured under a
configuration nobody asked for. What each version runs with is kept in its target's
``server_config`` (with_settings), which the runner applies and the run stores: ``check``
answers a new Job of new Targets, never changing the plan it was given.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from regtrack.bench.job import Job
from regtrack.bench.measuring import Measuring
from regtrack.bench.runtimes.base import ServerStartError
from regtrack.core.errors import BadInput
from regtrack.targets.versions import Target
from regtrack.workloads import server_config
from regtrack.workloads.server_config import Setting

# redis.conf memory units (k = 1000, kb = 1024, ...): CONFIG GET answers in bytes.
_UNITS = {"": 1, "k": 1000, "kb": 1024, "m": 10**6, "mb": 1 << 20, "g": 10**9, "gb": 1 << 30}
_MEMORY_RE = re.compile(r"^(\d+)\s*(k|kb|m|mb|g|gb)?$")


def same(asked: str, got: str) -> bool:
    """Whether the server's answer is the value asked for, as redis.conf reads it."""
    a, g = " ".join(asked.lower().split()), " ".join(got.lower().split())
    if a == g:
        return True
    m = _MEMORY_RE.match(a)
    return bool(m) and g.isdigit() and int(m.group(1)) * _UNITS[m.group(2) or ""] == int(g)


def with_settings(target: Target, table: dict[str, Any]) -> Target:
    """``target`` running with the server settings ``table`` (server_config.as_table; {}:
    the version's defaults): a new Target, the one given is left as planned."""
    return dataclasses.replace(target, server_config=table)


def check(job: Job, measuring: Measuring, say: Callable[[str], None]) -> Job:
    """Validate the run's settings against every version (each started through
    ``measuring``); the job whose targets record what each runs with."""
    wanted = server_config.from_stored(job.workload.server)
    if not wanted:
        return job
    threads = server_config.io_threads(wanted)
    if threads > 1 and job.metric != "throughput":
        say(
            f"warning: io-threads {threads} under callgrind: instructions per op count every "
            "thread, waiting included (Redis 6 and 7's I/O threads spin up to 1,000,000 "
            "times before they sleep: 7.0.15 at io-threads 2 counted 29x its io-threads 1), and "
            "windows rarely agree (docs/workloads.md); judge I/O threads by throughput"
        )
    targets = []
    for target in job.targets:
        applied, version = _known(job, measuring, target, wanted, say)
        targets.append(with_settings(target, server_config.as_table(applied)))
        _read_back(job, measuring, targets[-1], applied, version)
    return dataclasses.replace(job, targets=targets)


def _known(
    job: Job,
    measuring: Measuring,
    target: Target,
    wanted: list[Setting],
    say: Callable[[str], None],
) -> tuple[list[Setting], str]:
    defaults = with_settings(target, {})  # the version's defaults, to ask what it knows
    with measuring.plain_server(job, defaults, "settings") as server:
        version = str((server.info or {}).get("redis_version") or target.label)
        client = server.client(timeout=10)
        try:
            known = {s.name for s in wanted if client.config_get(s.name)}
        finally:
            client.close()
    applied = []
    for s in wanted:
        if s.name in known:
            applied.append(s)
        elif s.optional:
            say(f"warning: {target.label} ({version}) does not know server setting {s.name}: "
                "it runs without it (marked optional)")  # fmt: skip
        else:
            raise BadInput(
                f"server setting {s.name}: {target.label} (Redis {version}) does not know it; "
                f"remove it, or mark it optional ({s.name}?={s.value}) to run "
                f"{target.label} without it"
            )
    return applied, version


def _read_back(
    job: Job, measuring: Measuring, target: Target, applied: list[Setting], version: str
) -> None:
    """``target`` (with its settings) started once more, each value read back."""
    shown = server_config.caption(server_config.as_table(applied))
    try:
        with measuring.plain_server(job, target, "settings") as server:
            client = server.client(timeout=10)
            try:
                got = {s.name: client.config_get(s.name).get(s.name, "") for s in applied}
            finally:
                client.close()
    except ServerStartError as exc:
        raise BadInput(
            f"{target.label} (Redis {version}) does not start with {shown}: {exc}"
        ) from None
    for s in applied:
        if not same(s.value, got[s.name]):
            raise BadInput(
                f"server setting {s.name}: asked {s.value!r}, but {target.label} (Redis "
                f"{version}) runs with {got[s.name]!r}; give the value as CONFIG GET shows it"
            )
