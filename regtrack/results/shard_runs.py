"""A shard's database read as hostile input: the runs that name their plan, each checked
for shape and bounds before anything is planned or copied from it."""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regtrack.core.errors import BadInput
from regtrack.results.store import Store

# What a shard's run may hold before it is planned or copied: a crafted database could
# otherwise ask for a plan of a billion repetitions (memory) or smuggle in any text.
MAX_REPETITIONS = 10_000
MAX_TARGETS = 500
MAX_PIPELINES = 1_000
MAX_TRIALS = 100_000_000  # a plan's trials, as a run stores their count
WORKLOAD_KINDS = ("get-pipeline", "mix")
METRICS = ("throughput", "instructions", "both")


@dataclass(frozen=True)
class ShardRun:
    """A run of an input database that measured (a shard of) a plan. ``path`` is the file
    given; ``read_from`` the private copy that is read (inputs are never changed)."""

    path: Path
    run_id: int
    plan_id: str
    shard: dict[str, Any] | None
    host: str
    status: str
    config: dict[str, Any]
    environment: dict[str, Any]
    loadgen: dict[str, Any]
    command: list[str]
    read_from: Path | None = None  # None: ``path`` itself

    @property
    def name(self) -> str:
        shard = self.shard
        return f"shard {shard['index']}/{shard['count']}" if shard else "the whole plan"


def private_copy(path: Path, folder: Path) -> Path:
    """``path`` (and its -wal, where a shard left its last commits) copied into
    ``folder``: what merge reads and may upgrade, so the input stays as it was."""
    copy = folder / f"input-{len(list(folder.iterdir()))}.db"
    wal = Path(f"{path}-wal")
    for source in (path, wal):  # an artifact's link could read any file on the host
        if source.is_symlink():
            raise BadInput(
                f"{source} is a symbolic link: regtrack reads a shard's database only as a "
                "file, never through a link; give the file itself"
            )
    try:
        shutil.copyfile(path, copy, follow_symlinks=False)
        if wal.is_file():
            shutil.copyfile(wal, Path(f"{copy}-wal"), follow_symlinks=False)
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror}") from None
    return copy


def shard_runs(path: Path, read_from: Path | None = None) -> list[ShardRun]:
    """The runs of ``path`` that name their plan (regtrack 0.1 runs with --shard or not),
    read from ``read_from`` (a private copy) and checked for shape and bounds."""
    source = read_from or path
    store = Store.open(source, create=False)
    try:
        try:
            runs = store.runs()
        except sqlite3.DatabaseError as exc:
            raise BadInput(f"{path}: its runs cannot be read ({type(exc).__name__})") from None
        found = []
        for run in reversed(runs):
            config = run["config"] or {}
            if not isinstance(config, dict) or not config.get("plan_id") or config.get("merged"):
                continue
            _check_config(path, run["id"], config)
            found.append(
                ShardRun(
                    path=path,
                    run_id=run["id"],
                    plan_id=str(config["plan_id"]),
                    shard=_shard(path, run["id"], config.get("shard")),
                    host=host_label(_mapping(run["environment"])),
                    status=str(run["status"]),
                    config=config,
                    environment=_mapping(run["environment"]),
                    loadgen=_mapping(run["loadgen"]),
                    command=[str(a) for a in run["command"] or []]
                    if isinstance(run["command"], list)
                    else [],
                    read_from=source,
                )
            )
        return found
    finally:
        store.close()


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def refuse(path: Path, run_id: int, what: str) -> BadInput:
    return BadInput(
        f"{path}: run {run_id} is not a shard regtrack could have written ({what}); "
        "merge the databases regtrack's runs produced"
    )


def _check_config(path: Path, run_id: int, config: dict[str, Any]) -> None:
    """The fields planning and copying rely on, with their types and bounds."""
    settings, workload = config.get("settings"), config.get("workload")
    targets = config.get("targets")
    if not isinstance(settings, dict) or not isinstance(workload, dict):
        raise refuse(path, run_id, "no settings or workload")
    repetitions = settings.get("repetitions")
    if not isinstance(repetitions, int) or not 1 <= repetitions <= MAX_REPETITIONS:
        raise refuse(path, run_id, f"repetitions {str(repetitions)[:20]!r}")
    if config.get("metric", "throughput") not in METRICS:
        raise refuse(path, run_id, f"metric {str(config.get('metric'))[:20]!r}")
    if workload.get("kind") not in WORKLOAD_KINDS:
        raise refuse(path, run_id, f"workload kind {str(workload.get('kind'))[:20]!r}")
    pipelines = workload.get("pipelines", [])
    if not isinstance(pipelines, list) or len(pipelines) > MAX_PIPELINES:
        raise refuse(path, run_id, "its pipelines")
    if (
        not isinstance(targets, list)
        or not 1 <= len(targets) <= MAX_TARGETS
        or not all(isinstance(t, dict) and isinstance(t.get("label"), str) for t in targets)
    ):
        raise refuse(path, run_id, "its versions")


def _shard(path: Path, run_id: int, shard: Any) -> dict[str, Any] | None:
    if shard is None:
        return None
    index, count = (shard.get("index"), shard.get("count")) if isinstance(shard, dict) else (0, 0)
    if not (isinstance(index, int) and isinstance(count, int) and 1 <= index <= count <= 10_000):
        raise refuse(path, run_id, "its shard")
    return shard


def host_label(environment: dict[str, Any]) -> str:
    """The host a shard ran on, as a level of the model: its name and its fingerprint.

    The name tells apart identical machines (two cloud VMs of one type share a
    fingerprint) and pods; the fingerprint, one name reused by a different machine."""
    name = environment.get("hostname") or "unknown"
    return f"{name}/{str(environment.get('fingerprint') or 'unknown')[:8]}"
