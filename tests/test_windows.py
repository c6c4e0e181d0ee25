"""Paired-in-time windows (bench/windows.py): the order that balances drift, the totals a
trial stores, and a real server's counters read in one round trip."""

from __future__ import annotations

import contextlib
import time

import pytest

from regtrack.bench import loadgen, windows
from regtrack.bench.loadgen.base import Aim
from regtrack.bench.loadgen.held import HeldLoad
from regtrack.bench.runtimes.native import native_server
from regtrack.bench.windows import Window
from regtrack.core.records import LoadSpec


def test_every_group_visits_the_servers_forwards_then_backwards():
    assert windows.group_order(["A", "B"]) == ["A", "B", "B", "A"]
    assert windows.group_order(["A", "B", "C"]) == ["A", "B", "C", "C", "B", "A"]


@pytest.mark.parametrize(("seconds", "window", "groups"), [(3, 0.25, 6), (0, 0.25, 0), (1, 2, 1)])
def test_groups_give_each_server_its_seconds(seconds, window, groups):
    assert windows.groups_for(seconds, window) == groups


def test_totals_add_up_one_servers_windows():
    ws = [
        Window("A", 0, 0, 1000, 0.25, 0.24, 0.1),
        Window("B", 0, 1, 900, 0.25, 0.25, 0.1),
        Window("B", 0, 2, 950, 0.25, 0.25, 0.1),
        Window("A", 0, 3, 1100, 0.30, 0.29, 0.2),
    ]
    a = windows.totals(ws, "A")
    assert (a.ops, a.windows) == (2100, 2)
    assert a.ops_per_sec == pytest.approx(2100 / 0.55)
    assert a.pct(a.server_cpu_s) == pytest.approx(100 * 0.53 / 0.55)
    assert windows.totals(ws, "C").ops_per_sec is None
    table = windows.table(ws).splitlines()
    assert table[0].split()[:4] == ["group", "position", "server", "ops"]
    assert table[4].split()[:4] == ["0", "3", "A", "1100"]


def test_a_reading_counts_the_named_commands_and_the_servers_cpu(redis_server):
    with native_server(redis_server, (0,)) as server:
        client = server.client()
        _count(client)


def _count(client) -> None:
    try:
        first = windows.read(client, frozenset({"get", "set"}))
        for i in range(50):
            client.set(f"k{i}", "v")
            client.get(f"k{i}")
        last = windows.read(client, frozenset({"get", "set"}))
        only_gets = windows.read(client, frozenset({"get"}))
    finally:
        client.close()
    assert last.ops - first.ops == 100
    assert only_gets.ops < last.ops and last.at > first.at and last.cpu_s >= first.cpu_s


def test_a_duet_loads_every_server_at_once_and_reads_each_window_of_both(redis_server):
    """Two real servers, each with its own held redis-benchmark: together() runs both
    loads at once (half the wall time of alternating), every window of both counted, and
    leaves the loads paused. (On this 2-CPU host they share CPUs: the mechanics, not a
    duet's accuracy, which needs 2 CPUs per side.)"""
    binary = loadgen.locate("redis-benchmark")
    spec = LoadSpec(clients=4, threads=1, pipeline=10, data_size=3, key_min=0, key_max=99)
    with (
        native_server(redis_server, (0,)) as a,
        native_server(redis_server, (0,)) as b,
        contextlib.ExitStack() as stack,
    ):
        lanes = []
        for label, server in (("a", a), ("b", b)):
            client = server.client()
            stack.callback(client.close)
            aim = Aim(binary, server.host, server.port, (1,), server.alive, server.pid)
            load = HeldLoad(aim, [spec])
            stack.callback(load.close)
            lane = windows.Lane(label, client, load, frozenset({"get"}))
            assert load.wait_flowing(lambda lane=lane: lane.reading().ops) is None
            lanes.append(lane)
        started = time.monotonic()
        measured = windows.together(lanes, 3, 0.1)
        elapsed = time.monotonic() - started
        paused = [lane.reading().ops for lane in lanes]
        time.sleep(0.3)
        later = [lane.reading().ops for lane in lanes]
    assert [(w.group, w.position, w.label) for w in measured[:4]] == [
        (0, 0, "a"), (0, 1, "b"), (0, 2, "a"), (0, 3, "b"),
    ]  # fmt: skip
    assert len(measured) == 12 and all(w.ops > 0 for w in measured), measured
    # Bounds a noisy host keeps: a window ends near its time (a late reading stretches it),
    # and both servers' windows overlap, so the wall time is about half their sum.
    seconds = [w.seconds for w in measured]
    assert all(0.09 < s < 0.5 for s in seconds), seconds
    for label in ("a", "b"):
        assert 0.55 < windows.totals(measured, label).seconds < 1.5, seconds
    in_turn = sum(seconds)
    assert elapsed - windows.SETTLE_S < 0.75 * in_turn, (elapsed, seconds)
    assert all(after - before < 200 for before, after in zip(paused, later, strict=True))
