"""memtier_benchmark: its real reports parsed, its command lines built, real runs measured.

The fixtures (tests/fixtures/memtier, see README.txt there) are unedited outputs of
memtier_benchmark 2.3.0 against Redis 7.0.15.
"""

from __future__ import annotations

import io
import json
import math
import re
import stat
from pathlib import Path

import pytest
import redis

from regtrack.bench.loadgen import base, memtier, memtier_argv, memtier_report
from regtrack.bench.loadgen.base import Aim, LoadgenBinary
from regtrack.bench.runtimes.native import native_server, taskset_path
from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.core.records import LoadSpec, MixCommand

FIXTURES = Path(__file__).parent / "fixtures" / "memtier"
GET_P1 = "get_r7.0.15_pipeline1_c50_d1000_10s"
GET_P10 = "get_r7.0.15_pipeline10_c50_d1000_10s"
POPULATE = "populate_r7.0.15_allkeys_100k_d1000"
QUEUE_P1 = "queue_mix_asis_r7.0.15_pipeline1"
QUEUE_P10 = "queue_mix_asis_r7.0.15_pipeline10"
QUEUE_CLEAN = "queue_mix_clean_noack_breakdown-line_r7.0.15_pipeline10"
DUP_LINE = "arbitrary_2xSET_GET_breakdown-line_DUPLICATE_JSON_KEYS_r7.0.15_pipeline1"
DUP_COMMAND = "arbitrary_2xSET_GET_breakdown-command_r7.0.15_pipeline1"
ALL_REPORTS = [GET_P1, GET_P10, POPULATE, QUEUE_P1, QUEUE_P10, QUEUE_CLEAN, DUP_LINE, DUP_COMMAND]
FAKE_BINARY = LoadgenBinary(
    name=memtier.NAME, path="/opt/mt/memtier_benchmark", version="v", sha256="0"
)


def report(name: str) -> dict:
    return memtier_report.parse_json((FIXTURES / f"{name}.json").read_text())


def text_table(name: str) -> dict[str, dict[str, str]]:
    """memtier's own text table (stdout) of a fixture: {row: {column: cell}}, "Sets#2"..."""
    path = next(FIXTURES.glob(f"{name}.stdout*.txt"))
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Type "))
    columns = re.split(r"\s{2,}", lines[start].strip())
    rows: dict[str, dict[str, str]] = {}
    for line in lines[start + 2 :]:
        cells = line.split()
        if len(cells) != len(columns):
            break
        name_, n = cells[0], 1
        while name_ in rows:
            n += 1
            name_ = f"{cells[0]}#{n}"
        rows[name_] = dict(zip(columns[1:], cells[1:], strict=True))
    return rows


# --- the parser, on every real report ----------------------------------------------------


def test_get_sweep_pipeline1_totals_average_comes_from_accumulated_latency():
    parsed = report(GET_P1)
    # The file's Totals "Average Latency" is 0.000 (cut to whole ms); the text table says
    # 0.37778. Accumulated Latency 499755 ms over 1324669 requests is the exact mean.
    assert parsed.totals == {
        "ops_per_sec": 132435.72,
        "count": 1324669,
        "avg": 499755 / 1324669,
        "p50": 0.367,
        "p99": 0.575,
        "p999": 1.599,
    }
    assert parsed.totals["avg"] == pytest.approx(0.37778, rel=0.002)
    assert list(parsed.commands) == ["Gets"]  # unused Sets and Waits rows dropped
    assert parsed.commands["Gets"]["avg"] == 499755 / 1324669
    assert parsed.duration_s == pytest.approx(10.003)
    assert parsed.requests == 1324669
    assert parsed.connection_errors == 0
    assert parsed.last_busy_second == 10


def test_get_sweep_pipeline10_totals_average_is_not_the_whole_millisecond():
    parsed = report(GET_P10)
    # Totals "Average Latency" in the file: 1.000; the text table: 1.14825.
    assert parsed.totals["avg"] == 4999196 / 4355379
    assert parsed.totals["avg"] == pytest.approx(1.14825, rel=0.002)
    assert parsed.totals["ops_per_sec"] == 435431.26
    assert parsed.commands["Gets"] == {
        "ops_per_sec": 435431.26,
        "count": 4355379,
        "avg": 4997474 / 4355379,
        "p50": 1.023,
        "p99": 1.663,
        "p999": 4.799,
    }
    assert list(parsed.commands) == ["Gets"]
    assert parsed.requests == 4355379


def test_populate_keeps_only_the_sets_row():
    parsed = report(POPULATE)
    assert list(parsed.commands) == ["Sets"]
    assert parsed.commands["Sets"] == {
        "ops_per_sec": 133849.10,
        "count": 100000,
        "avg": 37333 / 100000,
        "p50": 0.359,
        "p99": 0.575,
        "p999": 1.775,
    }
    assert parsed.requests == 100000
    assert parsed.duration_s == pytest.approx(0.747)
    assert parsed.last_busy_second == 0


def test_duplicate_json_keys_keep_both_sets_rows():
    text = (FIXTURES / f"{DUP_LINE}.json").read_text()
    assert len(json.loads(text)["ALL STATS"]) == 4  # plain json.load loses the first "Sets"
    parsed = memtier_report.parse_json(text)
    assert list(parsed.commands) == ["Sets", "Sets#2", "Gets"]
    assert parsed.commands["Sets"]["count"] == 129883
    assert parsed.commands["Sets"]["ops_per_sec"] == 43281.20
    assert parsed.commands["Sets"]["p999"] == 0.183
    assert parsed.commands["Sets#2"]["count"] == 129878
    assert parsed.commands["Sets#2"]["ops_per_sec"] == 43279.54
    assert parsed.commands["Sets#2"]["p999"] == 0.191
    assert parsed.commands["Gets"]["count"] == 129876
    assert parsed.requests == 389637 == 129883 + 129878 + 129876
    assert parsed.totals["avg"] == 29924 / 389637


def test_breakdown_by_command_merges_same_named_commands():
    parsed = report(DUP_COMMAND)
    assert list(parsed.commands) == ["Sets", "Gets"]
    assert parsed.commands["Sets"]["count"] == 256414
    assert parsed.commands["Gets"]["count"] == 128200
    assert parsed.requests == 384614


def test_duplicate_command_report_shows_memtiers_whole_second_duration_error():
    """A 3 s run reported as 4.000 s: its Ops/sec (96131) is a quarter too low."""
    parsed = report(DUP_COMMAND)
    assert parsed.duration_s == 4.0
    assert parsed.last_busy_second == 3
    duration = memtier_report.true_duration(parsed, test_time=3)
    assert duration == pytest.approx(384614 / 96131.58 - 1)
    assert duration == pytest.approx(3.0009, abs=0.0005)
    # The same workload with the other breakdown, whose duration came out right:
    assert report(DUP_LINE).totals["ops_per_sec"] == pytest.approx(384614 / duration, rel=0.02)


@pytest.mark.parametrize("name", [n for n in ALL_REPORTS if n != DUP_COMMAND])
def test_durations_that_are_right_stay_as_they_are(name):
    parsed = report(name)
    duration = memtier_report.true_duration(parsed, wall_s=parsed.duration_s + 1.5)
    assert duration == pytest.approx(parsed.duration_s, abs=0.001)


def _report(
    count: int, ops: float, duration_s: float, last_busy_second: int | None = None
) -> memtier_report.MemtierReport:
    """A report's totals row, duration and time series end, with no command rows."""
    totals = {"count": count, "ops_per_sec": ops}
    return memtier_report.MemtierReport(totals, {}, duration_s, count, 0, last_busy_second)


def test_duration_is_moved_by_whole_seconds_only_into_the_asked_time():
    parsed = _report(109072, 12116418.57, 0.009)
    assert memtier_report.true_duration(parsed, test_time=1) == pytest.approx(1.009, abs=1e-4)
    parsed = _report(117988, 58859.14, 2.005)
    assert memtier_report.true_duration(parsed, test_time=1) == pytest.approx(1.005, abs=1e-3)
    # Without a test time: between the last busy second and the process's wall time.
    parsed = _report(50000, 50000 / 2.4, 2.4, last_busy_second=1)
    assert memtier_report.true_duration(parsed, wall_s=1.9) == pytest.approx(1.4)
    assert memtier_report.true_duration(parsed, wall_s=0.5) is None  # nothing fits


def test_queue_mix_rows_are_named_after_the_arbitrary_commands():
    parsed = report(QUEUE_P1)
    assert list(parsed.commands) == ["Xadds", "Xreadgroups", "Sets", "Hsets"]
    assert parsed.commands["Xadds"] == {
        "ops_per_sec": 31764.42,
        "count": 317808,
        "avg": 124911 / 317808,  # the file's "Average Latency": 0.394
        "p50": 0.375,
        "p99": 0.599,
        "p999": 1.927,
    }
    assert parsed.commands["Xreadgroups"]["count"] == 317794
    assert parsed.commands["Hsets"]["p99"] == 0.599
    assert parsed.totals["ops_per_sec"] == 127049.19
    assert parsed.totals["avg"] == pytest.approx(0.39356, rel=0.002)
    p10 = report(QUEUE_P10)
    assert list(p10.commands) == ["Xadds", "Xreadgroups", "Sets", "Hsets"]
    assert p10.commands["Xreadgroups"]["ops_per_sec"] == 139988.86
    assert p10.requests == 5601760


def test_clean_queue_mix_has_all_five_rows_with_the_same_batch_latency():
    parsed = report(QUEUE_CLEAN)
    assert list(parsed.commands) == ["Xadds", "Xreadgroups", "Sets", "Hsets", "Xacks"]
    # Pipelined 10 deep, every row shows the batch's latency, not the command's own.
    assert {row["p50"] for row in parsed.commands.values()} == {0.703}
    assert {row["count"] for row in parsed.commands.values()} == {1359606}
    assert parsed.commands["Xacks"]["avg"] == 996615 / 1359606
    assert parsed.requests == 6798030 == 5 * 1359606


@pytest.mark.parametrize("name", ALL_REPORTS)
def test_every_report_agrees_with_memtiers_own_text_table(name):
    parsed = report(name)
    table = text_table(name)
    rows = {**parsed.commands, "Totals": parsed.totals}
    for row_name, cells in table.items():
        if row_name not in rows:
            # A dropped row is a GET/SET row of a command never sent.
            assert cells["Ops/sec"] == "0.00" and cells["p50 Latency"] == "---", row_name
            continue
        row = rows[row_name]
        assert row["ops_per_sec"] == float(cells["Ops/sec"]), row_name
        assert row["p50"] == float(cells["p50 Latency"]), row_name
        assert row["p99"] == float(cells["p99 Latency"]), row_name
        assert row["p999"] == float(cells["p99.9 Latency"]), row_name
        # The table's average comes from the latency histogram (bucketed), ours is exact.
        assert row["avg"] == pytest.approx(float(cells["Avg. Latency"]), rel=0.015), row_name
    assert set(rows) <= set(table)


def test_dashes_and_missing_fields_are_left_out():
    raw = json.loads((FIXTURES / f"{QUEUE_P1}.json").read_text())
    stats = raw["ALL STATS"]
    stats["Hsets"]["Percentile Latencies"]["p99.00"] = "---"
    stats["Hsets"]["Ops/sec"] = "---"
    del stats["Hsets"]["Accumulated Latency"]
    del stats["Xadds"]["Percentile Latencies"]
    parsed = memtier_report.parse_json(json.dumps(raw))
    hsets = parsed.commands["Hsets"]
    assert "ops_per_sec" not in hsets and "p99" not in hsets
    assert hsets["avg"] == 0.393  # falls back to "Average Latency"
    assert set(parsed.commands["Xadds"]) == {"ops_per_sec", "count", "avg"}


def test_get_set_rows_all_dashes_are_dropped():
    raw = json.loads((FIXTURES / f"{GET_P1}.json").read_text())
    for row in ("Sets", "Waits"):
        for key in raw["ALL STATS"][row]:
            if key not in ("Time-Serie", "Percentile Latencies"):
                raw["ALL STATS"][row][key] = "---"
    assert list(memtier_report.parse_json(json.dumps(raw)).commands) == ["Gets"]


def test_an_unsent_arbitrary_command_keeps_its_row_without_latencies():
    raw = json.loads((FIXTURES / f"{QUEUE_P1}.json").read_text())
    raw["ALL STATS"]["Hsets"].update({"Count": 0, "Ops/sec": 0.0, "Accumulated Latency": 0})
    parsed = memtier_report.parse_json(json.dumps(raw))
    assert parsed.commands["Hsets"] == {"ops_per_sec": 0.0, "count": 0}


def test_unusable_reports_raise_clear_errors():
    with pytest.raises(ValueError, match="not valid JSON"):
        memtier_report.parse_json("Json file out.json created...\n")
    with pytest.raises(ValueError, match="not valid JSON"):
        memtier_report.parse_json((FIXTURES / f"{GET_P1}.json").read_text()[:5000])  # cut short
    best = (FIXTURES / f"{GET_P1}.json").read_text().replace("ALL STATS", "BEST RUN RESULTS")
    with pytest.raises(ValueError, match=r'no "ALL STATS" section.*BEST RUN RESULTS'):
        memtier_report.parse_json(best)
    with pytest.raises(ValueError, match="Totals"):
        memtier_report.parse_json('{"ALL STATS": {"Runtime": {}}}')


# --- stderr ------------------------------------------------------------------------------


def test_error_replies_are_counted_in_a_real_stderr():
    text = (FIXTURES / f"{QUEUE_P1}.stderr.TRUNCATED.txt").read_bytes()
    digest = memtier_report.digest_stderr(io.BytesIO(text))
    assert digest.error_replies == text.decode().count(memtier_report.ERROR_REPLY_MARK) == 23
    assert digest.lines == 33  # under 40 lines: kept whole
    assert digest.text == text.decode().rstrip("\n")
    assert digest.connection_errors == 0


def test_a_huge_stderr_is_read_line_by_line_and_progress_lines_split_on_cr():
    error = b"server 127.0.0.1:1 handle error response: -WRONGTYPE Operation against a key\n"
    progress = b"[RUN #1 50%,   1 secs]  1 threads 50 conns: 5 ops\r"
    stream = io.BytesIO(b"Json file x created...\n" + (error + progress) * 200_000 + b"done\n")
    digest = memtier_report.digest_stderr(stream)
    assert digest.error_replies == 200_000
    assert digest.lines == 400_002
    assert len(digest.text.splitlines()) == 41
    assert "399962 stderr lines dropped" in digest.text
    assert digest.message == "done"


def test_clean_stderr_has_no_error_replies():
    text = (FIXTURES / f"{QUEUE_CLEAN}.stderr.txt").read_bytes()
    digest = memtier_report.digest_stderr(io.BytesIO(text))
    assert digest.error_replies == 0
    assert digest.connection_errors == 0
    assert "dropped" not in digest.text


# --- command lines -----------------------------------------------------------------------


def aim_at(binary: LoadgenBinary = FAKE_BINARY, port: int = 7000, **kw) -> Aim:
    return Aim(binary=binary, host="127.0.0.1", port=port, cpus=(1,), **kw)


def spec(**kw) -> LoadSpec:
    defaults = dict(clients=50, threads=1, pipeline=10, data_size=1000, key_min=1, key_max=1000)
    return LoadSpec(**{**defaults, **kw})


def test_get_sweep_argv():
    args = memtier_argv.argv(
        aim_at(), spec(key_prefix="key:"), json_out=Path("/tmp/r.json"), test_time=10
    )
    assert args == [
        taskset_path(),
        "-c",
        "1",
        "/opt/mt/memtier_benchmark",
        "-s",
        "127.0.0.1",
        "-p",
        "7000",
        "-t",
        "1",
        "-c",
        "50",
        "--pipeline",
        "10",
        "-d",
        "1000",
        "--hide-histogram",
        "--json-out-file",
        "/tmp/r.json",
        "--key-minimum=1",
        "--key-maximum=1000",
        "--key-prefix=key:",
        "--test-time=10",
        "--ratio=0:1",
        "--key-pattern=R:R",
    ]


def test_mix_argv_quotes_arguments_and_has_no_get_set_options():
    commands = (
        MixCommand(("XADD", "q", "*", "f", "__data__")),
        MixCommand(("HSET", "h:__key__", "status", "all done"), ratio=2, key_pattern="G"),
    )
    args = memtier_argv.argv(
        aim_at(), spec(commands=commands), json_out=Path("/r.json"), test_time=1
    )
    assert args[-6:] == [
        "--command=XADD q * f __data__",
        "--command-ratio=1",
        "--command-key-pattern=R",
        '--command=HSET h:__key__ status "all done"',
        "--command-ratio=2",
        "--command-key-pattern=G",
    ]
    assert not any(a.startswith(("--ratio", "--key-pattern")) for a in args)
    assert "--command-stats-breakdown=line" not in args


def test_breakdown_by_line_only_when_two_commands_share_a_name():
    same = (MixCommand(("SET", "a:__key__", "__data__")), MixCommand(("set", "b:__key__", "1")))
    args = memtier_argv.argv(aim_at(), spec(commands=same), json_out=Path("/r.json"), test_time=1)
    assert args[-1] == "--command-stats-breakdown=line"
    differ = (MixCommand(("SET", "a:__key__", "__data__")), MixCommand(("GET", "a:__key__")))
    args = memtier_argv.argv(aim_at(), spec(commands=differ), json_out=Path("/r.json"), test_time=1)
    assert "--command-stats-breakdown=line" not in args


@pytest.mark.parametrize(
    ("total", "clients", "threads", "per_client"),
    [(100, 3, 2, 17), (96, 3, 2, 16), (1, 50, 4, 1), (5_500_000, 50, 1, 110_000)],
)
def test_requests_are_per_client_rounded_up(total, clients, threads, per_client):
    args = memtier_argv.argv(
        aim_at(), spec(clients=clients, threads=threads), json_out=Path("/r"), requests=total
    )
    assert f"--requests={per_client}" in args
    assert not any(a.startswith("--test-time") for a in args)


@pytest.mark.parametrize(("asked", "sent"), [(0.2, 1), (1.0, 1), (1.4, 1), (2.5, 3), (30, 30)])
def test_test_time_is_whole_seconds_at_least_one(asked, sent):
    args = memtier_argv.argv(aim_at(), spec(), json_out=Path("/r"), test_time=asked)
    assert f"--test-time={sent}" in args
    assert not any(a.startswith("--requests") for a in args)


def test_exactly_one_of_test_time_and_requests():
    with pytest.raises(ValueError, match="exactly one"):
        memtier_argv.argv(aim_at(), spec(), json_out=Path("/r"))
    with pytest.raises(ValueError, match="exactly one"):
        memtier_argv.argv(aim_at(), spec(), json_out=Path("/r"), test_time=1, requests=10)


def test_every_option_used_is_in_memtiers_help():
    help_text = (FIXTURES / "help.txt").read_text()
    mix = (MixCommand(("SET", "__key__", "__data__")), MixCommand(("SET", "x", "1")))
    for s, length in ((spec(), {"test_time": 1}), (spec(commands=mix), {"requests": 10})):
        args = memtier_argv.argv(aim_at(), s, json_out=Path("/r"), **length)
        for arg in args[4:]:
            if arg.startswith("--"):
                assert f"{arg.split('=')[0]}" in help_text, arg
            elif arg.startswith("-"):
                assert f"{arg}, " in help_text or f"{arg}  " in help_text, arg


def memtier_split(text: str) -> list[bytes]:
    """A line-by-line port of memtier 2.3.0's arbitrary_command::split_command_to_args."""
    data = text.encode()
    args: list[bytes] = []
    i = 0
    hexdigits = b"0123456789abcdefABCDEF"
    while True:
        while i < len(data) and data[i : i + 1].isspace():
            i += 1
        if i >= len(data):
            return args
        buf = bytearray()
        in_dq = in_sq = done = False
        while not done:
            c = data[i : i + 1]
            nxt = data[i + 1 : i + 2]
            if in_dq:
                if (
                    c == b"\\"
                    and nxt == b"x"
                    and all(data[j : j + 1] and data[j] in hexdigits for j in (i + 2, i + 3))
                ):
                    buf.append(int(data[i + 2 : i + 4], 16))
                    i += 3
                elif c == b"\\" and nxt:
                    i += 1
                    buf += {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"a": b"\a"}.get(
                        data[i : i + 1], data[i : i + 1]
                    )
                elif c == b'"':
                    if nxt and not nxt.isspace():
                        raise AssertionError(f"memtier rejects {text!r}")
                    done = True
                elif not c:
                    raise AssertionError(f"memtier rejects {text!r}: unterminated quotes")
                else:
                    buf += c
            elif in_sq:
                if c == b"\\" and nxt == b"'":
                    i += 1
                    buf += b"'"
                elif c == b"'":
                    if nxt and not nxt.isspace():
                        raise AssertionError(f"memtier rejects {text!r}")
                    done = True
                elif not c:
                    raise AssertionError(f"memtier rejects {text!r}: unterminated quotes")
                else:
                    buf += c
            elif c in (b" ", b"\n", b"\r", b"\t", b""):
                done = True
            elif c == b'"':
                in_dq = True
            elif c == b"'":
                in_sq = True
            else:
                buf += c
            if c:
                i += 1
        args.append(bytes(buf))


TRICKY_ARGUMENTS = [
    "plain",
    "k:__key__",
    "two words",
    "",
    'say "hi"',
    "it's",
    "'",
    '"',
    "back\\slash",
    "\\x41 is not A",
    "tab\there",
    "new\nline\r\n",
    "nul\x00byte",
    "\x7f\x01",
    "café ☕",
    "-starts-with-dash",
    "ends with space ",
    '"quoted"',
]


@pytest.mark.parametrize("arg", TRICKY_ARGUMENTS)
def test_command_text_splits_back_into_the_same_arguments(arg):
    text = memtier_argv.command_text(("SET", arg, "__data__"))
    assert text.isascii() and text.isprintable()
    assert memtier_split(text) == [b"SET", arg.encode(), b"__data__"]


def test_plain_arguments_are_not_quoted():
    assert memtier_argv.command_text(("XREADGROUP", "GROUP", "g", "c", "STREAMS", "q", ">")) == (
        "XREADGROUP GROUP g c STREAMS q >"
    )
    assert memtier_argv.command_text(("SET", "a b", 'x"y', "")) == 'SET "a b" "x\\"y" ""'


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (("SET", "__key__", "v:__data__"), "__data__ must be a whole argument"),
        (("MSET", "a:__key__:b:__key__", "1"), "__key__ twice"),
        (("SCAN", "__scan_cursor__"), "special meaning"),
        (("SET KEY", "x"), "command name"),
        (('"SET"', "x"), "command name"),
        (("__key__", "x"), "command name"),
        (("", "x"), "command name"),
        (("SET", "bad\udc80\ud800"), "not valid text"),
        ((), "no arguments"),
    ],
)
def test_unrepresentable_commands_are_bad_input(args, why):
    with pytest.raises(BadInput, match=why):
        memtier_argv.command_text(args)


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"commands": (MixCommand(("SET", "__key__", "a__data__")),)}, "__data__"),
        ({"commands": (MixCommand(("GET", "__key__"), ratio=0),)}, "ratio"),
        ({"commands": (MixCommand(("GET", "__key__"), key_pattern="X"),)}, "key pattern"),
        (
            {
                "commands": (
                    MixCommand(("GET", "__key__"), key_pattern="P"),
                    MixCommand(("SET", "__key__", "1")),
                )
            },
            "P on every command",
        ),
        ({"key_prefix": 'a"b'}, "key prefix"),
        ({"key_min": 0}, "key_min"),
        ({"key_min": 10, "key_max": 5}, "empty"),
    ],
)
def test_specs_memtier_would_reject_are_bad_input(kw, why):
    with pytest.raises(BadInput, match=why):
        memtier_argv.argv(aim_at(), spec(**kw), json_out=Path("/r"), test_time=1)


# --- locating the binary -----------------------------------------------------------------


def test_locate_explains_how_to_install_when_absent(monkeypatch, tmp_path):
    monkeypatch.setattr(base.shutil, "which", lambda name: None)
    monkeypatch.setattr(base.sysconfig, "get_path", lambda name: str(tmp_path))
    with pytest.raises(CannotMeasure, match=r"scripts/install\.sh builds it .*REGTRACK_MEMTIER"):
        memtier.locate()


def test_locate_finds_the_one_installed_beside_regtrack(monkeypatch, tmp_path):
    """scripts/install.sh puts memtier_benchmark in the environment's bin folder, which is
    not on PATH when .venv/bin/regtrack is run directly."""
    beside = tmp_path / memtier.NAME
    beside.write_text("#!/bin/sh\necho 'memtier_benchmark v=2.3.0 sha=00000000:0'\n")
    beside.chmod(0o755)
    monkeypatch.setattr(base.shutil, "which", lambda name: None)
    monkeypatch.setattr(base.sysconfig, "get_path", lambda name: str(tmp_path))
    found = memtier.locate()
    assert found.path == str(beside) and found.version.startswith("memtier_benchmark v=2.3.0")


def test_locate_rejects_a_missing_or_foreign_binary(tmp_path):
    with pytest.raises(BadInput, match="does not exist"):
        memtier.locate(str(tmp_path / "nope"))
    foreign = tmp_path / "redis-benchmark"
    foreign.write_text("#!/bin/sh\necho 'redis-benchmark 7.0.15'\n")
    foreign.chmod(0o755)
    with pytest.raises(BadInput, match="is not memtier_benchmark"):
        memtier.locate(str(foreign))


# --- run_once without memtier: a stand-in that replays a fixture -------------------------


def stand_in(tmp_path: Path, fixture: str, stderr_lines: int, exit_code: int = 0) -> Aim:
    """A fake memtier_benchmark that writes a real report and ``stderr_lines`` error lines."""
    script = tmp_path / "memtier_benchmark"
    stdout = next(FIXTURES.glob(f"{fixture}.stdout*.txt"))
    script.write_text(
        "#!/bin/sh\n"
        'while [ "$#" -gt 0 ]; do\n'
        '  if [ "$1" = --json-out-file ]; then out="$2"; fi\n'
        "  shift\n"
        "done\n"
        f'[ {exit_code} -eq 0 ] && cp "{FIXTURES / fixture}.json" "$out"\n'
        f"cat '{stdout}'\n"
        "echo 'Json file x created...' >&2\n"
        "yes 'server 127.0.0.1:1 handle error response: -WRONGTYPE x'"
        f" | head -n {stderr_lines} >&2\n"
        f"[ {exit_code} -eq 0 ] || echo 'error: something went wrong.' >&2\n"
        f"exit {exit_code}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    binary = LoadgenBinary(name=memtier.NAME, path=str(script), version="fake", sha256="0")
    return aim_at(binary)


def test_run_once_reads_the_report_and_counts_error_replies(tmp_path):
    aim = stand_in(tmp_path, QUEUE_P1, stderr_lines=100_000)
    result = memtier.run_once(aim, spec(), test_time=10, timeout=30)
    assert result.problem is None
    assert result.exit_code == 0
    assert result.requests == 1271147
    assert result.ops_per_sec == 127049.19
    totals = report(QUEUE_P1).totals
    assert result.latency_ms == {k: totals[k] for k in ("avg", "p50", "p99", "p999")}
    assert list(result.per_command) == ["Xadds", "Xreadgroups", "Sets", "Hsets", "__errors__"]
    assert result.per_command["__errors__"] == {"count": 100_000}
    assert "[... 99961 stderr lines dropped ...]" in result.raw_output
    assert len(result.raw_output) < 20_000
    assert "Xreadgroups     31763.02" in result.raw_output  # stdout kept whole


def test_run_once_puts_the_duration_error_right(tmp_path):
    aim = stand_in(tmp_path, DUP_COMMAND, stderr_lines=0)
    result = memtier.run_once(aim, spec(), test_time=3, timeout=30)
    assert result.problem is None
    assert result.ops_per_sec == pytest.approx(384614 / 3.000912, rel=1e-5)
    assert result.per_command["Sets"]["ops_per_sec"] == pytest.approx(256414 / 3.000912, rel=1e-5)
    assert "rates recomputed over 3.001 s" in result.raw_output


def test_run_once_reports_a_failed_run(tmp_path):
    aim = stand_in(tmp_path, GET_P1, stderr_lines=3, exit_code=1)
    result = memtier.run_once(aim, spec(), test_time=1, timeout=30)
    assert result.exit_code == 1
    assert result.problem == "memtier_benchmark exited with code 1: error: something went wrong."
    assert result.ops_per_sec is None
    assert result.per_command == {"__errors__": {"count": 3}}


def test_run_once_stops_when_the_server_is_gone(memtier_bin):
    aim = aim_at(memtier.locate(memtier_bin), port=1, server_alive=lambda: False)
    result = memtier.run_once(aim, spec(clients=1), test_time=1, timeout=30)
    assert result.exit_code == -9
    assert result.problem == "memtier_benchmark was stopped because the server exited"
    assert result.wall_s < 1.0


# --- real runs against a real server -----------------------------------------------------


@pytest.fixture
def server(redis_server):
    with native_server(redis_server, (0,)) as running:
        yield running


def real_aim(memtier_bin: str, server) -> Aim:
    return Aim(
        binary=memtier.locate(memtier_bin),
        host=server.host,
        port=server.port,
        cpus=(1,),
        server_alive=server.alive,
    )


def assert_rate_is_plausible(result, seconds: float) -> None:
    """requests / rate is the run's duration: about ``seconds``, not a second off (a unit
    or a rate over the wrong span). memtier's span includes its connections' set-up,
    which a slow phase of this VM stretches: 1.20 s was seen for a 1-second run."""
    assert result.requests / result.ops_per_sec == pytest.approx(seconds, abs=0.4)


def test_locate_fingerprints_the_installed_binary(memtier_bin):
    binary = memtier.locate()
    assert binary.path == str(Path(memtier_bin).absolute())
    assert binary.version.startswith("memtier_benchmark v=")
    assert re.fullmatch(r"[0-9a-f]{64}", binary.sha256)


def test_real_get_sweep(memtier_bin, server):
    client = server.client()
    client.mset({f"key:{n}": "v" * 100 for n in range(1, 1001)})
    client.config_resetstat()
    load = spec(clients=10, pipeline=4, data_size=100, key_prefix="key:")
    result = memtier.run_once(real_aim(memtier_bin, server), load, test_time=1, timeout=30)
    assert result.problem is None, result.raw_output
    assert result.exit_code == 0
    assert result.ops_per_sec > 0
    assert list(result.per_command) == ["Gets", "__errors__"]
    assert result.per_command["Gets"]["count"] == result.requests > 0
    assert result.per_command["__errors__"] == {"count": 0}
    assert set(result.latency_ms) == {"avg", "p50", "p99", "p999"}
    assert_rate_is_plausible(result, 1.0)
    assert result.client_cpu_s > 0
    stats = client.info("stats")
    assert stats["keyspace_misses"] == 0  # every key memtier asked for was populated
    assert stats["keyspace_hits"] >= result.requests
    client.close()


def test_real_mix(memtier_bin, server):
    server.client().xgroup_create("q", "g", id="$", mkstream=True)
    commands = (
        MixCommand(("XADD", "q", "*", "f", "__data__")),
        MixCommand(("XREADGROUP", "GROUP", "g", "c", "NOACK", "COUNT", "1", "STREAMS", "q", ">")),
        MixCommand(("SET", "s:__key__", "__data__")),
        MixCommand(("GET", "s:__key__"), ratio=2),
    )
    load = spec(clients=10, pipeline=1, data_size=64, commands=commands)
    result = memtier.run_once(real_aim(memtier_bin, server), load, test_time=1, timeout=30)
    assert result.problem is None, result.raw_output
    assert result.exit_code == 0
    assert result.ops_per_sec > 0
    rows = result.per_command
    assert list(rows) == ["Xadds", "Xreadgroups", "Sets", "Gets", "__errors__"]
    assert all(rows[name]["ops_per_sec"] > 0 for name in ("Xadds", "Xreadgroups", "Sets", "Gets"))
    assert rows["Gets"]["count"] == pytest.approx(2 * rows["Sets"]["count"], rel=0.05)
    assert rows["__errors__"] == {"count": 0}
    assert_rate_is_plausible(result, 1.0)


def test_real_error_replies_are_counted_and_arguments_arrive_intact(memtier_bin, server):
    value = 'two words, "quotes", it\'s \\x41\t\x00 café'
    commands = (
        MixCommand(("SET", "__key__", "__data__")),
        MixCommand(("HSET", "__key__", "f", "v")),  # WRONGTYPE on every string key
        MixCommand(("SET", "odd:__key__", value)),
    )
    load = spec(clients=4, pipeline=1, data_size=8, key_min=1, key_max=20, commands=commands)
    result = memtier.run_once(real_aim(memtier_bin, server), load, requests=600, timeout=30)
    assert result.problem is None, result.raw_output
    assert result.exit_code == 0
    assert list(result.per_command) == ["Sets", "Hsets", "Sets#2", "__errors__"]
    assert result.per_command["__errors__"]["count"] > 0
    assert "-WRONGTYPE" in result.raw_output
    assert "--command-stats-breakdown=line" in result.argv
    raw = redis.Redis(host=server.host, port=server.port)
    stored = {raw.get(key) for key in raw.scan_iter(match="odd:*")}
    assert stored == {value.encode()}
    raw.close()


def test_math_of_requests_per_client_matches_a_real_run(memtier_bin, server):
    commands = (MixCommand(("SET", "__key__", "__data__")),)
    load = spec(clients=3, threads=2, pipeline=1, data_size=8, key_max=100, commands=commands)
    result = memtier.run_once(real_aim(memtier_bin, server), load, requests=100, timeout=30)
    assert result.problem is None, result.raw_output
    assert result.requests == 6 * math.ceil(100 / 6) == 102
