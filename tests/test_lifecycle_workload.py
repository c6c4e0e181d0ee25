"""Task-lifecycle workloads: the file's checks, the engine's document, how a trial is
judged and which visits its metrics need (fast, on constructed data; the real engine and
servers are in test_lifecycle_engine.py and test_lifecycle_real.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from regtrack.analysis.metrics import GATING, METRIC_BY_NAME
from regtrack.bench import lifecycle_trial
from regtrack.bench.loadgen.lifecycle import LifecycleReport
from regtrack.bench.prepare import LIFECYCLE_LOAD, with_task_latency
from regtrack.core.errors import BadInput
from regtrack.core.options import Options
from regtrack.core.records import InvalidReason, LifecycleFacts, TrialRecord
from regtrack.core.settings import Thresholds
from regtrack.results.store import Store
from regtrack.targets.versions import Target
from regtrack.workloads import points
from regtrack.workloads.files import load_workload
from regtrack.workloads.lifecycle import LifecycleWorkload
from tests.conftest import cli_in_process, stored_plan

GOOD = """
name = "q"
kind = "lifecycle"
follows = "a list queue 1.0"
min_redis = "6.2"
data_size = 100
producers = 2
consumers = 3
[scripts]
done = "return redis.call('SET', KEYS[1], ARGV[1])"
[[setup]]
command = ["SET", "started", "${now}"]
[[enqueue]]
commands = [
  ["MULTI"], ["HSET", "job:${task}", "data", "${payload}"], ["LPUSH", "q", "${task}"], ["EXEC"],
]
[dequeue]
command = ["BLMOVE", "q", "active", "RIGHT", "LEFT", "1"]
[[process]]
commands = [["HGETALL", "job:${id}"]]
[[process]]
commands = [
  ["EVALSHA", "${sha:done}", "1", "result:${task}", "${payload}"], ["LREM", "active", "1", "${id}"],
]
"""  # fmt: skip


LIFECYCLE_PRESETS = ["celery", "rq", "taskiq", "arq", "dramatiq", "bullmq", "sidekiq"]


@pytest.mark.parametrize("name", LIFECYCLE_PRESETS)
def test_lifecycle_presets_load_and_name_the_library_version_they_follow(name):
    workload = load_workload(name)
    assert isinstance(workload, LifecycleWorkload)
    assert re.search(r"\b\d+\.\d+\.\d+\b", workload.follows), workload.follows
    assert workload.approximations.strip() and workload.description


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "q.toml"
    path.write_text(text)
    return path


def test_a_lifecycle_file_becomes_the_engines_document_step_by_step(tmp_path):
    workload = load_workload(str(_write(tmp_path, GOOD)))
    assert isinstance(workload, LifecycleWorkload)
    doc = workload.engine_document()["lifecycle"]
    assert doc["producers"] == 2 and doc["consumers"] == 3 and doc["data_size"] == 100
    assert [len(step) for step in doc["enqueue"]] == [4]  # one round trip: the transaction
    assert [len(step) for step in doc["process"]] == [1, 2]
    assert doc["dequeue"] == {"command": ["BLMOVE", "q", "active", "RIGHT", "LEFT", "1"],
                              "empty_wait_ms": 0}  # fmt: skip
    assert set(doc["scripts"]) == {"done"}
    (point,) = points.points(workload)
    assert point.label == points.CAPACITY and point.params["consumers"] == 3
    assert points.load_specs(workload, point, "regtrack-openloop") == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('"job:${id}"', '"job:${job}"'), "process[0].commands[0]: ${job} is not a placeholder"),
        (("${sha:done}", "${sha:finish}"), "${sha:finish} names no script"),
        (('"LPUSH", "q", "${task}"', '"LPUSH", "q", "${id}"'),
         "enqueue[0].commands[2]: ${id} is what a consumer got"),
        (('["HGETALL", "job:${id}"]', '["BRPOP", "other", "1"]'),
         "process[0].commands[0]: BRPOP blocks; only the dequeue command may wait"),
        (('"started", "${now}"', '"started", "${task}"'), "setup[0]: ${task} belongs to a task"),
        (('["HSET", "job:${task}", "data", "${payload}"], ["LPUSH", "q", "${task}"]',
          '["LPUSH", "q", "x"]'), "enqueue: no command sends ${task} or ${payload}"),
        (('min_redis = "6.2"', 'min_redis = "5.0"'),
         "dequeue.command: BLMOVE needs Redis 6.2 but min_redis is 5.0"),
        (('"HGETALL"', '"HGETAL"'), "unknown command 'HGETAL'"),
        (('"HGETALL", "job:${id}"', '"CONFIG", "SET", "dir", "/"'), "CONFIG SET administers"),
        (('follows = "a list queue 1.0"', 'follows = ""'), "field 'follows'"),
        (("data_size = 100", "data_size = 10"), "field 'data_size'"),
        (("consumers = 3", "consumers = 3\nthreads = 2"), "field 'threads': unknown field"),
        (('"data", "${payload}"', '"data", "${fill:10,x}"'),
         "enqueue[0].commands[1]: ${fill:10,x}: give sizes in bytes"),
        (('"data", "${payload}"', '"data", "${fill:70000000}"'), "(at most 67108864)"),
        (('"data", "${payload}"', '"data", "${fill:' + ",".join(["1"] * 65) + '}"'),
         "65 sizes; give at most 64"),
        (('"started", "${now}"', '"started", "${fill:5,6}"'),
         "setup[0]: ${fill:...} is drawn per task"),
    ],
)  # fmt: skip
def test_each_lifecycle_mistake_is_one_line_naming_where(tmp_path, change, message):
    old, new = change
    assert old in GOOD
    path = _write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(BadInput) as failure:
        load_workload(str(path))
    text = str(failure.value)
    assert text.startswith(str(path)) and message in text and "\n" not in text


def _report(**change) -> LifecycleReport:
    base = {
        "version": "0.4.0", "mode": "lifecycle", "rate": 2000.0, "arrival": "poisson",
        "duration_s": 2.0, "enqueued": 4000, "completed": 4000, "tasks_per_sec": 2000.0,
        "latency_us": {"p50": 120.0, "p99": 900.0, "p999": 1500.0, "max": 2000.0,
                       "mean": 150.0, "count": 4000},
        "cpu": {"user_s": 0.3, "sys_s": 0.3, "busy_fraction": 0.3},
    }  # fmt: skip
    return LifecycleReport.model_validate(base | change)


def _judged(report: LifecycleReport, server_cpu_pct: float = 40.0) -> TrialRecord:
    record = TrialRecord(
        seq=0, repetition=0, target_label="a", workload="q", point="rate=2000", params={},
        started_at="2026-12-06T00:00:00+00:00",
    )  # fmt: skip
    record.valid, record.server_cpu_pct = True, server_cpu_pct
    lifecycle_trial.from_report(25.0, 95.0, record, report)
    return record


def test_a_kept_lifecycle_trial_is_valid_with_tasks_per_second_and_task_latency():
    record = _judged(_report())
    assert record.valid and record.ops_per_sec == 2000.0 and record.requests == 4000
    assert record.latency_ms["p99"] == pytest.approx(0.9)
    assert record.open_loop is not None and record.open_loop.offered_rate == 2000.0
    counted = _judged(_report(enqueue_per_sec=1990.0, round_trips_per_task=4.5, left=0))
    assert counted.lifecycle is not None and counted.lifecycle.enqueued == 4000
    assert counted.lifecycle.enqueue_per_sec == 1990.0
    assert counted.lifecycle.round_trips_per_task == 4.5
    capacity = _judged(_report(rate=None))
    assert capacity.valid and capacity.open_loop is None and capacity.latency_ms == {}
    # both sides near full: the pair's capacity, kept; stalls taint no latency at capacity
    busy = {"cpu": {"user_s": 1, "sys_s": 1, "busy_fraction": 0.97}, "tainted": 900}
    assert _judged(_report(rate=None, **busy), server_cpu_pct=88.0).valid


@pytest.mark.parametrize(
    ("change", "code", "words"),
    [
        ({"left": 300}, InvalidReason.BEHIND_SCHEDULE, "300 of 4,000 tasks were still not done"),
        ({"behind": True, "behind_reasons": ["lag p99 900 us"]}, InvalidReason.BEHIND_SCHEDULE,
         "fell behind their schedule (lag p99 900 us)"),
        ({"cpu": {"user_s": 1, "sys_s": 1, "busy_fraction": 0.99}}, InvalidReason.CLIENT_BOUND,
         "engine used 99% CPU (limit 95%) while the server used 40%"),
        ({"errors": {"NOSCRIPT": 3}, "error_commands": {"EVALSHA": 3}},
         InvalidReason.ERROR_REPLIES, "3 replies were errors (NOSCRIPT 3; EVALSHA x3)"),
        ({"tainted": 400, "stalls": {"count": 4, "total_ms": 9.0, "max_ms": 4.0}},
         InvalidReason.BEHIND_SCHEDULE, "left 400 of 4,000 tasks out of the latencies"),
    ],
)  # fmt: skip
def test_a_lifecycle_trial_whose_figures_are_not_the_servers_says_why(change, code, words):
    record = _judged(_report(**change))
    assert not record.valid
    assert any(r.code is code and words in r.detail for r in record.reasons), record.reasons


def test_lifecycle_metrics_are_measured_by_the_plans_visits_and_share_their_kins_thresholds():
    names = ("tasks_per_sec", "server_cpu_per_task", "commands_per_task", "task_p99",
             "enqueue_per_sec", "round_trips_per_task")  # fmt: skip
    visits = {name: METRIC_BY_NAME[name].measured_by for name in names}
    assert visits == {"tasks_per_sec": "throughput", "server_cpu_per_task": "throughput",
                      "commands_per_task": "throughput", "task_p99": "latency",
                      "enqueue_per_sec": "throughput",
                      "round_trips_per_task": "throughput"}  # fmt: skip
    thresholds = Thresholds(throughput=4.0, open_loop_p99=12.0, syscalls=2.0)
    assert thresholds.for_metric("tasks_per_sec") == 4.0
    assert thresholds.for_metric("server_cpu_per_task") == 4.0
    assert thresholds.for_metric("task_p99") == 12.0
    assert thresholds.for_metric("enqueue_per_sec") == 4.0
    assert thresholds.for_metric("round_trips_per_task") == 2.0
    # shown with verdicts, never gating: a producer's rate follows the consumers (or the
    # stated rate), round trips per task are the client's side of commands per task
    assert not {"enqueue_per_sec", "round_trips_per_task"} & set(GATING)


def _stored_lifecycle_run(db: Path) -> None:
    """Two versions' capacity points, three repetitions: b's consumers take a round trip
    more per task (4 -> 5) and enqueue 10% slower."""
    store = Store.open(db)
    run_id = store.create_run(["regtrack", "run"], stored_plan(), {}, {})
    for position, label in enumerate(("a", "b")):
        target_id = store.add_target(run_id, position, Target(label, "bin:/x", "bin"), {})
        for rep in range(3):
            rate = (1000.0 if label == "a" else 900.0) * (1 + rep / 100)
            trips = (4.0 if label == "a" else 5.0) + rep / 100
            record = TrialRecord(
                seq=2 * rep + position, repetition=rep, target_label=label, workload="q",
                point="capacity", params={}, started_at="2026-12-06T00:00:00+00:00",
                mode="tasks", ops_per_sec=rate, requests=int(rate), server_calls=int(3 * rate),
                valid=True, server_stats={"server_cpu_s": rate * 50e-6},
            )  # fmt: skip
            record.lifecycle = LifecycleFacts(
                enqueued=int(rate), completed=int(rate), not_done=0, enqueue_per_sec=rate,
                commands_per_task=3.0, round_trips_per_task=trips, empty_dequeues=2,
                foreign_tasks=0,
            )  # fmt: skip
            store.add_trial(run_id, target_id, record)
    store.finish_run(run_id, "complete")
    store.close()


def test_enqueue_rate_and_round_trips_per_task_are_compared_in_every_format(tmp_path):
    db = tmp_path / "r.db"
    _stored_lifecycle_run(db)
    proc = cli_in_process("compare", "--db", str(db), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    pooled = {r["metric"]: r for r in json.loads(proc.stdout)["records"] if r["candidate"] == "b"}
    assert {"tasks_per_sec", "enqueue_per_sec", "round_trips_per_task"} <= set(pooled)
    trips, rate = pooled["round_trips_per_task"], pooled["enqueue_per_sec"]
    assert trips["change_pct"] == pytest.approx(25.0, abs=0.5) and trips["verdict"] == "regression"
    assert rate["change_pct"] == pytest.approx(-10.0, abs=0.5) and rate["verdict"] == "regression"
    for form, title in (
        ("table", "round_trips_per_task (round trips/task, lower is better)"),
        ("markdown", "round_trips_per_task (round trips/task, lower is better)"),
        ("csv", "round_trips_per_task"),
    ):
        shown = cli_in_process("compare", "--db", str(db), "--format", form)
        assert shown.returncode == 0, shown.stderr
        assert title in shown.stdout and "enqueue_per_sec" in shown.stdout, shown.stdout
        assert "regression" in shown.stdout, shown.stdout
    table = cli_in_process("compare", "--db", str(db)).stdout
    assert "+24.9% [+24.8, +25.1] regression" in table and "-10.0% [-10.0, -10.0]" in table


@pytest.mark.parametrize(
    ("asked", "load"),
    [
        ({"workload": "sidekiq"}, LIFECYCLE_LOAD),  # a lifecycle: its tasks timed at half
        ({"workload": "sidekiq", "load": "0.2"}, "0.2"),  # the user's load, not ours
        ({"workload": "sidekiq", "rate": "500"}, None),  # a rate: no load added
        ({"workload": "sidekiq", "metric": "instructions"}, None),  # nothing timed
        ({"workload": "streams-queue"}, None),  # a mix: closed loop unless asked
    ],
)
def test_a_lifecycle_run_times_tasks_at_half_its_capacity_by_default(asked, load):
    assert LIFECYCLE_LOAD == "0.5"
    assert with_task_latency(Options(**asked)).load == load
