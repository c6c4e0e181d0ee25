"""The comparability key: every setting that changes what is measured is in it, and
settings that only change precision are not."""

from __future__ import annotations

import copy

import pytest

from regtrack.results import comparability

CONFIG = {
    "metric": "both",
    "runtime": "native",
    "memory": None,
    "settings": {"duration": 3.0, "warmup": 1.0, "repetitions": 4, "instruction_requests": 100000},
    "workload": {"name": "get-pipeline", "kind": "get-pipeline", "clients": 50, "keys": 100000,
                 "data_size": 1000, "threads": 1, "pipelines": [10, 30], "description": "GETs"},
    "cpus": {"server_cpus": "0", "client_cpus": "1"},
    "callgrind_hz": 1,
}  # fmt: skip
ENV = {"cpu_model": "Xeon", "cpu_count": 2, "physical_cores": 2, "kernel": "6.1", "load": 1}
LOADGEN = {"name": "redis-benchmark", "sha256": "ab" * 32, "version": "7.0.15"}


def _diff(change) -> list[str]:
    config, env, loadgen = copy.deepcopy(CONFIG), dict(ENV), dict(LOADGEN)
    change(config, env, loadgen)
    return comparability.differences(
        comparability.key(CONFIG, ENV, LOADGEN), comparability.key(config, env, loadgen)
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda c, e, lg: c.update(runtime="docker", docker_images="build"),
         ["docker images null != build", "runtime native != docker"]),
        (lambda c, e, lg: c["workload"].update(clients=10), ["clients 50 != 10"]),
        (lambda c, e, lg: c["workload"].update(keys=1000000), ["keys 100000 != 1000000"]),
        (lambda c, e, lg: c["workload"].update(data_size=32), ["data_size 1000 != 32"]),
        (lambda c, e, lg: c["cpus"].update(server_cpus="1", client_cpus="0"),
         ["client cpus 1 != 0", "server cpus 0 != 1"]),
        (lambda c, e, lg: lg.update(sha256="cd" * 32),
         ["load generator binary abababababab... != cdcdcdcdcdcd..."]),
        (lambda c, e, lg: c["workload"].update(threads=4), ["threads 1 != 4"]),
        (lambda c, e, lg: c["settings"].update(instruction_requests=200000),
         ["instruction requests 100000 != 200000"]),
        (lambda c, e, lg: e.update(kernel="6.18"), ["kernel 6.1 != 6.18"]),
    ],
)  # fmt: skip
def test_each_setting_that_changes_what_is_measured_is_a_difference(change, expected):
    assert _diff(change) == expected


@pytest.mark.parametrize(
    "change",
    [
        lambda c, e, lg: c["settings"].update(duration=10.0, warmup=2.0, repetitions=30),
        lambda c, e, lg: c["workload"].update(pipelines=[1, 5], description="other words"),
        lambda c, e, lg: c["workload"].update(models="RQ 1.16", min_redis="7.0", tolerance_pct=5),
        lambda c, e, lg: e.update(load=9),
        lambda c, e, lg: lg.update(version="7.0.15 (same binary)"),
    ],
)
def test_precision_and_documentation_are_not_differences(change):
    assert _diff(change) == []


def test_instruction_settings_matter_only_when_both_runs_counted_instructions():
    def throughput_only(c, e, lg):
        c.update(metric="throughput")
        c["settings"].update(instruction_requests=200000)

    assert _diff(throughput_only) == []


def test_a_run_older_than_the_key_gets_it_from_its_stored_facts():
    stored = {"config": CONFIG, "environment": ENV, "loadgen": LOADGEN, "comparability": None}
    assert comparability.of_run(stored) == comparability.key(CONFIG, ENV, LOADGEN)
    assert comparability.digest(comparability.of_run(stored)) == comparability.digest(
        comparability.key(CONFIG, ENV, LOADGEN)
    )
