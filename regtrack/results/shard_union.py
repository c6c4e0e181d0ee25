"""Shard databases unioned into one: every trial, invalid trial, function cost and command
row kept once, with the host and shard that measured it.

Each shard of a plan (bench/shards.py) measured its blocks into its own database. The
merged database holds one run per plan: its trials keep the plan's ``seq`` numbers, so a
trial measured by two shards (a shard run again) is the same trial and is kept once, and
merging a database a second time adds nothing. Which shard, host and file each merged
run's trials came from is in ``merged_shards``.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from regtrack.core.errors import BadInput
from regtrack.plan.records import Merged, Shard
from regtrack.results import connection
from regtrack.results.shard_runs import MAX_TARGETS, ShardRun, refuse
from regtrack.results.store import Store, busy_timeout_ms, config_field, now
from regtrack.results.trial_rows import JSON_COLUMNS

# Columns of a trial that are not copied as they are (ids are renumbered, the host is set).
_RENUMBERED = {"id", "run_id", "target_id", "host"}


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


def merged_run(dest: Store, plan_id: str) -> int | None:
    row = dest.conn.execute(
        f"SELECT id FROM runs WHERE {config_field('$.merged')} = 1"
        f" AND {config_field('$.plan_id')} = ?",
        (plan_id,),
    ).fetchone()
    return None if row is None else int(row[0])


TARGET_COLUMNS = (
    "position", "label", "spec", "kind", "binary", "binary_sha256", "commit_sha", "ref",
    "source_repo", "image", "redis_version", "server_info", "details",
)  # fmt: skip


def create_merged_run(dest: Store, first: ShardRun) -> int:
    """The merged run of ``first``'s plan: its config without the shard, its targets, in
    one transaction (never a run without its versions)."""
    plan = replace(first.config, shard=None, merged=Merged())
    with _reader(first) as src, dest.transaction() as conn:
        run_id = dest.create_run(
            list(first.command), plan, first.environment.shown(), first.loadgen.shown()
        )
        rows = src.execute(
            f"SELECT {', '.join(TARGET_COLUMNS)} FROM targets WHERE run_id = ? ORDER BY position",
            (first.run_id,),
        ).fetchall()
        labels = [r[1] for r in rows]
        if not rows or len(set(labels)) != len(labels) or len(rows) > MAX_TARGETS:
            raise refuse(first.path, first.run_id, "its versions table")
        for row in rows:
            _check_row(first, "targets", row)
        conn.executemany(
            f"INSERT INTO targets (run_id, {', '.join(TARGET_COLUMNS)})"
            f" VALUES (?, {', '.join('?' * len(TARGET_COLUMNS))})",
            [(run_id, *row) for row in rows],
        )
    return run_id


def add_shard(dest: Store, run_id: int, source: ShardRun, planned: int) -> tuple[int, int]:
    """Copy ``source``'s trials (and their function costs and command rows) into merged
    run ``run_id``; returns (trials added, trials it already had).

    A trial the merged run holds already (the same plan position, ``seq``) is skipped if
    it is the same trial, and refused if it differs: the same planned trial measured twice
    (a shard run again) must be resolved by the user, not by whichever file came first."""
    columns = [
        row[1]
        for row in dest.conn.execute("PRAGMA table_info(trials)").fetchall()
        if row[1] not in _RENUMBERED
    ]
    types = {row[1]: row[2] for row in dest.conn.execute("PRAGMA table_info(trials)")}
    targets = {
        r[0]: r[1]
        for r in dest.conn.execute("SELECT label, id FROM targets WHERE run_id = ?", (run_id,))
    }
    listed = ", ".join(columns)
    with _reader(source) as src, dest.transaction() as conn:
        seq_at = 1 + columns.index("seq")
        have = {
            row[seq_at]: tuple(row)
            for row in conn.execute(
                f"SELECT g.label, {listed} FROM trials t JOIN targets g ON g.id = t.target_id"
                " WHERE t.run_id = ?",
                (run_id,),
            )
        }
        added, already, conflicts = 0, 0, []
        for row in src.execute(
            f"SELECT t.id, g.label, {', '.join('t.' + c for c in columns)} FROM trials t"
            " JOIN targets g ON g.id = t.target_id WHERE t.run_id = ?",
            (source.run_id,),
        ):
            src_id, trial = row[0], tuple(row[1:])
            seq = trial[seq_at]
            if not isinstance(seq, int) or not 0 <= seq < planned:
                raise refuse(source.path, source.run_id, f"a trial at plan position {seq!r}")
            if trial[0] not in targets:
                raise refuse(source.path, source.run_id, f"a trial of version {trial[0]!r}")
            if seq in have:
                if have[seq] == trial:
                    already += 1
                else:
                    conflicts.append(seq)
                continue
            _check_trial(source, columns, types, trial[1:])
            cur = conn.execute(
                f"INSERT INTO trials (run_id, target_id, host, {listed})"
                f" VALUES (?, ?, ?, {', '.join('?' * len(columns))})",
                (run_id, targets[trial[0]], source.host, *trial[1:]),
            )
            _copy_children(src, conn, src_id, int(cur.lastrowid))
            have[seq] = trial
            added += 1
        if conflicts:
            raise BadInput(
                f"{source.path} ({source.name}) holds {len(conflicts)} trials that another "
                f"input holds with other values (plan positions {_positions(conflicts)}): the "
                "same planned trials were measured twice (a shard run again?); merge one "
                "database per shard"
            )
        shard = source.shard or Shard(1, 1)
        conn.execute(
            "INSERT OR IGNORE INTO merged_shards (run_id, shard, shards, host, source,"
            " source_run, environment, trials, merged_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run_id, shard.index, shard.count, source.host, str(source.path),
                source.run_id, json.dumps(source.environment.shown(), sort_keys=True),
                added + already, now(),
            ),
        )  # fmt: skip
    return added, already


def _positions(seqs: list[int]) -> str:
    shown = ", ".join(map(str, sorted(seqs)[:5]))
    return shown + (f" and {len(seqs) - 5} more" if len(seqs) > 5 else "")


CHILD_TABLES = {
    "function_costs": (
        "function", "file", "object", "exclusive", "inclusive", "cycles", "l1_misses",
        "ll_misses", "branch_misses",
    ),
    "trial_reasons": ("position", "code", "detail"),
    "command_stats": (
        "source", "command", "calls", "usec", "failed_calls", "ops_per_sec", "p50_ms", "p99_ms",
    ),
    "trial_open_loop": (
        "offered_rate", "arrival", "lag_p99_us", "lag_max_us", "engine_busy_pct", "hdr_unit",
        "hdr",
    ),
    "trial_syscalls": ("name", "calls"),
    "trial_lifecycle": (
        "enqueued", "completed", "not_done", "enqueue_per_sec", "commands_per_task",
        "round_trips_per_task", "empty_dequeues", "foreign_tasks",
    ),
    "trial_cache_sim": (
        "ir", "dr", "dw", "i1mr", "d1mr", "d1mw", "ilmr", "dlmr", "dlmw", "bc", "bcm", "bi",
        "bim", "cycles", "geometry",
    ),
}  # fmt: skip


def _copy_children(src: sqlite3.Connection, dest: sqlite3.Connection, old: int, new: int) -> None:
    for table, fields in CHILD_TABLES.items():
        rows = src.execute(
            f"SELECT {', '.join(fields)} FROM {table} WHERE trial_id = ?", (old,)
        ).fetchall()
        dest.executemany(
            f"INSERT INTO {table} (trial_id, {', '.join(fields)})"
            f" VALUES (?, {', '.join('?' * len(fields))})",
            [(new, *row) for row in rows],
        )


def _check_trial(
    source: ShardRun, columns: list[str], types: dict[str, str], values: tuple
) -> None:
    """Each value of the type its column declares; JSON columns parse."""
    for name, value in zip(columns, values, strict=True):
        if value is None:
            continue
        declared = types.get(name, "").upper()
        ok = (
            isinstance(value, int | float)
            if declared in ("REAL", "INTEGER")
            else isinstance(value, str)
        )
        if ok and name in JSON_COLUMNS:
            try:
                json.loads(value)
            except ValueError:
                ok = False
        if not ok:
            raise refuse(source.path, source.run_id, f"a trial's {name} {str(value)[:20]!r}")


def _check_row(source: ShardRun, table: str, row: tuple) -> None:
    if not isinstance(row[0], int) or not all(v is None or isinstance(v, str) for v in row[1:]):
        raise refuse(source.path, source.run_id, f"a row of {table}")


@contextlib.contextmanager
def _reader(source: ShardRun) -> Iterator[sqlite3.Connection]:
    """The shard's file (its schema checked when its runs were read), whose statements
    stop at a signal."""
    conn = connection.connect(source.read_from or source.path, busy_timeout_ms())
    conn.row_factory = None
    try:
        yield conn
    except sqlite3.DatabaseError as exc:
        raise BadInput(f"{source.path}: cannot read it as a regtrack database: {exc}") from None
    finally:
        conn.close()


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
        seen = sorted({str(getattr(r.environment, key)) for r in runs})
        if len(seen) > 1:
            out.append(f"{key}: {' / '.join(seen)}")
    binaries: dict[str, set[str]] = {}
    for r in runs:
        for target in r.config.targets:
            image = target.docker.image_id if target.docker else None
            code = target.binary_sha256 or image
            binaries.setdefault(target.label, set()).add(str(code))
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
