"""Value-size distributions (issue 49) on constructed records, no server: the five
quantiles a capture keeps (traffic/value_sizes.py), the header block they are written in
and read back from (old files too, a line not in the format never a record), a lifecycle
file that writes a value whose sizes varied as ``${fill:...}`` and one that did not as
plain filler, and --check's comparison: a replay drawing from those five sizes gives back
the traffic's p10, p50 and p90; one at the median alone does not."""

from __future__ import annotations

import random
import statistics
import tomllib

from hypothesis import given, settings
from hypothesis import strategies as st

from regtrack.analysis.capture_check import Replayed, SizeSides, compare
from regtrack.core.records import CommandReading
from regtrack.output import capture_check_text
from regtrack.workloads.lifecycle import LifecycleWorkload
from regtrack.workloads.traffic import lifecyclefile, value_sizes
from regtrack.workloads.traffic.shapes import Sizes, infer
from regtrack.workloads.traffic.value_sizes import SizeRecord
from tests import tiers
from tests.test_traffic_lifecycle import _sampled
from tests.test_traffic_shapes import line, records

sizes_lists = st.lists(st.integers(0, 10_000_000), min_size=1, max_size=300)


@settings(max_examples=tiers.examples(500), deadline=None)
@given(sizes_lists)
def test_five_quantiles_in_order_within_the_range_their_middle_the_median(values):
    s = Sizes.of(values)
    assert len(s.quantiles) == 5 and list(s.quantiles) == sorted(s.quantiles)
    assert s.low <= s.quantiles[0] and s.quantiles[-1] <= s.high
    assert s.quantiles[2] == s.median == int(statistics.median(values))
    assert s.varied == (
        len(values) >= value_sizes.MIN_DRAWN
        and s.high > value_sizes.NARROW * s.low
        and len(set(s.quantiles)) > 1
    )


@settings(max_examples=tiers.examples(500), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["SET", "HSET", "XADD"]), st.integers(1, 40),
                          sizes_lists), max_size=6))  # fmt: skip
def test_the_header_block_reads_back_what_was_written(rows):
    written = [
        SizeRecord(cmd, pos, s.low, s.median, s.high, s.n, s.quantiles)
        for cmd, pos, values in rows
        for s in [Sizes.of(values)]
    ]
    text = "\n".join(["# other", *value_sizes.header_lines(written), 'name = "x"'])
    assert value_sizes.recorded(text) == written


def test_older_files_are_read_and_a_line_out_of_format_or_order_is_no_record():
    old = [value_sizes.OLD_TITLE, "#   LPUSH argument 2: 85/100/115 over 31",
           "#   SET argument 2: 300/300/300 over 31"]  # fmt: skip
    assert [(r.command, r.median, r.p10) for r in value_sizes.recorded("\n".join(old))] == [
        ("LPUSH", 100, None),
        ("SET", 300, None),
    ]
    good = "#   SET argument 2: 1/2/3/4/5/6/7 over 9"
    for bad in (
        "#   SET argument 2: 1/2/3/9/5/6/7 over 9",  # not in order
        "#   SET argument 2: 85/100/115 over 31",  # the old form under the new title
        "#   set argument 2: 1/2/3/4/5/6/7 over 9",
        "#   SET argument 2: 1/2/3/4/5/6/7 over 9 ",
    ):
        text = "\n".join([value_sizes.TITLE, good, bad, good])
        (only,) = value_sizes.recorded(text)
        assert only.quantiles == (2, 3, 4, 5, 6) and only.median == 4


def _reading(**calls: int) -> CommandReading:
    return CommandReading(1.0, dict(calls), {c: 2.0 * n for c, n in calls.items()}, 0.01, "7.0.15")


DISTRIBUTIONS = {
    "uniform 200 B-20 KB": [200 + (i * 7919) % 19_801 for i in range(300)],
    "two modes": [120] * 180 + [9000] * 120,
    "long tail": [int(100 * 1.03**i) for i in range(150)],
    "mostly one size": [512] * 250 + list(range(1, 51)),
}


def test_drawing_from_the_five_sizes_gives_back_p10_p50_p90():
    """The method, not luck: each p10, p50, p90 sits in the middle of a fifth of the draws,
    so 400 draws (what --check's sizes run samples) land on it; seeded, so repeatable."""
    rng = random.Random(49)
    for name, values in DISTRIBUTIONS.items():
        real = Sizes.of(values)
        record = SizeRecord("HSET", 4, real.low, real.median, real.high, real.n, real.quantiles)
        draws = Sizes.of([rng.choice(real.quantiles) for _ in range(400)])
        at_median = Sizes.of([real.median] * 400)  # what a mix (memtier) sends
        check = compare(_reading(hset=10), _reading(hset=10), [
            SizeSides(record, draws, drawn=True), SizeSides(record, at_median, drawn=True),
            SizeSides(record, at_median, drawn=False),
        ])  # fmt: skip
        drawn, median_only, mixed = check.sizes
        assert drawn.spread and drawn.gated and drawn.within, (name, drawn.pairs())
        assert [p[0] for p in drawn.pairs()] == ["p10", "p50", "p90"]
        assert not median_only.within, name  # its p10 and p90 are not the traffic's
        assert not mixed.gated and mixed.within and [p[0] for p in mixed.pairs()] == ["p50"]


def test_the_table_shows_p10_and_p90_of_a_drawn_size_and_names_the_one_off():
    record = SizeRecord("HSET", 4, 200, 10_100, 20_000, 300, (2180, 6140, 10_100, 14_060, 18_020))
    good = Sizes.of([2180, 6140, 10_100, 14_060, 18_020] * 80)
    low = Sizes.of([2180, 6140, 10_100, 14_060, 10_100] * 80)  # its p90 too low
    real, replay = _reading(hset=10), _reading(hset=10)
    ok = compare(real, replay, [SizeSides(record, good, drawn=True)])
    text = capture_check_text.render(Replayed(ok, "redis://h", "engine", "0", "1", 1, True))
    assert ("HSET argument 4: 10100 / 10100  +0.0%  p10 2180 / 2180  +0.0%  "
            "p90 18020 / 18020  +0.0%  ok") in text, text  # fmt: skip
    assert text.splitlines()[-1].endswith("value sizes within 10%")
    off = compare(real, replay, [SizeSides(record, low, drawn=True)])
    assert capture_check_text.verdict(off) == "OFF (exit 1): HSET argument 4 p90 size -22.0%"


def test_only_a_position_one_command_draws_is_judged_by_its_distribution():
    commands = [
        ["HSET", "job:${task}", "data", "${fill:10,20,30}"],
        ["LPUSH", "q", "${fill:5,5}"],  # one size: nothing to judge by its spread
        ["SET", "a", "${fill:1,9}"], ["SET", "b", "${fill:1,9}"],  # a mixture of two
        ["XADD", "s", "*", "f", "x${fill:1,9}"],  # not the whole argument
    ]  # fmt: skip
    assert value_sizes.drawn(commands) == {("HSET", 3)}
    # a task's id is the engine's 32 hex digits (a uuid seen is 36): its size, not judged
    ids = [["LPUSH", "q", "${task}"], ["SET", "a", "x"], ["SET", "b", "t-${now}"]]
    assert value_sizes.engine_sized(ids) == {("LPUSH", 2), ("SET", 2)}
    record = SizeRecord("LPUSH", 2, 36, 36, 36, 50, (36,) * 5)
    (row,) = compare(_reading(lpush=9), _reading(lpush=9),
                     [SizeSides(record, Sizes.of([32]), engine=True)]).sizes  # fmt: skip
    assert not row.gated and row.within
    # a position two of the file's commands reach: their mixture, shown, not judged
    assert value_sizes.shared(commands) == {("SET", 1)}  # its ${fill:1,9} twice: one size
    assert value_sizes.shared([["SET", "a", "xx"], ["SET", "b", "xxx"]]) == {("SET", 1), ("SET", 2)}
    status = SizeRecord("HSET", 31, 6, 8, 8, 300, (6, 6, 8, 8, 8))
    (row,) = compare(_reading(hset=9), _reading(hset=9),
                     [SizeSides(status, Sizes.of([6]), shared=True)]).sizes  # fmt: skip
    assert row.narrow and not row.gated and row.within
    text = capture_check_text.render(
        Replayed(
            compare(
                _reading(hset=9), _reading(hset=9), [SizeSides(status, Sizes.of([6]), shared=True)]
            ),
            "redis://h",
            "e",
            "0",
            "1",
            1,
            True,
        )
    )
    assert "HSET argument 31: 8 / 6  -25.0%  (sent by several of the file's commands" in text


PRODUCER, WORKER = "10.0.0.1:100", "10.0.0.2:200"


def _queue(sizes: list[int]) -> list[bytes]:
    """A queue whose job hash holds a payload of ``sizes[i]`` bytes and a 30-byte state."""
    out = []
    for i, size in enumerate(sizes):
        job = f"{i:08x}-2d15-4039-bd6b-3055ef3a0726"
        out += [
            line(i, PRODUCER, "MULTI"),
            line(i, PRODUCER, "HSET", f"job:{job}", "data", "p" * size, "state", "s" * 30),
            line(i, PRODUCER, "LPUSH", "q", job),
            line(i, PRODUCER, "EXEC"),
            line(i + 0.5, WORKER, "BRPOP", "q", "1"),
            line(i + 0.5, WORKER, "HGET", f"job:{job}", "data"),
            line(i + 0.5, WORKER, "DEL", f"job:{job}"),
        ]
    return [*out, line(len(sizes) + 1.0, WORKER, "BRPOP", "q", "1")]


def test_a_value_whose_size_varied_is_written_as_its_distribution_in_a_lifecycle():
    payloads = DISTRIBUTIONS["uniform 200 B-20 KB"][:60]
    written = lifecyclefile.text(_sampled(_queue(payloads)), "sized", {})
    assert written.kind == "lifecycle", written.why_not
    wl = LifecycleWorkload(**tomllib.loads(written.text))
    (hset,) = [c for s in wl.enqueue for c in s.commands if c[0] == "HSET"]
    real = Sizes.of(payloads)
    # the template's own: the first enqueue left out (the sample may have cut it)
    drawn = Sizes.of(payloads[1:]).quantiles
    assert hset[3] == "${fill:" + ",".join(map(str, drawn)) + "}"
    assert hset[5] == "x" * 30  # one size: plain filler
    assert value_sizes.drawn(args for _, args in wl.located_args()) == {("HSET", 3)}
    by = {(r.command, r.position): r for r in value_sizes.recorded(written.text)}
    assert by[("HSET", 3)].quantiles == real.quantiles and by[("HSET", 3)].n == 60
    assert by[("HSET", 5)].quantiles == (30,) * 5
    assert "${fill:...}" in wl.approximations and "# Fields per call" in written.text
    # the same queue with too few tasks to tell, or payloads of about one size: plain
    for sizes in ([200 + 300 * i for i in range(12)], [1000 + i % 7 for i in range(60)]):
        text = lifecyclefile.text(_sampled(_queue(sizes)), "sized", {}).text
        assert "${fill:" not in text and "x" * int(statistics.median(sizes)) in text


def test_the_header_records_what_the_sample_saw_for_the_commands_the_file_sends():
    seen = infer(records(_queue([300] * 30)))
    lines = lifecyclefile._sizes(seen, {"HSET"})
    assert lines[0].startswith("# Fields per call, as seen") and "HSET 2-2" in lines[0]
    assert lines[1] == value_sizes.TITLE
    assert lines[2:] == ["#   HSET argument 3: 300/300/300/300/300/300/300 over 30",
                         "#   HSET argument 5: 30/30/30/30/30/30/30 over 30"]  # fmt: skip
