"""Shard databases unioned into one: every trial, invalid trial, function cost and command
row kept once, with the host and shard that measured it.

Each shard of a plan (bench/shards.py) measured its blocks into its own database. The
merged database holds one run per plan: its trials keep the plan's ``seq`` numbers, so a
trial measured by two shards (a shard run again) is the same trial and is kept once, and
merging a database a second time adds nothing. Which shard, host and file each merged
run's trials came from is in ``merged_shards``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regtrack.core.errors import BadInput
from regtrack.results.store import Store, now

# Columns of a trial that are not copied as they are (ids are renumbered, the host is set).
_RENUMBERED = {"id", "run_id", "target_id", "host"}


@dataclass(frozen=True)
class ShardRun:
    """A run of an input database that measured (a shard of) a plan."""

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

    @property
    def name(self) -> str:
        shard = self.shard
        return f"shard {shard['index']}/{shard['count']}" if shard else "the whole plan"


@dataclass(frozen=True)
class Missing:
    """Blocks shard ``index`` of ``count`` should have measured and no database holds."""

    index: int
    count: int
    blocks: int
    trials: int


@dataclass
class PlanMerge:
    """What merging did for one plan."""

    plan_id: str
    run_id: int
    added: int = 0
    already: int = 0
    sources: list[str] = field(default_factory=list)
    missing: list[Missing] = field(default_factory=list)
    planned: int = 0
    # Why instruction counts differ between the hosts by more than the code ([]: pooled).
    apart: list[str] = field(default_factory=list)


def shard_runs(path: Path) -> list[ShardRun]:
    """The runs of ``path`` that name their plan (regtrack 0.1 runs with --shard or not)."""
    store = Store.open(path, create=False)
    try:
        found = []
        for run in reversed(store.runs()):
            config = run["config"] or {}
            if not config.get("plan_id") or config.get("merged"):
                continue
            found.append(
                ShardRun(
                    path=path,
                    run_id=run["id"],
                    plan_id=config["plan_id"],
                    shard=config.get("shard"),
                    host=host_label(run["environment"] or {}),
                    status=run["status"],
                    config=config,
                    environment=run["environment"] or {},
                    loadgen=run["loadgen"] or {},
                    command=run["command"] or [],
                )
            )
        return found
    finally:
        store.close()


def host_label(environment: dict[str, Any]) -> str:
    """The host a shard ran on, as a level of the model: its name and its fingerprint.

    The name tells apart identical machines (two cloud VMs of one type share a
    fingerprint) and pods; the fingerprint, one name reused by a different machine."""
    name = environment.get("hostname") or "unknown"
    return f"{name}/{str(environment.get('fingerprint') or 'unknown')[:8]}"


def merged_run(dest: Store, plan_id: str) -> int | None:
    row = dest.conn.execute(
        "SELECT id FROM runs WHERE json_extract(config, '$.merged') = 1"
        " AND json_extract(config, '$.plan_id') = ?",
        (plan_id,),
    ).fetchone()
    return None if row is None else int(row[0])


def create_merged_run(dest: Store, first: ShardRun) -> int:
    """The merged run of ``first``'s plan: its config without the shard, its targets."""
    config = {**first.config, "shard": None, "merged": True}
    run_id = dest.create_run(first.command, config, first.environment, first.loadgen)
    conn = dest.conn
    conn.execute("ATTACH DATABASE ? AS src", (str(first.path),))  # not inside a transaction
    try:
        with dest.transaction():
            conn.execute(
                "INSERT INTO main.targets (run_id, position, label, spec, kind, binary,"
                " binary_sha256, commit_sha, ref, source_repo, image, redis_version,"
                " server_info, details) SELECT ?, position, label, spec, kind, binary,"
                " binary_sha256, commit_sha, ref, source_repo, image, redis_version,"
                " server_info, details FROM src.targets WHERE run_id = ?",
                (run_id, first.run_id),
            )
    finally:
        conn.execute("DETACH DATABASE src")
    return run_id


def add_shard(dest: Store, run_id: int, source: ShardRun) -> tuple[int, int]:
    """Copy ``source``'s trials (and their function costs and command rows) into merged
    run ``run_id``; returns (trials added, trials it already had)."""
    columns = [
        row[1]
        for row in dest.conn.execute("PRAGMA table_info(trials)").fetchall()
        if row[1] not in _RENUMBERED
    ]
    listed = ", ".join(columns)
    picked = ", ".join(f"st.{c}" for c in columns)
    conn = dest.conn
    conn.execute("ATTACH DATABASE ? AS src", (str(source.path),))
    try:
        with dest.transaction():
            have = dest.trial_seqs(run_id)
            query = "SELECT seq FROM src.trials WHERE run_id = ?"
            theirs = [r[0] for r in conn.execute(query, (source.run_id,))]
            new = [s for s in theirs if s not in have]
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS merge_new (seq INTEGER PRIMARY KEY)")
            conn.execute("DELETE FROM temp.merge_new")
            conn.executemany("INSERT INTO temp.merge_new VALUES (?)", [(s,) for s in new])
            conn.execute(
                f"INSERT INTO main.trials (run_id, target_id, host, {listed})"
                f" SELECT ?, dt.id, ?, {picked} FROM src.trials st"
                " JOIN src.targets sg ON sg.id = st.target_id"
                " JOIN main.targets dt ON dt.run_id = ? AND dt.label = sg.label"
                " WHERE st.run_id = ? AND st.seq IN (SELECT seq FROM temp.merge_new)",
                (run_id, source.host, run_id, source.run_id),
            )
            for table, fields in (
                ("function_costs", "function, file, object, exclusive, inclusive"),
                (
                    "command_stats",
                    "source, command, calls, usec, failed_calls, ops_per_sec, p50_ms, p99_ms",
                ),
            ):
                conn.execute(
                    f"INSERT INTO main.{table} (trial_id, {fields})"
                    f" SELECT mt.id, {', '.join('f.' + x.strip() for x in fields.split(','))}"
                    f" FROM src.{table} f JOIN src.trials st ON st.id = f.trial_id"
                    " JOIN main.trials mt ON mt.run_id = ? AND mt.seq = st.seq"
                    " WHERE st.run_id = ? AND st.seq IN (SELECT seq FROM temp.merge_new)",
                    (run_id, source.run_id),
                )
            shard = source.shard or {"index": 1, "count": 1}
            conn.execute(
                "INSERT OR IGNORE INTO merged_shards (run_id, shard, shards, host, source,"
                " source_run, environment, trials, merged_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    shard["index"],
                    shard["count"],
                    source.host,
                    str(source.path),
                    source.run_id,
                    json.dumps(source.environment, sort_keys=True),
                    len(theirs),
                    now(),
                ),
            )
    finally:
        conn.execute("DETACH DATABASE src")
    return len(new), len(theirs) - len(new)


def shards_of(dest: Store, run_id: int) -> list[dict[str, Any]]:
    """What merged run ``run_id`` holds, shard by shard (provenance)."""
    rows = dest.conn.execute(
        "SELECT shard, shards, host, source, source_run, trials, merged_at FROM merged_shards"
        " WHERE run_id = ? ORDER BY shard, merged_at",
        (run_id,),
    ).fetchall()
    return [dict(r) for r in rows]


# What must agree for instruction counts of different hosts to be pooled as one sample,
# besides the binary (or image): valgrind, and the CPU it presents to the server (its
# hwcaps: under valgrind glibc sees a fixed CPU of the host's capability level, not the
# host's model), and glibc, whose string-function variants are chosen by that CPU.
# benchmarks/instruction_hosts.py measured what each moves; docs/scale-out.md.
POOLING_KEYS = ("valgrind", "valgrind_hwcaps", "glibc")


def instruction_differences(runs: list[ShardRun]) -> list[str]:
    """Why instruction counts of these shards' hosts are not one population ([]: they are)."""
    out = []
    for key in POOLING_KEYS:
        seen = sorted({str(r.environment.get(key)) for r in runs})
        if len(seen) > 1:
            out.append(f"{key}: {' / '.join(seen)}")
    binaries: dict[str, set[str]] = {}
    for r in runs:
        for target in r.config.get("targets") or []:
            image = ((target.get("details") or {}).get("docker") or {}).get("image_id")
            code = target.get("binary_sha256") or image
            binaries.setdefault(target["label"], set()).add(str(code))
    for label, shas in sorted(binaries.items()):
        if len(shas) > 1:
            out.append(f"{label}'s binary or image: {' / '.join(sorted(s[:12] for s in shas))}")
    return out


def check_one_plan(found: list[ShardRun], allow_mixed: bool) -> None:
    """Shards of different plans are refused (one line naming them) unless asked for."""
    plans = sorted({r.plan_id for r in found})
    if len(plans) > 1 and not allow_mixed:
        by_plan = "; ".join(
            f"plan {p}: " + ", ".join(f"{r.path.name} ({r.name})" for r in found if r.plan_id == p)
            for p in plans
        )
        raise BadInput(
            f"these databases measured {len(plans)} different plans ({by_plan}): merge the "
            "shards of one plan, or pass --allow-different-plans to merge each plan on its own"
        )
