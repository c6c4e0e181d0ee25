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
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regtrack.core.errors import BadInput
from regtrack.results.store import Store, now

# Columns of a trial that are not copied as they are (ids are renumbered, the host is set).
_RENUMBERED = {"id", "run_id", "target_id", "host"}


# What a shard's run may hold before it is planned or copied: a crafted database could
# otherwise ask for a plan of a billion repetitions (memory) or smuggle in any text.
MAX_REPETITIONS = 10_000
MAX_TARGETS = 500
MAX_PIPELINES = 1_000
WORKLOAD_KINDS = ("get-pipeline", "mix")
# Trial columns that hold JSON (written by Store.add_trial) and must parse as JSON.
JSON_COLUMNS = {"params", "argv", "server_stats"}


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


def private_copy(path: Path, folder: Path) -> Path:
    """``path`` (and its -wal, where a shard left its last commits) copied into
    ``folder``: what merge reads and may upgrade, so the input stays as it was."""
    copy = folder / f"input-{len(list(folder.iterdir()))}.db"
    try:
        shutil.copyfile(path, copy)
        wal = Path(f"{path}-wal")
        if wal.is_file():
            shutil.copyfile(wal, Path(f"{copy}-wal"))
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
        except (sqlite3.DatabaseError, ValueError, TypeError) as exc:
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


def _refuse(path: Path, run_id: int, what: str) -> BadInput:
    return BadInput(
        f"{path}: run {run_id} is not a shard regtrack could have written ({what}); "
        "merge the databases regtrack's runs produced"
    )


def _check_config(path: Path, run_id: int, config: dict[str, Any]) -> None:
    """The fields planning and copying rely on, with their types and bounds."""
    settings, workload = config.get("settings"), config.get("workload")
    targets = config.get("targets")
    if not isinstance(settings, dict) or not isinstance(workload, dict):
        raise _refuse(path, run_id, "no settings or workload")
    repetitions = settings.get("repetitions")
    if not isinstance(repetitions, int) or not 1 <= repetitions <= MAX_REPETITIONS:
        raise _refuse(path, run_id, f"repetitions {str(repetitions)[:20]!r}")
    if workload.get("kind") not in WORKLOAD_KINDS:
        raise _refuse(path, run_id, f"workload kind {str(workload.get('kind'))[:20]!r}")
    pipelines = workload.get("pipelines", [])
    if not isinstance(pipelines, list) or len(pipelines) > MAX_PIPELINES:
        raise _refuse(path, run_id, "its pipelines")
    if (
        not isinstance(targets, list)
        or not 1 <= len(targets) <= MAX_TARGETS
        or not all(isinstance(t, dict) and isinstance(t.get("label"), str) for t in targets)
    ):
        raise _refuse(path, run_id, "its versions")


def _shard(path: Path, run_id: int, shard: Any) -> dict[str, Any] | None:
    if shard is None:
        return None
    index, count = (shard.get("index"), shard.get("count")) if isinstance(shard, dict) else (0, 0)
    if not (isinstance(index, int) and isinstance(count, int) and 1 <= index <= count <= 10_000):
        raise _refuse(path, run_id, "its shard")
    return shard


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


TARGET_COLUMNS = (
    "position", "label", "spec", "kind", "binary", "binary_sha256", "commit_sha", "ref",
    "source_repo", "image", "redis_version", "server_info", "details",
)  # fmt: skip


def create_merged_run(dest: Store, first: ShardRun) -> int:
    """The merged run of ``first``'s plan: its config without the shard, its targets, in
    one transaction (never a run without its versions)."""
    config = {**first.config, "shard": None, "merged": True}
    with _reader(first) as src, dest.transaction() as conn:
        run_id = dest.create_run(first.command, config, first.environment, first.loadgen)
        rows = src.execute(
            f"SELECT {', '.join(TARGET_COLUMNS)} FROM targets WHERE run_id = ? ORDER BY position",
            (first.run_id,),
        ).fetchall()
        labels = [r[1] for r in rows]
        if not rows or len(set(labels)) != len(labels) or len(rows) > MAX_TARGETS:
            raise _refuse(first.path, first.run_id, "its versions table")
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
                raise _refuse(source.path, source.run_id, f"a trial at plan position {seq!r}")
            if trial[0] not in targets:
                raise _refuse(source.path, source.run_id, f"a trial of version {trial[0]!r}")
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
        shard = source.shard or {"index": 1, "count": 1}
        conn.execute(
            "INSERT OR IGNORE INTO merged_shards (run_id, shard, shards, host, source,"
            " source_run, environment, trials, merged_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run_id, shard["index"], shard["count"], source.host, str(source.path),
                source.run_id, json.dumps(source.environment, sort_keys=True),
                added + already, now(),
            ),
        )  # fmt: skip
    return added, already


def _positions(seqs: list[int]) -> str:
    shown = ", ".join(map(str, sorted(seqs)[:5]))
    return shown + (f" and {len(seqs) - 5} more" if len(seqs) > 5 else "")


CHILD_TABLES = {
    "function_costs": ("function", "file", "object", "exclusive", "inclusive"),
    "trial_reasons": ("position", "code", "detail"),
    "command_stats": (
        "source", "command", "calls", "usec", "failed_calls", "ops_per_sec", "p50_ms", "p99_ms",
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
            raise _refuse(source.path, source.run_id, f"a trial's {name} {str(value)[:20]!r}")


def _check_row(source: ShardRun, table: str, row: tuple) -> None:
    if not isinstance(row[0], int) or not all(v is None or isinstance(v, str) for v in row[1:]):
        raise _refuse(source.path, source.run_id, f"a row of {table}")


@contextlib.contextmanager
def _reader(source: ShardRun) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(source.read_from or source.path)
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
