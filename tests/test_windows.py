"""Paired-in-time windows (bench/windows.py): the order that balances drift, the totals a
trial stores, and a real server's counters read in one round trip."""

from __future__ import annotations

import pytest

from regtrack.bench import windows
from regtrack.bench.runtimes.native import native_server
from regtrack.bench.windows import Window


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
