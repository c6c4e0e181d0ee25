"""`regtrack doctor`: checks computed from crafted /proc and /sys trees, the exit code they
add up to, its JSON, and real runs on this machine. Fast: nothing is benchmarked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from regtrack import doctor
from regtrack.core.checkup import SCHEMA_VERSION, Check, Checkup, Status
from regtrack.core.cpus import Topology
from regtrack.core.errors import EXIT_CANNOT_MEASURE
from regtrack.doctor import busy_check, cpu_checks, irq_check, kernel_checks, tool_checks
from regtrack.doctor.machine import Machine
from regtrack.doctor.sample import CpuJiffies, ProcessTicks, Snapshot
from regtrack.doctor.sysroot import SysRoot
from regtrack.doctor.tool_checks import Tool
from regtrack.output import doctor_text
from tests.conftest import run_cli

TWO_CPUS = Topology(usable=(0, 1), core_of={0: "0", 1: "1"})
ONE_CPU = Topology(usable=(0,), core_of={0: "0"})
DOCUMENTED_EXIT_CODES = {0, EXIT_CANNOT_MEASURE}

# A quiet, well-tuned 2-CPU machine; tests change one file each.
GOOD = {
    "proc/sys/kernel/randomize_va_space": "2\n",
    "proc/cmdline": "quiet isolcpus=domain,managed_irq,0 nohz_full=0\n",
    "proc/cpuinfo": "processor\t: 0\nflags\t\t: fpu sse4_2 avx2\n",
    "proc/stat": "cpu  10 0 10 100 0 0 0 0 0 0\ncpu0 5 0 5 50 0 0 0 0\ncpu1 5 0 5 50 0 0 0 0\n",
    "proc/interrupts": (
        "           CPU0       CPU1\n"
        " 41:          0       3282   PCI-MSIX-0000:00:04.0   1-edge      virtio3-rx\n"
        "LOC:     298939     370957   Local timer interrupts\n"
    ),
    "proc/irq/41/smp_affinity_list": "1\n",
    "proc/irq/41/effective_affinity_list": "1\n",
    "proc/irq/default_smp_affinity": "3\n",
    "sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never\n",
    "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": "performance\n",
    "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor": "performance\n",
    "sys/devices/system/cpu/intel_pstate/no_turbo": "1\n",
    "sys/devices/system/cpu/isolated": "0\n",
}


def craft(tmp: Path, files: dict[str, str | None]) -> SysRoot:
    """A root holding ``files`` (None: left out)."""
    for relative, text in files.items():
        if text is not None:
            path = tmp / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return SysRoot(tmp)


def machine(tmp: Path, topology: Topology = TWO_CPUS, **changes: str | None) -> Machine:
    """The GOOD machine with ``changes`` (keys with / as __), sampled over no time."""
    files = {**GOOD, **{k.replace("__", "/"): v for k, v in changes.items()}}
    return doctor.observe(craft(tmp, files), topology, sample_seconds=0)


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def test_a_good_machine_has_no_warnings_and_exits_0(tmp_path):
    checks = doctor.machine_checks(machine(tmp_path))
    assert {c.name: c.status for c in checks if c.status is not Status.OK} == {}
    assert Checkup(tuple(checks), "0", "1").exit_code == 0


def test_powersave_governor_is_a_warning_that_says_what_to_set(tmp_path):
    m = machine(tmp_path, sys__devices__system__cpu__cpu1__cpufreq__scaling_governor="powersave")
    check = cpu_checks.governor(m)
    assert check.status is Status.WARNING
    assert "CPU 1: powersave" in check.found and "CPU 0: performance" in check.found
    assert "performance" in check.advice and "cpupower -c 1" in check.advice


def test_turbo_on_is_a_warning_and_cpufreq_boost_is_read_too(tmp_path):
    on = machine(tmp_path, sys__devices__system__cpu__intel_pstate__no_turbo="0")
    assert cpu_checks.turbo(on).status is Status.WARNING
    boost = craft(tmp_path / "b", {"sys/devices/system/cpu/cpufreq/boost": "0\n"})
    check = cpu_checks.turbo(Machine(root=boost, topology=TWO_CPUS, plan=None))
    assert (check.status, check.found) == (Status.OK, "off (cpufreq boost)")


def test_thp_always_is_a_warning(tmp_path):
    m = machine(tmp_path, sys__kernel__mm__transparent_hugepage__enabled="[always] madvise never")
    check = kernel_checks.transparent_huge_pages(m)
    assert check.status is Status.WARNING
    assert "madvise" in check.advice


def test_full_aslr_is_ok_and_no_aslr_a_warning(tmp_path):
    check = kernel_checks.aslr(machine(tmp_path))
    assert check.status is Status.OK and "randomize_va_space = 2" in check.found
    assert "seed" in check.found  # regtrack fixes hash seeds, not addresses
    off = kernel_checks.aslr(machine(tmp_path / "off", proc__sys__kernel__randomize_va_space="0"))
    assert off.status is Status.WARNING and "randomize_va_space=2" in off.advice


def test_an_irq_on_the_server_cpu_is_a_warning_naming_it(tmp_path):
    m = machine(
        tmp_path,
        proc__irq__41__effective_affinity_list="0\n",
        proc__interrupts=(
            "           CPU0       CPU1\n"
            " 41:       3282          0   PCI-MSIX-0000:00:04.0   1-edge      virtio3-rx\n"
        ),
    )
    check = irq_check.irq_affinity(m)
    assert check.status is Status.WARNING
    assert "41 virtio3-rx" in check.found and "CPU 0" in check.found
    assert "echo 1 > /proc/irq/N/smp_affinity_list" in check.advice


def test_missing_files_are_unknown_never_a_crash(tmp_path):
    m = doctor.observe(SysRoot(tmp_path / "nothing"), TWO_CPUS, sample_seconds=0)
    statuses = by_name(doctor.machine_checks(m))
    unknown = {n for n, c in statuses.items() if c.status is Status.UNKNOWN}
    assert unknown == set(statuses) - {"CPU plan"}
    assert statuses["CPU plan"].status is Status.OK


def test_other_processes_busy_on_the_pinned_cpus_are_a_problem(tmp_path):
    root = craft(tmp_path, GOOD)
    idle = {0: CpuJiffies(busy=0, steal=0, total=0), 1: CpuJiffies(busy=0, steal=0, total=0)}
    busy = {0: CpuJiffies(busy=90, steal=0, total=100), 1: CpuJiffies(busy=5, steal=0, total=100)}
    hog = ProcessTicks(name="stress-ng", ticks=0, allowed=(0,))
    elsewhere = ProcessTicks(name="pinned-away", ticks=0, allowed=(7,))
    m = Machine(
        root=root,
        topology=TWO_CPUS,
        plan=doctor.observe(root, TWO_CPUS, sample_seconds=0).plan,
        before=Snapshot(cpus=idle, processes={42: hog, 43: elsewhere}),
        after=Snapshot(
            cpus=busy,
            processes={
                42: ProcessTicks("stress-ng", 90, (0,)),
                43: ProcessTicks("pinned-away", 50, (7,)),
            },
        ),
    )
    check = busy_check.busy_processes(m)
    assert check.status is Status.PROBLEM
    assert "stress-ng (pid 42) 90%" in check.found and "pinned-away" not in check.found
    assert Checkup((check,), "0", "1").exit_code == EXIT_CANNOT_MEASURE


def test_a_machine_that_cannot_measure_exits_3(tmp_path):
    one = doctor.machine_checks(machine(tmp_path, topology=ONE_CPU))
    plan = by_name(one)["CPU plan"]
    assert plan.status is Status.PROBLEM and "only 1 CPU is usable" in plan.found
    assert Checkup(tuple(one), None, None).exit_code == EXIT_CANNOT_MEASURE
    overlap = doctor.observe(craft(tmp_path, GOOD), TWO_CPUS, "0", "0", sample_seconds=0)
    assert cpu_checks.cpu_plan(overlap).status is Status.PROBLEM
    assert "overlap" in cpu_checks.cpu_plan(overlap).found


def test_tools_and_seeds_decide_the_exit_code_too():
    none = dict.fromkeys(tool_checks.TOOLS, Tool(None))
    assert tool_checks.load_generator(none).status is Status.PROBLEM
    assert tool_checks.pinning(none).status is Status.PROBLEM
    can_build = {**none, "make": Tool("/usr/bin/make"), "cc": Tool("/usr/bin/cc")}
    assert tool_checks.load_generator(can_build).status is Status.WARNING
    assert tool_checks.valgrind(none).status is Status.WARNING  # never fails doctor
    assert tool_checks.open_loop(none).status is Status.WARNING  # only latency needs it
    engine = {**none, "regtrack-openloop": Tool("/x/regtrack-openloop", "regtrack-openloop 0.1.0")}
    assert tool_checks.open_loop(engine).status is Status.OK
    seeds = tool_checks.hash_seeds("a private mount namespace is not available")
    assert seeds.status is Status.PROBLEM and "user namespaces" in seeds.advice
    assert tool_checks.hash_seeds(None).status is Status.OK


def test_json_has_a_schema_version_and_every_check_as_name_status_found_advice(tmp_path):
    checks = (*doctor.machine_checks(machine(tmp_path)), tool_checks.hash_seeds("no unshare"))
    data = json.loads(doctor_text.render_json(Checkup(checks, "0", "1")))
    assert data["schema_version"] == SCHEMA_VERSION and data["exit_code"] == EXIT_CANNOT_MEASURE
    assert all(set(c) == {"name", "status", "found", "advice"} for c in data["checks"])
    assert {c["status"] for c in data["checks"]} <= {s.value for s in Status}
    text = doctor_text.render_text(Checkup(checks, "0", "1"))
    assert text.splitlines()[0].endswith("hash seeds")
    assert "-> run as root" in text  # the text says what to change


HOSTILE = st.one_of(
    st.text(max_size=200),
    st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
    st.sampled_from(["", "-1", "3-1", "0-99999999", "[always", "cpu0 x y", "CPU0\n 1: a b"]),
)
FILES = [*GOOD, "proc/1/stat", "proc/1/status", "sys/devices/system/cpu/nohz_full"]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(contents=st.dictionaries(st.sampled_from(FILES), HOSTILE, min_size=1))
def test_crafted_files_never_crash_a_check(tmp_path_factory, contents):
    tmp = tmp_path_factory.mktemp("hostile")
    m = doctor.observe(craft(tmp, {**GOOD, **contents}), TWO_CPUS, sample_seconds=0)
    for check in doctor.machine_checks(m):
        assert check.status in Status and check.found


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_a_real_doctor_on_this_machine_exits_with_a_documented_code(fmt):
    done = run_cli("doctor", "--format", fmt, "--sample-seconds", "0.2", timeout=60)
    assert done.returncode in DOCUMENTED_EXIT_CODES, done.stderr
    if fmt == "json":
        data = json.loads(done.stdout)
        assert data["schema_version"] == SCHEMA_VERSION
        assert data["exit_code"] == done.returncode
        names = {c["name"] for c in data["checks"]}
        assert {"CPU plan", "hash seeds", "ASLR", "IRQ affinity"} <= names
    else:
        assert done.stdout.startswith("regtrack doctor: ")
