"""`regtrack merge` reads databases other hosts produced: a crafted or damaged one gets a
clear refusal or a correct merge, never a traceback, never a change to the input or to a
file outside the output; duplicates follow one rule (the same trial twice is merged
once, two different trials at one plan position are refused and named)."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import closing, suppress
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from regtrack.core.errors import BadInput, RegtrackError
from regtrack.flows import shard_merge
from tests import fakebench
from tests.conftest import cli_in_process, redis_server_path, settings_dir

PLAN = ["--metric", "both", "--pipelines", "10", "--repetitions", "4", "--no-report"]


@pytest.fixture(scope="module")
def shard(tmp_path_factory) -> Iterator[Path]:
    """A real shard database (1 of 2), its trials modelled (tests/fakebench.py)."""
    server = redis_server_path()
    folder = tmp_path_factory.mktemp("shard")
    db = folder / "shard-1.db"
    model = fakebench.Model()
    proc = cli_in_process(
        "run", "--versions", f"a=bin:{server},b=bin:{server}",
        *PLAN, "--shard", "1/2", "--db", str(db), measuring=model,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    yield db


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _trials(db: Path) -> list[tuple]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT seq, ops_per_sec, instructions_per_op FROM trials").fetchall()


HOSTILE_TEXT = st.sampled_from(
    ["--output=/etc/passwd", "'; DROP TABLE trials; --", "\x00\x1b[31m", "é" * 300, "", "{"]
)
HOSTILE = st.one_of(
    HOSTILE_TEXT,
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.binary(max_size=16),
    st.none(),
)
TRIAL_COLUMNS = ["seq", "repetition", "point", "params", "ops_per_sec", "valid", "seed",
                 "mode", "argv", "server_stats", "started_at"]  # fmt: skip
CONFIG_PATHS = ["$.settings.repetitions", "$.targets", "$.targets[0].label", "$.workload.kind",
                "$.workload.pipelines", "$.shard", "$.shard.index", "$.plan_id",
                "$.metric", "$.workload", "$.planned_trials"]  # fmt: skip


@st.composite
def damage(draw) -> list[tuple[str, tuple]]:
    """SQL statements (with their parameters) that craft or damage a shard database."""
    kind = draw(st.sampled_from(["trial", "config", "target", "drop", "duplicate", "child"]))
    value = draw(HOSTILE)
    if kind == "trial":
        column = draw(st.sampled_from(TRIAL_COLUMNS))
        return [(f"UPDATE trials SET {column} = ? WHERE id = (SELECT MIN(id) FROM trials)",
                 (value,))]  # fmt: skip
    if kind == "config":
        path = draw(st.sampled_from(CONFIG_PATHS))
        plain = value if not isinstance(value, bytes) else "x"
        huge = draw(st.sampled_from([plain, 10**12, -1, [1] * 5000, "x", {"index": 3}]))
        return [("UPDATE runs SET config = json_set(config, ?, json(?))",
                 (path, json.dumps(huge)))]  # fmt: skip
    if kind == "target":
        column = draw(st.sampled_from(["label", "position", "details", "commit_sha"]))
        return [(f"UPDATE targets SET {column} = ?", (value,))]
    if kind == "drop":
        table = draw(st.sampled_from(["trials", "targets", "command_stats", "function_costs"]))
        return [(f"DROP TABLE {table}", ())]
    if kind == "child":
        return [("UPDATE function_costs SET exclusive = ?", (value,))]
    return [  # a second trial at a plan position another trial holds
        ("INSERT INTO trials (run_id, target_id, seq, repetition, workload, point, params,"
         " started_at, valid) SELECT run_id, target_id, seq + 100000, repetition, workload,"
         " point, params, started_at, valid FROM trials LIMIT 1", ()),
    ]  # fmt: skip


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(statements=damage())
def test_a_crafted_shard_is_refused_clearly_or_merged_and_nothing_else_is_touched(
    shard, statements
):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        crafted = folder / "crafted.db"
        shutil.copy(shard, crafted)
        with closing(sqlite3.connect(crafted)) as conn:
            conn.execute("PRAGMA foreign_keys = OFF")
            for sql, params in statements:
                with suppress(sqlite3.Error):  # what SQLite itself refuses crafts nothing
                    conn.execute(sql, params)
            conn.commit()
        before = _digest(crafted)
        out = folder / "out" / "merged.db"
        out.parent.mkdir()
        try:
            shard_merge.merge(out, [crafted])
        except RegtrackError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 600, str(exc)
        assert _digest(crafted) == before, "the input is never changed"
        assert sorted(p.name for p in folder.iterdir()) == ["crafted.db", "out"]
        assert {p.name for p in out.parent.iterdir()} <= {"merged.db", "merged.db-wal",
                                                          "merged.db-shm"}  # fmt: skip


def test_a_shard_given_as_a_link_is_refused_and_what_it_points_at_is_not_read(shard, tmp_path):
    """A downloaded artifact is the measuring job's, which ran the pull request's code: a
    link named shard-1.db (or its -wal) could have merge read any file on the host."""
    secret = tmp_path / "secret"
    secret.write_bytes(Path(shard).read_bytes())
    linked = tmp_path / "shard-1.db"
    linked.symlink_to(secret)
    with pytest.raises(BadInput, match=r"shard-1\.db is a symbolic link"):
        shard_merge.merge(tmp_path / "merged.db", [linked])
    wal_linked = tmp_path / "shard-2.db"
    shutil.copy(shard, wal_linked)
    Path(f"{wal_linked}-wal").symlink_to(secret)
    with pytest.raises(BadInput, match=r"shard-2\.db-wal is a symbolic link"):
        shard_merge.merge(tmp_path / "merged.db", [wal_linked])
    assert not (tmp_path / "merged.db").exists()


def test_the_same_trial_twice_is_merged_once_and_two_different_ones_are_refused(shard, tmp_path):
    again = tmp_path / "again.db"
    shutil.copy(shard, again)
    out = tmp_path / "merged.db"
    shard_merge.merge(out, [shard, again])
    assert len(_trials(out)) == len(_trials(shard)), "an identical copy adds nothing"

    rerun = tmp_path / "rerun.db"
    shutil.copy(shard, rerun)
    with closing(sqlite3.connect(rerun)) as conn:
        conn.execute("UPDATE trials SET ops_per_sec = ops_per_sec * 2 WHERE seq IN (0, 1)")
        conn.commit()
    before = _digest(out)
    with pytest.raises(BadInput, match=r"holds 2 trials that another input holds with other "
                       r"values \(plan positions 0, 1\)"):  # fmt: skip
        shard_merge.merge(out, [rerun])
    assert _digest(out) == before, "a refused merge leaves the output as it was"
    fresh = tmp_path / "fresh.db"
    with pytest.raises(BadInput, match=r"rerun\.db"):
        shard_merge.merge(fresh, [shard, rerun])
    with closing(sqlite3.connect(fresh)) as conn:
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0, "one transaction"


def test_a_shard_that_stored_no_plan_size_is_planned_again_and_its_gap_named(shard, tmp_path):
    """A run stores how many trials its whole plan holds, so a merge that has them all
    needs no planning; a run of an older regtrack (no planned_trials) is planned again,
    and either way the missing shard is named with the same blocks."""
    older = tmp_path / "older.db"
    shutil.copy(shard, older)
    with closing(sqlite3.connect(older)) as conn:
        conn.execute("UPDATE runs SET config = json_remove(config, '$.planned_trials')")
        conn.commit()
    (stored,) = shard_merge.merge(tmp_path / "a.db", [shard])
    (planned,) = shard_merge.merge(tmp_path / "b.db", [older])
    assert stored.planned == planned.planned > len(_trials(shard)), "a share of the plan is here"
    assert stored.missing == planned.missing and [m.index for m in stored.missing] == [2]


def test_an_old_input_is_read_not_upgraded_in_place(tmp_path):
    """Merge reads a private copy: an input from an older regtrack (schema 4, before
    shards: nothing to merge) keeps its bytes; it used to be upgraded where it lay."""
    old = tmp_path / "old.db"
    shutil.copy(Path(__file__).parent / "fixtures" / "schema-v4.db", old)
    before = _digest(old)
    with pytest.raises(BadInput, match="nothing to merge"):
        shard_merge.merge(tmp_path / "merged.db", [old])
    assert _digest(old) == before
    with closing(sqlite3.connect(old)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 4


def test_shards_without_controlled_seeds_merge_and_compare(tmp_path, monkeypatch, redis_server):
    """Trials without seeds (unshare refused) merge like any other and the merged run
    compares (its blocks pair by repetition within the run)."""
    configs = settings_dir(tmp_path, '[run]\nseeds = "random"\n')
    monkeypatch.setenv("REGTRACK_CONFIG_DIR", str(configs))
    model = fakebench.Model()
    versions = f"a=bin:{redis_server},b=bin:{redis_server}"
    dbs = []
    for k in (1, 2):
        db = tmp_path / f"shard-{k}.db"
        proc = cli_in_process("run", "--versions", versions, *PLAN, "--shard", f"{k}/2",
                              "--db", str(db), measuring=model)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        dbs.append(db)
    out = tmp_path / "merged.db"
    merged = cli_in_process("merge", str(out), *map(str, dbs))
    assert merged.returncode == 0, merged.stderr
    with closing(sqlite3.connect(out)) as conn:
        assert conn.execute("SELECT COUNT(*) FROM trials WHERE seed IS NOT NULL").fetchone() == (0,)
    shown = cli_in_process("compare", "--db", str(out), "--format", "json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["records"] and "internal error" not in shown.stderr
