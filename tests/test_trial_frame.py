"""The store hands analysis typed rows, and the frames built from them have the columns and
dtypes results/trial_frame.py declares, whatever values a run holds, even none."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from regtrack.core.errors import BadInput
from regtrack.core.records import InvalidReason, TrialReason, TrialRecord
from regtrack.results import loaded, schema_objects, stored_trials, trial_frame
from regtrack.results.store import Store
from regtrack.results.stored_trials import StoredCommand, StoredCost, StoredTrial
from regtrack.targets.versions import Target
from tests.conftest import stored_plan


def _trial(**given: object) -> StoredTrial:
    """A trial with every optional figure missing, but what ``given`` sets."""
    base = {name: None for name in StoredTrial._fields} | {
        "id": 1,
        "run_id": 1,
        "target_id": 1,
        "seq": 0,
        "repetition": 0,
        "workload": "get-pipeline",
        "point": "pipeline=1",
        "params": {"pipeline": 1},
        "started_at": "2026-01-01T00:00:00+00:00",
        "valid": True,
        "mode": "throughput",
        "target": "a",
        "reasons": (),
    }
    return StoredTrial(**(base | given))


def _dtypes(frame: pd.DataFrame) -> dict[str, str]:
    return {name: str(dtype) for name, dtype in frame.dtypes.items()}


def _declared(columns: dict[str, str]) -> dict[str, str]:
    return {name: str(pd.api.types.pandas_dtype(d)) for name, d in columns.items()}


def test_a_trial_record_holds_every_column_the_trials_table_has():
    table = list(schema_objects.columns("trials"))
    lifecycle = ["enqueue_per_sec", "round_trips_per_task"]  # from trial_lifecycle
    simulated = list(trial_frame.SIMULATED)  # from trial_cache_sim
    named = ["syscalls_by_name"]  # from trial_syscalls
    assert list(StoredTrial._fields) == [
        *table, "target", "reasons", *lifecycle, *simulated, *named
    ]  # fmt: skip
    derived = ["point_order", "syscalls_per_op", "server_cpu_us_per_op", "commands_per_op"]
    derived += [f"{name}_per_op" for name in simulated]
    assert list(trial_frame.TRIALS) == [*StoredTrial._fields, *derived]


@pytest.mark.parametrize(
    "trials",
    [
        [],
        [_trial()],  # every optional figure missing: no column falls back to object
        [
            _trial(
                ops_per_sec=1000.0, requests=10, server_calls=40, syscalls_read=3,
                syscalls_write=5, seed="00ff", host="h1", argv=("redis-benchmark",),
                enqueue_per_sec=950.0, round_trips_per_task=4.5,
            ),
            _trial(
                id=2, seq=1, repetition=1, params={"pipeline": 10}, point="pipeline=10",
                valid=False, server_calls=0, syscalls_read=1, syscalls_write=1,
                reasons=(TrialReason(InvalidReason.CLIENT_BOUND, "99%"),),
            ),
        ],
    ],
    ids=["empty run", "nothing optional", "mixed"],
)  # fmt: skip
def test_the_trials_frame_has_exactly_the_declared_columns_and_dtypes(trials):
    frame = trial_frame.trials(trials)
    assert _dtypes(frame) == _declared(trial_frame.TRIALS)
    assert len(frame) == len(trials)
    assert frame["point_order"].tolist() == [t.point_order for t in trials]
    assert frame["reasons"].tolist() == [t.reasons for t in trials]


def test_syscalls_per_op_is_missing_where_the_server_counted_no_calls():
    frame = trial_frame.trials(
        [
            _trial(server_calls=40, syscalls_read=3, syscalls_write=5),
            _trial(id=2, seq=1, server_calls=0, syscalls_read=1, syscalls_write=1),
            _trial(id=3, seq=2, server_calls=40),
        ]
    )
    got = frame["syscalls_per_op"].tolist()
    assert got[0] == pytest.approx(0.2) and pd.isna(got[1]) and pd.isna(got[2])


def test_per_op_server_cpu_and_commands_divide_the_trials_server_figures_by_its_operations():
    frame = trial_frame.trials(
        [
            _trial(requests=200, server_calls=2400, server_stats={"server_cpu_s": 0.05}),
            _trial(id=2, seq=1, requests=0, server_calls=10, server_stats={"server_cpu_s": 0.1}),
            _trial(id=3, seq=2, requests=100, server_calls=300, server_stats=None),
        ]
    )
    cpu, commands = frame["server_cpu_us_per_op"].tolist(), frame["commands_per_op"].tolist()
    assert cpu[0] == pytest.approx(250.0) and commands[0] == pytest.approx(12.0)
    assert pd.isna(cpu[1]) and pd.isna(commands[1])  # no operations: nothing per one
    assert pd.isna(cpu[2]) and commands[2] == pytest.approx(3.0)


def test_the_cost_and_command_frames_have_their_declared_columns_even_empty():
    cost = StoredCost(
        1, "main", 10, 20, None, None, None, None, "pipeline=1", "get-pipeline", 5, "a", 1
    )
    command = StoredCommand(
        1, "loadgen", "get", 5.0, 7.0, 0.0, 100.0, 0.5, 0.9, "get-pipeline", "pipeline=1",
        True, "throughput", 0, "a", 1,
    )  # fmt: skip
    for rows, build, columns in (
        ([cost], trial_frame.costs, trial_frame.COSTS),
        ([command], trial_frame.commands, trial_frame.COMMANDS),
    ):
        for given in (rows, []):
            frame = build(given)
            assert _dtypes(frame) == _declared(columns)
            assert frame.to_dict("records") == [dict(zip(columns, r, strict=True)) for r in given]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda item: item.pop("host"), "lacks host"),
        (lambda item: item.update(invalid_reason="x"), "has invalid_reason"),
    ],
)
def test_a_row_without_a_field_or_with_another_column_is_refused_in_one_line(change, words):
    item = _trial()._asdict()
    change(item)
    with pytest.raises(BadInput) as refused:
        stored_trials.record(Path("r.db"), "trials", StoredTrial, item)
    message = str(refused.value)
    assert "\n" not in message and words in message and "trials row 1" in message


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ({"ops_per_sec": "fast"}, "ops_per_sec cannot be float64"),
        ({"requests": 1.5}, "requests cannot be Int64"),
        ({"valid": "yes"}, "valid cannot be bool"),
    ],
)
def test_a_trial_whose_value_its_column_cannot_hold_is_refused_in_one_line(given, words):
    with pytest.raises(trial_frame.FrameError) as refused:
        trial_frame.trials([_trial(), _trial(id=2, seq=1, **given)])
    assert "\n" not in str(refused.value) and words in str(refused.value)


def test_a_frame_with_a_missing_column_or_dtype_is_refused():
    frame = trial_frame.trials([_trial()])
    with pytest.raises(trial_frame.FrameError, match="lacks seed"):
        trial_frame.checked(frame.drop(columns="seed"), trial_frame.TRIALS, "trials")
    with pytest.raises(trial_frame.FrameError, match="in another order"):
        trial_frame.checked(frame[frame.columns[::-1]], trial_frame.TRIALS, "trials")
    with pytest.raises(trial_frame.FrameError, match="seq is float64, not int64"):
        trial_frame.checked(frame.astype({"seq": float}), trial_frame.TRIALS, "trials")


def test_the_store_reads_trials_back_as_records(tmp_path):
    store = Store.open(tmp_path / "r.db")
    run_id = store.create_run([], stored_plan(), {}, {})
    empty = store.create_run([], stored_plan(), {}, {})
    target = store.add_target(run_id, 0, Target("a", "bin:/x", "bin"), {})
    record = TrialRecord(
        seq=0, repetition=0, target_label="a", workload="get-pipeline", point="pipeline=5",
        params={"pipeline": 5}, started_at="2026-01-01T00:00:00+00:00", ops_per_sec=10.0,
        argv=["redis-benchmark", "-P", "5"],
    )  # fmt: skip
    record.mark_invalid(InvalidReason.GET_MISSES, "3")
    store.add_trial(run_id, target, record)
    (trial,) = store.trials(run_id)
    assert isinstance(trial, StoredTrial) and trial.target == "a" and trial.valid is False
    assert trial.argv == ("redis-benchmark", "-P", "5") and trial.point_order == 5
    assert trial.reasons == (TrialReason(InvalidReason.GET_MISSES, "3"),)
    for run in (run_id, empty):
        assert _dtypes(loaded.trials_frame(store, run)) == _declared(trial_frame.TRIALS)
        assert _dtypes(loaded.command_stats(store, run)) == _declared(trial_frame.COMMANDS)
        assert _dtypes(loaded.costs(store, run).costs) == _declared(trial_frame.COSTS)
    (without,) = [r for r in loaded.runs(store) if r.id == empty]
    assert _dtypes(without.trials) == _declared(trial_frame.TRIALS)
    store.close()
