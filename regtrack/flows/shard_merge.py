"""`regtrack merge`: the shards of a plan, measured on several hosts, as one run.

results/shard_union.py copies trials; this module knows the plan, so it can say which planned
blocks no shard measured yet, and which shard should have.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

from regtrack.bench import shards
from regtrack.bench.plan import Visit, interleave, latency_points
from regtrack.core.errors import BadInput
from regtrack.plan.latency_plan import MODE as LATENCY_MODE
from regtrack.plan.records import Merged
from regtrack.plan.run_plan import RunPlan
from regtrack.results import shard_runs, shard_union
from regtrack.results.shard_union import Missing, PlanMerge
from regtrack.results.store import Store
from regtrack.workloads import points


def planned_visits(plan: RunPlan) -> list[Visit]:
    """The whole plan a run stored (every shard's visits)."""
    workload_points = points.points(plan.workload)
    return interleave(
        [t.label for t in plan.targets],
        workload_points,
        plan.settings.repetitions,
        plan.modes,
        0,
        dict(plan.narrowed),
        mode_points={
            LATENCY_MODE: latency_points(workload_points[0], plan.latency) if plan.latency else []
        },
    )


def missing_blocks(visits: list[Visit], count: int, have: set[int]) -> list[Missing]:
    """Per shard, the planned blocks (of the whole plan's ``visits``) with a trial no
    database holds."""
    found = shards.blocks(visits)
    owners = shards.assign(visits, count)
    out: dict[int, list[int]] = {}
    for block, owner in zip(found, owners, strict=True):
        left = [t.seq for v in block for t in v.trials if t.seq not in have]
        if left:
            counts = out.setdefault(owner, [0, 0])
            counts[0] += 1
            counts[1] += len(left)
    return [Missing(k, count, b, n) for k, (b, n) in sorted(out.items())]


def merge(out: Path, inputs: list[Path], allow_mixed: bool = False) -> list[PlanMerge]:
    """Union the shard databases ``inputs`` into ``out``: one run per plan, in one
    transaction (a refused input leaves ``out`` as it was). Inputs are read from private
    copies (with their -wal), never upgraded or changed in place."""
    for path in inputs:
        if not path.exists():
            raise BadInput(f"{path} does not exist: give the shards' database files")
        if out.exists() and path.resolve() == out.resolve():
            raise BadInput(f"{path} is the output database: merge into another file")
    with tempfile.TemporaryDirectory(prefix="regtrack-merge-") as tmp:
        copies = [shard_runs.private_copy(path, Path(tmp)) for path in inputs]
        found = [
            run
            for path, copy in zip(inputs, copies, strict=True)
            for run in shard_runs.shard_runs(path, copy)
        ]
        return _merge_found(out, found, allow_mixed)


def _merge_found(out: Path, found: list[shard_runs.ShardRun], allow_mixed: bool) -> list[PlanMerge]:
    if not found:
        raise BadInput(
            "none of these databases holds a run that names its plan (made by regtrack run "
            "or ci with this regtrack): nothing to merge"
        )
    shard_union.check_one_plan(found, allow_mixed)
    dest = Store.open(out)
    results = []
    try:
        with dest.transaction():
            for plan_id in dict.fromkeys(r.plan_id for r in found):
                results.append(_merge_plan(dest, [r for r in found if r.plan_id == plan_id]))
    finally:
        dest.close()
    return results


def _merge_plan(dest: Store, runs: list[shard_runs.ShardRun]) -> PlanMerge:
    """One plan's shards into its merged run (made by the first merge of the plan)."""
    plan_id = runs[0].plan_id
    planned = _planned_trials(runs[0])
    run_id = shard_union.merged_run(dest, plan_id) or shard_union.create_merged_run(dest, runs[0])
    result = PlanMerge(plan_id=plan_id, run_id=run_id, planned=planned)
    for run in runs:
        added, already = shard_union.add_shard(dest, run_id, run, planned)
        result.added += added
        result.already += already
        result.sources.append(
            f"{run.path} run {run.run_id} ({run.name}, host {run.host}, "
            f"{run.status}): {added} trials added, {already} already merged"
        )
    result.apart = shard_union.instruction_differences(runs)
    if result.added:
        _new_round(dest, run_id, result.apart)
    have = dest.trial_seqs(run_id)
    if len(have) < planned:  # which shard left what out: the plan itself tells
        count = max(r.shard.count if r.shard else 1 for r in runs)
        result.missing = missing_blocks(_plan(runs[0]), count, have)
    detail = "; ".join(
        f"shard {m.index}/{m.count} missing: {m.blocks} blocks ({m.trials} trials) not measured"
        for m in result.missing
    )
    dest.finish_run(run_id, "incomplete" if result.missing else "complete", detail or None)
    return result


def _planned_trials(run: shard_runs.ShardRun) -> int:
    """How many trials the whole plan holds: as the run stored it, else (a run of an older
    regtrack) counted by planning it again. Every stored trial's seq is checked against it
    (results/shard_union.py), so a crafted count cannot make a merged run look complete."""
    stored = run.config.planned_trials
    if isinstance(stored, int) and 1 <= stored <= shard_runs.MAX_TRIALS:
        return stored
    return sum(len(v.trials) for v in _plan(run))


def _plan(run: shard_runs.ShardRun) -> list[Visit]:
    """The whole plan ``run``'s config describes, or one line saying it cannot be read."""
    try:
        return planned_visits(run.config)
    except (ValueError, TypeError, KeyError) as exc:  # pydantic's errors are ValueErrors
        raise BadInput(
            f"{run.path}: run {run.run_id}'s plan cannot be read ({type(exc).__name__}); "
            "merge the databases regtrack's runs produced"
        ) from None


def _new_round(dest: Store, run_id: int, apart: list[str]) -> None:
    """A merge that added trials is one more look for a sequential gate on the merged run
    (analysis.comparison counts looks by round): record the repetitions it reached, and
    whether the hosts' instruction counts may be pooled."""
    plan = dest.run(run_id).plan
    rounds = plan.merged.rounds if plan.merged else ()
    merged = Merged((*rounds, dest.repetitions_reached(run_id)), tuple(apart))
    dest.update_config(run_id, replace(plan, merged=merged))
