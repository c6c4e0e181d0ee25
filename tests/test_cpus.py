import pytest

from regtrack.core.cpus import (
    Topology,
    format_cpu_list,
    parse_cpu_list,
    plan_cpus,
    plan_duet,
    split_sides,
)
from regtrack.core.errors import BadInput

FOUR = Topology(usable=(0, 1, 2, 3), core_of={0: "0,2", 2: "0,2", 1: "1,3", 3: "1,3"})
TWO = Topology(usable=(0, 1), core_of={0: "0", 1: "1"})


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("0", (0,)), ("0-3", (0, 1, 2, 3)), ("3,1", (1, 3)), ("0,2-3", (0, 2, 3)), (" 1 ", (1,))],
)
def test_parse_cpu_list(text, cpus):
    assert parse_cpu_list(text) == cpus
    assert parse_cpu_list(format_cpu_list(cpus)) == cpus


@pytest.mark.parametrize("text", ["", "a", "1-", "3-1", "-1", "0;1", "0 1"])
def test_bad_cpu_list_is_refused(text):
    with pytest.raises(BadInput, match="CPU"):
        parse_cpu_list(text, "--server-cpus")


def test_default_plan_on_two_cores_is_server_0_client_1():
    plan = plan_cpus(topology=TWO)
    assert (plan.server_list, plan.client_list) == ("0", "1")


def test_default_plan_keeps_smt_siblings_of_the_server_away_from_the_client():
    plan = plan_cpus(topology=FOUR)
    assert plan.server == (0,)
    assert 2 not in plan.client
    assert plan.client == (1, 3)


def test_overlap_is_refused():
    with pytest.raises(BadInput, match="overlap on CPU 1"):
        plan_cpus("0-1", "1", topology=TWO)


def test_nonexistent_cpu_is_refused():
    with pytest.raises(BadInput, match="does not exist"):
        plan_cpus("0", "7", topology=TWO)


def test_smt_siblings_are_refused_when_other_cores_exist():
    with pytest.raises(BadInput, match="SMT siblings"):
        plan_cpus("0", "2", topology=FOUR)


def test_real_topology_has_a_default_plan():
    topo = Topology.detect()
    if len(topo.usable) < 2:
        pytest.skip("needs 2 CPUs")
    plan = plan_cpus()
    assert set(plan.server).isdisjoint(plan.client)


def _plain(n: int) -> Topology:
    return Topology(usable=tuple(range(n)), core_of={c: str(c) for c in range(n)})


def test_a_duet_gives_every_side_a_server_cpu_and_load_cpus_of_its_own():
    plan = plan_duet(2, topology=_plain(6))
    sides = split_sides(plan, 2)
    assert [(s.server, s.client) for s in sides] == [((0,), (2, 3)), ((1,), (4, 5))]
    three = split_sides(plan_duet(3, topology=_plain(7)), 3)  # CPU 6 would make one side larger
    assert [(s.server, s.client) for s in three] == [((0,), (3,)), ((1,), (4,)), ((2,), (5,))]
    everything = [c for s in three for c in s.server + s.client]
    assert len(everything) == len(set(everything)), "no CPU is shared between sides"


def test_a_duets_servers_sit_on_separate_physical_cores():
    eight = Topology(usable=tuple(range(8)), core_of={c: f"{c % 4},{c % 4 + 4}" for c in range(8)})
    plan = plan_duet(2, topology=eight)
    assert plan.server == (0, 1) and 4 not in plan.client and 5 not in plan.client
    with pytest.raises(BadInput, match="share a physical core"):
        plan_duet(2, topology=FOUR)  # 2 cores, 4 threads: a server and a client would share one


@pytest.mark.parametrize(("server", "client"), [(None, None), ("0", "1"), ("0-1", None)])
def test_a_duet_on_two_cpus_is_refused_with_what_it_needs(server, client):
    with pytest.raises(BadInput) as refused:
        plan_duet(2, server, client, topology=TWO)
    text = str(refused.value)
    assert "--pairing duet" in text or "no CPU is left" in text
    if server is None or server == "0":
        assert "2 server CPUs and 2 client CPUs" in text and "--pairing time" in text


def test_a_duet_takes_the_users_cpu_sets_and_splits_them_evenly():
    sides = split_sides(plan_duet(2, "0,4", "1-3,5-7", topology=_plain(8)), 2)
    assert [(s.server, s.client) for s in sides] == [((0,), (1, 2, 3)), ((4,), (5, 6, 7))]
