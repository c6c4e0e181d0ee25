"""Invalid-trial reasons as codes: stored and read back typed, migrated from the free text
of older databases, and what the consumers decide on (no test here starts a server)."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regtrack.analysis.cells import cells
from regtrack.analysis.comparison import _excluded_points
from regtrack.analysis.metrics import METRIC_BY_NAME
from regtrack.bench.loadgen import builtin
from regtrack.bench.trial import mark_died
from regtrack.core.records import (
    InvalidReason,
    TrialReason,
    TrialRecord,
    reasons_text,
    stored_text,
)
from regtrack.results import legacy_reasons
from regtrack.results.loaded import trials_frame
from regtrack.results.migrations import MIGRATIONS, SCHEMA_VERSION
from regtrack.results.store import Store
from regtrack.targets.versions import Target
from tests.conftest import cli_in_process, stored_plan

R = InvalidReason
THROUGHPUT = METRIC_BY_NAME["throughput"]
SQL_INTEGERS = st.integers(min_value=-(2**63), max_value=2**63 - 1)

# What older regtracks wrote, and the reason each becomes.
OLD_TEXTS = [
    (
        "client-bound: the load generator used 99% CPU (limit 95%), so this measures the "
        "client, not Redis",
        TrialReason(
            R.CLIENT_BOUND,
            "the load generator used 99% CPU (limit 95%), so this measures the client, not Redis",
        ),
    ),
    (
        "not server-bound: server busy 40%, load generator 30% (client-bound at 95%): neither",
        TrialReason(
            R.NOT_SERVER_BOUND, "server busy 40%, load generator 30% (client-bound at 95%): neither"
        ),
    ),
    ("contended: other processes used 59%", TrialReason(R.CONTENDED, "other processes used 59%")),
    (
        "server died: redis-server of a exited during the trial",
        TrialReason(R.SERVER_DIED, "redis-server of a exited during the trial"),
    ),
    (
        "server refused the trial: max number of clients reached",
        TrialReason(R.SERVER_REFUSED, "max number of clients reached"),
    ),
    ("paired windows failed: a: lost", TrialReason(R.WINDOWS_FAILED, "a: lost")),
    (
        "lost the server during the trial: Connection closed by server.",
        TrialReason(R.SERVER_LOST, "Connection closed by server."),
    ),
    (
        "warm-up failed: memtier_benchmark exited with code 1: boom",
        TrialReason(R.WARMUP_FAILED, "memtier_benchmark exited with code 1: boom"),
    ),
    ("not repeatable: the two windows", TrialReason(R.NOT_REPEATABLE, "the two windows")),
    ("server not saturated: it used 20% CPU", TrialReason(R.NOT_SATURATED, "it used 20% CPU")),
    (builtin.THROUGHPUT_CAVEAT, TrialReason(R.BUILTIN_DRIVER, builtin.THROUGHPUT_DETAIL)),
    (
        "the server exited during the trial",
        TrialReason(R.SERVER_DIED, "the server exited during the trial"),
    ),
    (
        "the server exited during the warm-up",
        TrialReason(R.SERVER_DIED, "the server exited during the warm-up"),
    ),
    (
        "12 GET misses (keys not populated or evicted)",
        TrialReason(R.GET_MISSES, "12 (keys not populated or evicted)"),
    ),
    ("3 error replies (WRONGTYPE x3)", TrialReason(R.ERROR_REPLIES, "3 (WRONGTYPE x3)")),
    (
        "the server counted 10 GET calls, the load generator claims 12",
        TrialReason(R.CALLS_SHORT, "the server counted 10 GET calls, the load generator claims 12"),
    ),
    (
        "GET ran 2000 times, the declared ratios expect about 500 (tolerance 10%)",
        TrialReason(
            R.RATIOS_OFF, "GET ran 2000 times, the declared ratios expect about 500 (tolerance 10%)"
        ),
    ),
    (
        "a background save or AOF rewrite ran during the point (INFO persistence): its fork",
        TrialReason(
            R.BACKGROUND_SAVE,
            "a background save or AOF rewrite ran during the point (INFO persistence): its fork",
        ),
    ),
    (
        "memtier_benchmark exited with code 1: boom",
        TrialReason(R.LOADGEN_FAILED, "memtier_benchmark exited with code 1: boom"),
    ),
    (
        "redis-benchmark printed no GET result",
        TrialReason(R.LOADGEN_FAILED, "redis-benchmark printed no GET result"),
    ),
    ("something nobody wrote: 7", TrialReason(R.OTHER, "something nobody wrote: 7")),
]


@pytest.mark.parametrize(("text", "reason"), OLD_TEXTS)
def test_each_old_wording_becomes_its_code(text, reason):
    assert legacy_reasons.parse(text) == (reason,)


def test_every_code_has_an_old_wording():
    """Every code of schema 9 stands for something older regtracks wrote (codes added
    after it, never written as free text, have no old wording)."""
    later = {InvalidReason.INTERRUPTED, InvalidReason.BEHIND_SCHEDULE, InvalidReason.DELAY_BEHIND}
    assert {reason.code for _, reason in OLD_TEXTS} == set(InvalidReason) - later


def test_joined_reasons_split_in_order_and_read_as_they_did():
    text = "contended: other processes used 59%; client-bound: the load generator used 99%"
    reasons = legacy_reasons.parse(text)
    assert [r.code for r in reasons] == [R.CONTENDED, R.CLIENT_BOUND]
    assert reasons_text(reasons) == text


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.binary(), st.integers(), st.floats(), st.none()))
def test_any_stored_text_parses_and_keeps_what_no_rule_knows(value):
    reasons = legacy_reasons.parse(value)
    if isinstance(value, str):
        parts = [p for p in value.split("; ") if p.strip()]
        assert len(reasons) == len(parts)
        for part, reason in zip(parts, reasons, strict=True):
            assert reason.code is not R.OTHER or reason.detail == part
    assert all(isinstance(r.text, str) for r in reasons)


def _old_database(path: Path, reasons: list[object]) -> None:
    """A schema-8 database (invalid reasons as free text) with one trial per reason."""
    conn = sqlite3.connect(path)
    for step in MIGRATIONS[:8]:
        assert isinstance(step, str)
        conn.executescript(step)
    conn.execute(
        "INSERT INTO runs (id, created_at, status, command, config, environment)"
        " VALUES (1, 'now', 'complete', '[]', '{}', '{}')"
    )
    conn.execute(
        "INSERT INTO targets (id, run_id, position, label, spec, kind)"
        " VALUES (1, 1, 0, 'a', 'bin:/x', 'bin')"
    )
    conn.executemany(
        "INSERT INTO trials (run_id, target_id, seq, repetition, workload, point, params,"
        " started_at, valid, invalid_reason) VALUES (1, 1, ?, 0, 'w', 'p', '{}', 'now', ?, ?)",
        [(seq, int(reason is None), reason) for seq, reason in enumerate(reasons)],
    )
    conn.execute("PRAGMA user_version = 8")
    conn.commit()
    conn.close()


def test_an_old_database_is_migrated_and_keeps_every_reason(tmp_path):
    path = tmp_path / "old.db"
    joined = "12 GET misses (keys not populated or evicted); 3 error replies (ERR x3)"
    _old_database(path, [None, "", OLD_TEXTS[0][0], joined, "what a stranger wrote", 42, b"\xff!"])
    store = Store.open(path)
    assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    columns = {row[1] for row in store.conn.execute("PRAGMA table_info(trials)")}
    assert "invalid_reason" not in columns
    got = [t.reasons for t in store.trials(1)]
    store.close()
    assert got == [
        (),
        (),
        (OLD_TEXTS[0][1],),
        (
            TrialReason(R.GET_MISSES, "12 (keys not populated or evicted)"),
            TrialReason(R.ERROR_REPLIES, "3 (ERR x3)"),
        ),
        (TrialReason(R.OTHER, "what a stranger wrote"),),
        (TrialReason(R.OTHER, "42"),),
        (TrialReason(R.OTHER, "\ufffd!"),),
    ]
    assert reasons_text(got[2]) == OLD_TEXTS[0][0], "reads as it did"


def test_a_view_added_by_hand_that_stops_the_upgrade_is_bad_input(tmp_path):
    """A view over the column schema 9 drops would make the upgrade fail: it is refused
    before the upgrade starts (results/schema_objects.py), one line naming the database
    and the view, exit 2 (what the file holds is the bad input), the file as it was."""
    path = tmp_path / "old.db"
    _old_database(path, ["contended: x"])
    conn = sqlite3.connect(path)
    conn.execute("CREATE VIEW reasons AS SELECT invalid_reason FROM trials")
    conn.commit()
    conn.close()
    proc = cli_in_process("compare", "--list", "--db", str(path))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert f"database {path} holds a view 'reasons' that regtrack did not create" in proc.stderr
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 8
    assert conn.execute("SELECT invalid_reason FROM trials").fetchone() == ("contended: x",)


def test_the_report_of_a_migrated_database_shows_the_reason_as_it_read(tmp_path):
    path = tmp_path / "old.db"
    shutil.copy(Path(__file__).parent / "fixtures" / "schema-v4.db", path)
    out = tmp_path / "html"
    report = cli_in_process("report", "--db", str(path), "--out", str(out))
    assert report.returncode == 0, report.stderr
    pages = "".join(p.read_text() for p in out.rglob("*.html"))
    assert "contended: other processes used 59% of the pinned CPUs" in pages


def _store_with(path: Path, records: list[TrialRecord]) -> tuple[Store, int]:
    store = Store.open(path)
    run_id = store.create_run([], stored_plan(), {}, {})
    ids = {}
    for position, label in enumerate(sorted({r.target_label for r in records})):
        ids[label] = store.add_target(run_id, position, Target(label, "bin:/x", "bin"), {})
    for record in records:
        store.add_trial(run_id, ids[record.target_label], record)
    return store, run_id


def _trial(seq: int, label: str, *reasons: TrialReason, rep: int = 0) -> TrialRecord:
    record = TrialRecord(
        seq, rep, label, "get-pipeline", "pipeline=1", {"pipeline": 1}, "now", ops_per_sec=100.0
    )
    record.valid = True
    for reason in reasons:
        record.mark_invalid(reason.code, reason.detail)
    return record


def test_every_code_round_trips_through_the_store_in_order(tmp_path):
    every = tuple(TrialReason(code, f"detail of {code.value}; with: a colon") for code in R)
    store, run_id = _store_with(tmp_path / "r.db", [_trial(0, "a", *every), _trial(1, "a")])
    (first, second) = store.trials(run_id)
    store.close()
    assert first.reasons == every and not first.valid
    assert second.reasons == () and second.valid


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.sampled_from([c.value for c in R]), st.text(), SQL_INTEGERS, st.binary()),
            st.one_of(st.text(), SQL_INTEGERS, st.floats(allow_nan=False), st.binary()),
        ),
        max_size=4,
    )
)
def test_a_crafted_database_reads_back_safely(rows):
    """Any code or detail a file holds reads as a reason: an unknown code is OTHER, kept."""
    with tempfile.TemporaryDirectory() as tmp:
        store, run_id = _store_with(Path(tmp) / "r.db", [_trial(0, "a")])
        trial_id = store.conn.execute("SELECT id FROM trials").fetchone()[0]
        store.conn.executemany(
            "INSERT INTO trial_reasons (trial_id, position, code, detail) VALUES (?, ?, ?, ?)",
            [(trial_id, i, code, detail) for i, (code, detail) in enumerate(rows)],
        )
        (trial,) = store.trials(run_id)
        store.close()
    assert len(trial.reasons) == len(rows)
    for (code, _), reason in zip(rows, trial.reasons, strict=True):
        known = stored_text(code) in {c.value for c in R}
        assert reason.code.value == stored_text(code) if known else reason.code is R.OTHER
        assert isinstance(reason.text, str)


def test_cells_count_each_kind_once_by_its_code(tmp_path):
    """Figures differ trial to trial (12 misses, 7 misses): one line per code."""
    records = [
        _trial(0, "a", TrialReason(R.GET_MISSES, "12 (keys not populated or evicted)")),
        _trial(
            1,
            "a",
            TrialReason(R.GET_MISSES, "7 (keys not populated or evicted)"),
            TrialReason(R.CLIENT_BOUND, "the load generator used 99% CPU"),
            rep=1,
        ),
        _trial(2, "a", TrialReason(R.OTHER, "an old text: 3"), rep=2),
    ]
    store, run_id = _store_with(tmp_path / "r.db", records)
    (cell,) = cells(trials_frame(store, run_id), THROUGHPUT).to_dict("records")
    store.close()
    assert cell["problems"] == ["GET misses (2x)", "client-bound (1x)", "an old text: 3 (1x)"]
    assert cell["n_invalid"] == 3 and not cell["trusted"]


def test_only_the_client_bound_code_keeps_a_point_from_gating(tmp_path):
    """A detail that merely mentions the words (a loadgen message) does not count."""
    records = [
        _trial(0, "a", TrialReason(R.CLIENT_BOUND, "the load generator used 99% CPU")),
        _trial(1, "b", TrialReason(R.LOADGEN_FAILED, "memtier said: client-bound?")),
    ]
    store, run_id = _store_with(tmp_path / "r.db", records)
    frame = trials_frame(store, run_id)
    store.close()
    excluded = _excluded_points(frame, THROUGHPUT, "a", "b", ["pipeline=1"])
    assert excluded == {
        "pipeline=1": "client-bound in 1 trials: the load generator, not Redis, was measured"
    }
    assert (
        _excluded_points(frame[frame["target"] == "b"], THROUGHPUT, "a", "b", ["pipeline=1"]) == {}
    )


def test_server_died_is_said_once_whoever_noticed_it_first():
    record = _trial(0, "a")
    record.mark_invalid(R.SERVER_DIED, "redis-server exited during the trial")
    mark_died(record, "redis-server of a exited during the trial")
    assert [r.code for r in record.reasons] == [R.SERVER_DIED]
    # The words in another reason's detail are not the code.
    other = _trial(1, "a", TrialReason(R.LOADGEN_FAILED, "server died, says memtier"))
    mark_died(other, "redis-server of a exited during the trial")
    assert [r.code for r in other.reasons] == [R.LOADGEN_FAILED, R.SERVER_DIED]


def test_a_reason_reads_as_label_and_detail():
    assert (
        TrialReason(R.NOT_SERVER_BOUND, "server busy 40%").text
        == "not server-bound: server busy 40%"
    )
    assert TrialReason(R.SERVER_DIED).text == "server died"
    assert TrialReason(R.OTHER, "kept as written").text == "kept as written"
    assert TrialReason.stored("from-the-future", "x") == TrialReason(R.OTHER, "from-the-future: x")
