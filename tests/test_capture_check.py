"""`regtrack mix capture --check`: the comparison and its table on constructed readings,
the value sizes a sampled file records and replays, bad input (no server), and one real
check: a live server driven by a known mix, captured, checked faithful; the same file
with two ratios swapped, checked off (exit 1); and a queue whose payloads vary, captured as
a lifecycle that draws them from their distribution, checked faithful at p10, p50, p90."""

from __future__ import annotations

import contextlib
import math
import random
import re
import threading
import time
import tomllib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import redis

from regtrack.analysis.capture_check import Replayed, SizeSides, compare
from regtrack.bench.runtimes.native import native_server
from regtrack.core.records import CommandReading
from regtrack.output import capture_check_text
from regtrack.workloads import capture
from regtrack.workloads.model import MixWorkload
from regtrack.workloads.traffic import mixfile, sampled, sampler, value_sizes
from regtrack.workloads.traffic.monitor_line import parse, quote
from regtrack.workloads.traffic.redaction import Redactor
from regtrack.workloads.traffic.shapes import Sizes
from tests.conftest import cli_in_process, run_cli


def _line(t: float, *args: str) -> bytes:
    return f"{t:.6f} [0 127.0.0.1:5000] ".encode() + b" ".join(quote(a.encode()) for a in args)


def _sampled_text(lines: list[bytes]) -> str:
    redactor = Redactor()
    recs = tuple(r for x in lines if (r := parse(x, redactor)) is not None)
    assert len(recs) == len(lines)
    sample = sampler.Sample(recs, 2.0, "count", 0, 0, False, "built-in")
    counted = capture.Capture("redis://h:6379", 2.0, "7.0.15", {"get": 1})
    return mixfile.text(sampled.SampledCapture(counted, sample), "q", {})


def test_value_sizes_recorded_in_a_sampled_file_read_back_strictly():
    lines = []
    for i in range(31):
        lines.append(_line(i, "LPUSH", "queue", "v" * (85 + i)))  # median 100
        lines.append(_line(i + 0.1, "SET", f"k:{i}", "s" * 300))
        lines.append(_line(i + 0.2, "GET", f"k:{i}"))
    text = _sampled_text(lines)
    records = value_sizes.recorded(text)
    assert [(r.command, r.position, r.low, r.median, r.high, r.n) for r in records] == [
        ("LPUSH", 2, 85, 100, 115, 31),
        ("SET", 2, 300, 300, 300, 31),
    ]
    assert records[0].quantiles == (88, 94, 100, 106, 112)  # p10 ... p90
    MixWorkload(**tomllib.loads(text))  # still a mix the loader takes
    # A line not in the writer's format ends the block: never a guess.
    line = "SET argument 2: 300/300/300/300/300/300/300 over 31"
    edited = text.replace(line, "SET argument 2: about 300")
    assert [r.command for r in value_sizes.recorded(edited)] == ["LPUSH"]
    assert value_sizes.recorded('name = "hand"\n') == []


def _reading(cpu_s: float = 0.01, **calls: int) -> CommandReading:
    return CommandReading(1.0, dict(calls), {c: 2.0 * n for c, n in calls.items()}, cpu_s, "7.0.15")


def _sides(
    command: str, position: int, real: tuple[int, int, int], replay: int | None
) -> SizeSides:
    """A row as an older file records it (min/median/max), replayed at one size."""
    record = value_sizes.SizeRecord(command, position, *real, 31)
    return SizeSides(record, None if replay is None else Sizes.of([replay]))


def test_shares_within_ten_percent_are_faithful_and_rare_commands_are_not_judged():
    real = _reading(lpush=1000, rpop=1000, set=1000, get=3000, ping=20)
    # ping: 0.3% of the real calls, gone from the replay: shown, not judged
    replay = _reading(cpu_s=0.1, lpush=10_500, rpop=9_600, set=10_000, get=30_000)
    check = compare(real, replay, [_sides("LPUSH", 2, (90, 100, 110), 100)], task="lpush")
    by = {r.command: r for r in check.rows}
    assert [r.command for r in check.rows][:1] == ["get"]
    assert by["ping"].off == -1.0 and not by["ping"].gated and by["ping"].within
    assert all(r.within for r in check.rows) and check.faithful
    assert math.isclose(by["lpush"].off or 0, (10_500 / 60_100) / (1000 / 6020) - 1)
    # CPU per task: 0.01 s / 1000 lpush = 10 µs real, 0.1 s / 10,500 = 9.52 µs replayed
    assert math.isclose(check.cpu.real_us or 0, 10.0)
    assert math.isclose(check.cpu.replay_us or 0, 1e5 / 10_500)
    assert check.cpu.within


def test_swapped_ratios_a_new_command_and_a_wrong_size_are_off():
    real = _reading(set=1000, get=3000)
    replay = _reading(set=3000, get=1000, del_=500)
    sizes = [_sides("SET", 2, (300, 300, 300), 128), _sides("GET", 2, (5, 5, 5), None),
             _sides("SET", 4, (0, 8, 27), 27), _sides("SET", 6, (6, 7, 8), 8)]  # fmt: skip
    check = compare(real, replay, sizes)
    off = {r.command: r.off for r in check.off_rows}
    assert set(off) == {"set", "get", "del_"} and off["del_"] == math.inf
    assert math.isclose(off["set"] or 0, (3000 / 4500) / 0.25 - 1)
    # A position whose real sizes span 0-27 (several fields): its median is shown only.
    assert [(s.position, s.gated, s.within) for s in check.sizes] == [
        (2, True, False),
        (2, True, False),
        (4, False, True),
        (6, True, True),  # 7 -> 8 bytes: within one byte, where 10% is less
    ]
    assert not check.faithful and check.cpu.task is None


def test_the_table_names_each_side_every_command_and_the_verdict():
    real = _reading(set=1000, get=3000, **{"weird\x1b[31m": 10})
    replay = _reading(set=3000, get=1000)
    sizes = [_sides("SET", 2, (290, 300, 310), 300), _sides("HSET", 7, (0, 0, 13), 17)]
    done = Replayed(
        compare(real, replay, sizes, replay_errors={"WRONGTYPE": 3}),
        "redis://***@10.0.0.5:6379", "memtier_benchmark", "0", "1", 1,
    )  # fmt: skip
    text = capture_check_text.render(done)
    assert text.startswith("real:   redis://***@10.0.0.5:6379 (Redis 7.0.15): 4,010 calls")
    assert "memtier_benchmark on CPU 1, pipeline 1: 4,000 calls in 1.0 s" in text
    get = next(x for x in text.splitlines() if x.startswith("get "))
    assert get.split() == ["get", "74.81", "25.00", "-66.6%", "2.00", "2.00", "OFF"]
    assert "\x1b" not in text and "weird" in text
    assert "SET argument 2: 300 / 300  +0.0%  ok" in text
    assert "the replay got error replies: WRONGTYPE x3" in text
    assert "HSET argument 7: 0 / 17  +17 B  (real 0-13: mixed)" in text  # no ratio to 0
    assert text.splitlines()[-1] == "OFF (exit 1): get -66.6%, set +200.7%"
    faithful = compare(real, real)
    assert capture_check_text.verdict(faithful).startswith("faithful: every command")


GET_FILE = 'name = "g"\nkind = "get-pipeline"\n'
MIX_FILE = 'name = "m"\nkind = "mix"\n[[commands]]\nargs = ["SET", "k:__key__", "__data__"]\n'


LIFECYCLE = str(Path(__file__).parent.parent / "configs" / "workloads" / "rq.toml")


def test_bad_input_is_one_line_and_starts_nothing(tmp_path):
    """Refused before the live server is read or a server started (no lock needed)."""
    (tmp_path / "g.toml").write_text(GET_FILE)
    (tmp_path / "m.toml").write_text(MIX_FILE)
    url = ("--url", "redis://127.0.0.1:1")
    cases = [
        (("--check", str(tmp_path / "none.toml")), 2, "no such file"),
        (("--check", str(tmp_path / "g.toml")), 2, "a get-pipeline workload; --check replays"),
        (("--check", str(tmp_path / "m.toml"), "--task", "lpush"), 2, "sends no lpush; give"),
        (("--check", str(tmp_path / "m.toml"), "--out", "x.toml"), 2, "--check reads a file"),
        (("--out", str(tmp_path / "o.toml"), "--task", "set"), 2, "need --check"),
        ((), 2, "give --out FILE to write a capture (or --check FILE to check one)"),
        (("--check", str(tmp_path / "m.toml"), "--seconds", "0.1"), 3, "cannot read INFO"),
        # a lifecycle: replayed by the engine, its --task one the file sends
        (("--check", LIFECYCLE, "--loadgen", "memtier"), 2, "a lifecycle is replayed by "),
        (("--check", LIFECYCLE, "--task", "lpush"), 2, "sends no lpush; give"),
        (("--check", LIFECYCLE, "--seconds", "0.1"), 3, "cannot read INFO"),
    ]
    for args, code, message in cases:
        proc = cli_in_process("mix", "capture", *url, *args)
        assert proc.returncode == code, (args, proc.stderr)
        (error,) = proc.stderr.splitlines()
        assert message in error and error.startswith("regtrack: error: "), (args, proc.stderr)
        assert proc.stdout == ""


def _drive(port: int, stop: threading.Event) -> None:
    """A known mix: per cycle LPUSH (100 B), RPOP, SET (300 B), GET x3 of the key set."""
    client = redis.Redis(port=port)
    n = 0
    try:
        while not stop.is_set():
            pipe = client.pipeline(transaction=False)
            for _ in range(10):
                pipe.lpush("queue", "v" * 100).rpop("queue").set(f"k:{n}", "s" * 300)
                pipe.get(f"k:{n}").get(f"k:{n}").get(f"k:{n}")
                n += 1
            pipe.execute()
    finally:
        client.close()


def _rows(stdout: str) -> dict[str, list[str]]:
    return {m.group(1): line.split() for line in stdout.splitlines()
            if (m := re.match(r"^(\w+) +\d", line))}  # fmt: skip


def _swapped(text: str) -> str:
    """The file with GET's ratio (3) moved to SET (1): the mix a wrong capture would be."""
    text, gets = re.subn(r'(args = \["GET", "k:0*__key__"\]\n)ratio = 3\n', r"\1", text)
    text, sets = re.subn(r'(args = \["SET", "k:0*__key__", "x{300}"\]\n)', r"\1ratio = 3\n", text)
    assert (gets, sets) == (1, 1), text
    return text


WATCHER = {"REGTRACK_REDIS_PASSWORD": "watcher-Pa55"}  # a user allowed MONITOR


@contextlib.contextmanager
def _watched(redis_server: str, load: Callable[[int, threading.Event], None]) -> Iterator[str]:
    """A live server with a ``watcher`` user and ``load`` running against it in a thread
    (stopped on the way out): the URL a capture reads it at (password: WATCHER)."""
    stop = threading.Event()
    with native_server(redis_server, (0,)) as live:
        control = live.client()
        control.execute_command("ACL", "SETUSER", "watcher", "on", ">watcher-Pa55", "+@all", "~*")
        control.close()
        driver = threading.Thread(target=load, args=(live.port, stop))
        driver.start()
        try:
            yield f"redis://watcher@127.0.0.1:{live.port}"
        finally:
            stop.set()
            driver.join()


def test_a_capture_checks_faithful_and_swapped_ratios_are_off(tmp_path, redis_server):
    out = tmp_path / "captured.toml"
    with _watched(redis_server, _drive) as url:
        taken = run_cli("mix", "capture", "--url", url, "--sample", "1", "--sample-commands",
                        "3000", "--out", str(out), env=WATCHER)  # fmt: skip
        assert taken.returncode == 0, taken.stderr
        good = run_cli("mix", "capture", "--check", str(out), "--url", url,
                       "--seconds", "1", "--task", "lpush", env=WATCHER)  # fmt: skip
        swapped = tmp_path / "swapped.toml"
        swapped.write_text(_swapped(out.read_text()))
        bad = run_cli("mix", "capture", "--check", str(swapped), "--url", url,
                      "--seconds", "1", env=WATCHER)  # fmt: skip
    print(good.stdout, bad.stdout, sep="\n")
    assert good.returncode == 0, good.stdout + good.stderr
    replayed_s = re.search(r"^replay: .* calls in ([\d.]+) s", good.stdout, re.MULTILINE)
    assert replayed_s and float(replayed_s.group(1)) < 5, "counted once its load has ended"
    rows = _rows(good.stdout)
    assert set(rows) >= {"lpush", "rpop", "set", "get"}, good.stdout
    for name, share in (("lpush", 16.67), ("rpop", 16.67), ("set", 16.67), ("get", 50.0)):
        real, replay = float(rows[name][1]), float(rows[name][2])
        assert abs(real - share) < 1.0 and abs(replay / real - 1) <= 0.10, rows[name]
        assert rows[name][-1] == "ok"
    assert "LPUSH argument 2: 100 / 100  +0.0%  ok" in good.stdout
    assert "SET argument 2: 300 / 300  +0.0%  ok" in good.stdout
    assert "server CPU per task (one lpush call): real" in good.stdout
    assert good.stdout.splitlines()[-1].startswith("faithful: every command")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    rows = _rows(bad.stdout)
    assert rows["get"][-1] == "OFF" and rows["set"][-1] == "OFF", bad.stdout
    assert bad.stdout.splitlines()[-1].startswith("OFF (exit 1): ")


def _queue(port: int, stop: threading.Event) -> None:
    """A task queue at about 200 tasks/s whose payloads range 200 B-4 KB: a producer's
    MULTI HSET job:<id> data <payload> LPUSH q <id> EXEC, a consumer's BRPOP, HGET, DEL."""
    sizes = random.Random(49)

    def consume() -> None:
        client = redis.Redis(port=port)
        try:
            while not stop.is_set():
                if popped := client.brpop(["q"], 1):
                    job = popped[1].decode()
                    client.hget(f"job:{job}", "data")
                    client.delete(f"job:{job}")
        finally:
            client.close()

    consumer = threading.Thread(target=consume)
    consumer.start()
    client = redis.Redis(port=port)
    try:
        while not stop.is_set():
            job = str(uuid.UUID(int=sizes.getrandbits(128)))
            pipe = client.pipeline(transaction=True)
            pipe.hset(f"job:{job}", "data", "d" * sizes.randint(200, 4000)).lpush("q", job)
            pipe.execute()
            time.sleep(0.005)
    finally:
        client.close()
        consumer.join()


def test_a_queue_whose_payloads_vary_replays_their_distribution(tmp_path, redis_server):
    """Captured as a lifecycle, the payload written as ${fill:...} of its five sizes, and
    --check judges the replay's p10, p50 and p90 of it against the sample's (issue 49)."""
    out = tmp_path / "queue.toml"
    with _watched(redis_server, _queue) as url:
        time.sleep(0.2)
        taken = run_cli("mix", "capture", "--url", url, "--sample", "1", "--out", str(out),
                        env=WATCHER)  # fmt: skip
        checked = run_cli("mix", "capture", "--check", str(out), "--url", url,
                          "--seconds", "1", env=WATCHER)  # fmt: skip
    print(checked.stdout)
    assert taken.returncode == 0, taken.stderr
    text = out.read_text()
    assert 'kind = "lifecycle"' in text and '"data", "${fill:' in text, text
    (record,) = [r for r in value_sizes.recorded(text) if (r.command, r.position) == ("HSET", 3)]
    assert record.low >= 200 and record.high <= 4000 and record.n > 50
    assert checked.returncode == 0, checked.stdout + checked.stderr
    row = next(x for x in checked.stdout.splitlines() if x.startswith("  HSET argument 3: "))
    assert f"p10 {record.p10} / " in row and f"p90 {record.p90} / " in row and row.endswith("ok")
    assert "LPUSH argument 2: 36 / 32  -11.1%  (an id or time the engine writes" in checked.stdout
    assert checked.stdout.splitlines()[-1].startswith("faithful: every command")
