"""Read what analysis computes on: runs with their trials, the runs a shift across runs is
estimated from, function costs. Callers load here, then hand the records (results.records)
to analysis, which never opens the database.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pandas as pd

from regtrack.results import comparability, trial_frame
from regtrack.results.records import AlikeRuns, LoadedRun, RunCosts, RunTarget, StoredRun
from regtrack.results.run_row import RunRow
from regtrack.results.store import Store
from regtrack.targets.target import Target


def trials_frame(store: Store, run_id: int) -> pd.DataFrame:
    """A run's trials, one row each, with the point's sort key and syscalls per operation
    (columns: results.trial_frame.TRIALS)."""
    return trial_frame.trials(store.trials(run_id))


def stored_run(store: Store, run_id: int) -> StoredRun:
    """A run's versions and settings, without its trials."""
    return _stored(store.run(run_id), store.targets(run_id))


def stored_runs(store: Store, rows: list[RunRow] | None = None) -> dict[int, StoredRun]:
    """Every run by id, without trials, read in two queries whatever their number
    (``rows``: the runs' rows, where the caller has read them already)."""
    targets = store.targets_by_run()
    rows = store.runs() if rows is None else rows
    return {r.id: _stored(r, targets.get(r.id, [])) for r in rows}


def run(store: Store, run_id: int) -> LoadedRun:
    """A run with its trials."""
    return LoadedRun(stored_run(store, run_id), trials_frame(store, run_id))


def runs(store: Store) -> Iterator[LoadedRun]:
    """Every run, newest first, read one at a time (a history reads all of them)."""
    targets = store.targets_by_run()
    for row in store.runs():
        trials = trials_frame(store, row.id) if row.n_trials else trial_frame.trials([])
        yield LoadedRun(_stored(row, targets.get(row.id, [])), trials)


def alike(store: Store, run_id: int) -> AlikeRuns:
    """The runs measured like ``run_id`` that share code with another such run; only
    those are read with their trials (a bisection asks at every step)."""
    digest = comparability.digest(comparability.of_run(store.run(run_id)))
    found = [r for r in stored_runs(store).values() if r.comparability == digest]
    seen = Counter(code for r in found for code in {t.code for t in r.targets})
    repeated = [r for r in found if any(seen[t.code] > 1 for t in r.targets)]
    return AlikeRuns(digest, tuple(LoadedRun(r, trials_frame(store, r.id)) for r in repeated))


def costs(store: Store, run_id: int) -> RunCosts:
    """A run's per-function costs with its versions' labels (what explain attributes)."""
    labels = tuple(t["label"] for t in store.targets(run_id))
    return RunCosts(run_id, labels, trial_frame.costs(store.function_costs(run_id)))


def command_stats(store: Store, run_id: int) -> pd.DataFrame:
    """Per-command counts of every trial of a run, the server's and the load generator's
    (columns: results.trial_frame.COMMANDS)."""
    return trial_frame.commands(store.command_stats(run_id))


def _stored(row: RunRow, targets: list[dict[str, Any]]) -> StoredRun:
    plan = row.plan
    key = comparability.of_run(row)
    return StoredRun(
        id=row.id,
        targets=tuple(_target(t) for t in targets),
        created_at=row.created_at,
        command=row.command,
        fingerprint=row.fingerprint,
        comparability=comparability.digest(key),
        key=key,
        status=row.status,
        status_detail=row.status_detail,
        workload=plan.workload.name,
        metric=plan.metric,
        points=plan.points,
        runtime=plan.runtime,
        repetitions=plan.settings.repetitions,
        seed_offset=plan.seed_offset,
        seeds=plan.seeds,
        environment=row.environment,
        loadgen=row.loadgen,
        printed=plan.purpose.printed,
        bisection=plan.purpose.bisection,
        design=plan.purpose.design,
        rounds=plan.merged.rounds if plan.merged else (),
        server=dict(plan.workload.server),
        server_data=plan.server_data,
        slo=plan.latency.slo if plan.latency else "",
    )


def _target(row: dict[str, Any]) -> RunTarget:
    stored = Target.from_json({**row, "commit": row.get("commit_sha")})
    built = str((row.get("server_info") or {}).get("redis_git_sha1") or "")
    return RunTarget(
        label=stored.label,
        spec=stored.spec,
        kind=stored.kind,
        commit=stored.commit or "",
        source_repo=stored.source_repo or "",
        redis_version=row.get("redis_version") or "",
        subject=stored.subject or "",
        commit_date=stored.commit_date or "",
        server_config=stored.server_config,
        built_sha=built if built.strip("0") else "",
        binary_sha256=stored.binary_sha256 or "",
        build=stored.build,
        image=stored.docker.image if stored.docker else "",
    )
