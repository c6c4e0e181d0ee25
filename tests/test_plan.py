from regtrack.bench.plan import interleave, trial_count
from regtrack.workloads.points import Point


def _points(*depths):
    return [Point("get-pipeline", f"pipeline={d}", {"pipeline": d}) for d in depths]


def test_targets_and_points_alternate_direction_each_repetition():
    visits = interleave(["A", "B", "C"], _points(1, 10), 3)
    assert [v.target for v in visits] == ["A", "B", "C", "C", "B", "A", "A", "B", "C"]
    assert [t.point.label for t in visits[0].trials] == ["pipeline=1", "pipeline=10"]
    assert [t.point.label for t in visits[3].trials] == ["pipeline=10", "pipeline=1"]


def test_every_target_point_pair_gets_every_repetition_once():
    visits = interleave(["A", "B"], _points(1, 5, 10), 4)
    trials = [t for v in visits for t in v.trials]
    assert trial_count(visits) == len(trials) == 2 * 3 * 4
    assert [t.seq for t in trials] == list(range(len(trials)))
    pairs = {(t.target, t.point.label, t.repetition) for t in trials}
    assert len(pairs) == len(trials)


def test_each_target_is_first_as_often_as_last():
    visits = interleave(["A", "B"], _points(1), 2)
    firsts = (
        next(v.target for v in visits if v.repetition == 0),
        next(v.target for v in visits if v.repetition == 1),
    )
    assert firsts == ("A", "B")


def test_modes_visit_every_target_back_to_back():
    visits = interleave(["A", "B"], _points(10), 2, ("throughput", "instructions"))
    assert [(v.target, v.mode) for v in visits] == [
        ("A", "throughput"), ("B", "throughput"), ("A", "instructions"), ("B", "instructions"),
        ("B", "throughput"), ("A", "throughput"), ("B", "instructions"), ("A", "instructions"),
    ]  # fmt: skip
    trials = [t for v in visits for t in v.trials]
    assert [t.seq for t in trials] == list(range(8))


def test_an_extended_or_narrowed_plan_numbers_trials_as_the_full_plan():
    full = interleave(["A", "B"], _points(10, 30), 6, ("throughput", "instructions"))
    by_key = {
        (t.repetition, t.target, v.mode, t.point.label): t.seq for v in full for t in v.trials
    }
    later = interleave(
        ["A", "B"], _points(10, 30), 6, ("throughput", "instructions"), first=4,
        narrowed={4: ("throughput",), 5: ("throughput",)},
    )  # fmt: skip
    assert {v.mode for v in later} == {"throughput"}
    assert {v.repetition for v in later} == {4, 5}
    for v in later:
        for t in v.trials:
            assert t.seq == by_key[(t.repetition, t.target, v.mode, t.point.label)]


def test_paired_throughput_is_one_visit_of_every_target_per_repetition():
    """Paired in time: each repetition's throughput trials are one visit of all targets
    (forwards, then backwards the next repetition), each point's targets side by side,
    numbered as the separate visits are; instruction visits stay one server each."""
    modes = ("throughput", "instructions")
    separate = interleave(["A", "B"], _points(10, 30), 2, modes)
    paired = interleave(["A", "B"], _points(10, 30), 2, modes, paired=("throughput",))
    assert [(v.target, v.mode, v.together) for v in paired] == [
        ("A", "throughput", ("A", "B")), ("A", "instructions", ()), ("B", "instructions", ()),
        ("B", "throughput", ("B", "A")), ("B", "instructions", ()), ("A", "instructions", ()),
    ]  # fmt: skip
    assert [(t.point.label, t.target) for t in paired[3].trials] == [
        ("pipeline=30", "B"), ("pipeline=30", "A"), ("pipeline=10", "B"), ("pipeline=10", "A"),
    ]  # fmt: skip
    seqs = lambda visits: {  # noqa: E731
        (t.repetition, t.target, v.mode, t.point.label): t.seq for v in visits for t in v.trials
    }
    assert seqs(paired) == seqs(separate)
    assert interleave(["A"], _points(10), 2, paired=("throughput",)) == interleave(
        ["A"], _points(10), 2
    )
