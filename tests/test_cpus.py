import pytest

from regtrack.core.cpus import Topology, format_cpu_list, parse_cpu_list, plan_cpus
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
