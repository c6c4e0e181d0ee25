"""A shard's database read as hostile input: the runs that name their plan, each checked
for shape and bounds before anything is planned or copied from it."""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from regtrack.core.errors import BadInput
from regtrack.plan.records import Shard
from regtrack.plan.run_plan import RunPlan
from regtrack.results.run_row import HostFacts, LoadgenFacts
from regtrack.results.store import Store

# What a shard's run may hold before it is planned or copied: a crafted database could
# otherwise ask for a plan of a billion repetitions (memory) or smuggle in any text.
MAX_REPETITIONS = 10_000
MAX_TARGETS = 500
MAX_PIPELINES = 1_000
MAX_TRIALS = 100_000_000  # a plan's trials, as a run stores their count
WORKLOAD_KINDS = ("get-pipeline", "mix", "lifecycle")
METRICS = ("throughput", "instructions", "both", "cycles")


@dataclass(frozen=True)
class ShardRun:
    """A run of an input database that measured (a shard of) a plan. ``path`` is the file
    given; ``read_from`` the private copy that is read (inputs are never changed)."""

    path: Path
    run_id: int
    plan_id: str
    shard: Shard | None
    host: str
    status: str
    config: RunPlan
    environment: HostFacts
    loadgen: LoadgenFacts
    command: tuple[str, ...]
    read_from: Path | None = None  # None: ``path`` itself

    @property
    def name(self) -> str:
        shard = self.shard
        return f"shard {shard.label}" if shard else "the whole plan"


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
            plan = run.plan
            if not plan.plan_id or plan.merged is not None:
                continue
            _check_plan(path, run.id, plan)
            found.append(
                ShardRun(
                    path=path,
                    run_id=run.id,
                    plan_id=plan.plan_id,
                    shard=plan.shard,
                    host=host_label(run.environment),
                    status=run.status,
                    config=plan,
                    environment=run.environment,
                    loadgen=run.loadgen,
                    command=run.command,
                    read_from=source,
                )
            )
        return found
    finally:
        store.close()


def refuse(path: Path, run_id: int, what: str) -> BadInput:
    return BadInput(
        f"{path}: run {run_id} is not a shard regtrack could have written ({what}); "
        "merge the databases regtrack's runs produced"
    )


def _check_plan(path: Path, run_id: int, plan: RunPlan) -> None:
    """The bounds planning and copying rely on (the plan's reader checked its types)."""
    repetitions = plan.settings.repetitions
    if not 1 <= repetitions <= MAX_REPETITIONS:
        raise refuse(path, run_id, f"repetitions {repetitions}")
    if plan.metric not in METRICS:
        raise refuse(path, run_id, f"metric {plan.metric[:20]!r}")
    if len(getattr(plan.workload, "pipelines", ())) > MAX_PIPELINES:
        raise refuse(path, run_id, "its pipelines")
    if not 1 <= len(plan.targets) <= MAX_TARGETS:
        raise refuse(path, run_id, "its versions")
    shard = plan.shard
    if shard is not None and not 1 <= shard.index <= shard.count <= 10_000:
        raise refuse(path, run_id, "its shard")


def host_label(environment: HostFacts) -> str:
    """The host a shard ran on, as a level of the model: its name and its fingerprint.

    The name tells apart identical machines (two cloud VMs of one type share a
    fingerprint) and pods; the fingerprint, one name reused by a different machine."""
    name = environment.hostname or "unknown"
    return f"{name}/{str(environment.fingerprint or 'unknown')[:8]}"
