"""The runner with real servers and redis-benchmark; faults injected where needed."""

from __future__ import annotations

import pytest

from regtrack.bench import setup
from regtrack.bench.job import Job
from regtrack.bench.loadgen import redis_benchmark
from regtrack.bench.real import RealBench
from regtrack.bench.runner import execute
from regtrack.core.cpus import plan_cpus
from regtrack.core.records import InvalidReason
from regtrack.core.settings import load_settings
from regtrack.results.store import Store
from regtrack.targets.versions import parse_specs, resolve
from regtrack.workloads import points
from regtrack.workloads.files import load_workload


def _job(server: str, **workload) -> Job:
    return Job(
        targets=resolve(parse_specs(f"a=bin:{server}")),
        workload=load_workload("get-pipeline", keys=1000, pipelines=[5], **workload),
        settings=load_settings(duration=0.5, warmup=0.2, repetitions=1),
        cpus=plan_cpus(),
        loadgen=redis_benchmark.locate(),
    )


def test_gets_that_miss_make_the_trial_invalid(
    tmp_path, redis_server, redis_benchmark_bin, monkeypatch
):
    """Fault: populate writes only half the keys, as a broken setup would."""

    def half(client, workload, loadgen):
        value = "x" * workload.data_size
        client.mset({points.benchmark_key(i): value for i in range(workload.keys // 2)})

    monkeypatch.setattr(setup, "populate", half)
    store = Store.open(tmp_path / "r.db")
    job = _job(redis_server)
    run_id = store.create_run([], job.config(), {}, job.loadgen.as_dict())
    assert execute(job, RealBench(), store, run_id) == "complete"
    (trial,) = store.trials(run_id)
    assert trial.keyspace_misses > 0
    assert not trial.valid
    assert InvalidReason.GET_MISSES in [r.code for r in trial.reasons]


def test_populate_checks_the_server_holds_every_key(redis_server):
    from regtrack.bench.runtimes.native import native_server

    workload = load_workload("get-pipeline", keys=2500, data_size=10)
    with native_server(redis_server, (0,)) as server:
        client = server.client()
        setup.populate(client, workload, "redis-benchmark")
        assert client.dbsize() == 2500
        assert client.get(points.benchmark_key(2499)) == "x" * 10
        client.close()


def test_a_trial_records_server_and_client_evidence(tmp_path, redis_server, redis_benchmark_bin):
    store = Store.open(tmp_path / "r.db")
    job = _job(redis_server)
    run_id = store.create_run([], job.config(), {}, job.loadgen.as_dict())
    execute(job, RealBench(), store, run_id)
    (trial,) = store.trials(run_id)
    assert trial.requests > 0 and trial.server_calls >= trial.requests
    assert trial.keyspace_misses == 0 and trial.error_replies == 0
    assert trial.warmup_s >= 0.2
    assert 0 < trial.client_cpu_pct <= 100 and 0 < trial.server_cpu_pct <= 110
    assert trial.contention_pct is not None and trial.steal_pct is not None
    assert trial.wall_s > 0
    (target,) = store.targets(run_id)
    assert target["redis_version"] and target["server_info"]["redis_build_id"]


@pytest.mark.parametrize("bad", ["client_bound_cpu_pct", "contention_limit_pct"])
def test_thresholds_are_validated(bad):
    from regtrack.core.errors import BadInput

    with pytest.raises(BadInput, match=bad):
        load_settings(**{bad: 0})
