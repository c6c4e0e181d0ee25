"""The one real lifecycle capture: RQ (the pinned test dependency) enqueues and its
SimpleWorker runs jobs (examples/drivers/rq_driver.py) against a real redis-server while
`regtrack mix capture --sample` watches; the file written is a lifecycle with RQ's MULTI
... EXEC enqueue, its BLMOVE and the job hash linked by the job's id, it loads as a
workload, the open-loop engine runs it clean on a fresh server, and `mix capture --check`
replays it at the live task rate with every command's share within 10% of the live one."""

from __future__ import annotations

import time

import pytest

from regtrack.workloads.files import load_workload
from regtrack.workloads.lifecycle import LifecycleWorkload
from tests import library_check
from tests import library_traffic as lt
from tests.conftest import run_cli

pytestmark = [pytest.mark.slow]

# Jobs for up to 30 s, at well under the worker's pace (so a backlog drains fast): RQ's
# SimpleWorker drains ~180 jobs/s on most of these VMs but 91 on a slow one, where 100/s
# kept it behind for good under the sample's MONITOR. The driver is stopped once the check
# is done (its live read must fall inside the traffic, however slow this host is today).
TASKS, RATE = 1800, 60.0
# The check's live reading: 2 s hold ~120 jobs, so a job more or less at its edges moves a
# command's share by about 1% (1 s at 50/s once read RPUSH 12% under BLMOVE).
CHECK_S = 2


def test_a_real_rq_sample_is_written_as_its_lifecycle_and_runs(tmp_path):
    out = tmp_path / "rq-sampled.toml"
    with lt.server() as srv:
        driver = lt.start_driver("rq", TASKS, srv, RATE)
        try:
            time.sleep(1.0)  # the worker started and working
            proc = run_cli("mix", "capture", "--url", srv.url, "--sample", "1.5",
                           "--out", str(out), timeout=60)  # fmt: skip
            # The sample's MONITOR slowed the server: the worker fell behind, and drains that
            # backlog faster than tasks arrive. The check compares a steady state: the queue
            # short for a whole second (5 s was once too little on a slow CI host: its live
            # reading caught the drain, 81 tasks/s against the driver's 100).
            _steady(srv.client, "rq:queue:default", for_s=1.0, within_s=12.0)
            checked = run_cli("mix", "capture", "--check", str(out), "--url", srv.url,
                              "--seconds", str(CHECK_S), timeout=60)  # fmt: skip
            flowing = driver.poll() is None  # so the check read the live traffic
        finally:
            err = lt.stop_driver(driver)  # its producer thread would enqueue the rest first
        # the ids RQ drew (its jobs', its worker's): none may reach the file
        names = [k.decode() for k in srv.client.keys("rq:*")]
    ids = {part for name in names for part in name.split(":") if len(part) >= 16}
    assert flowing and "Traceback" not in err, err[-2000:]
    assert proc.returncode == 0, proc.stderr
    assert 'Written as a task lifecycle (kind = "lifecycle"' in proc.stdout, proc.stdout
    text = out.read_text()
    assert len(ids) > 100 and not [i for i in ids if i in text]
    workload = load_workload(str(out))
    assert isinstance(workload, LifecycleWorkload)
    enqueue = [c for step in workload.enqueue for c in step.commands]
    assert ["RPUSH", "rq:queue:default", "${task}"] in enqueue, enqueue
    last = workload.enqueue[-1].commands
    assert last[0] == ["MULTI"] and last[-1] == ["EXEC"], last
    assert any(c[0] == "HSET" and c[1] == "rq:job:${task}" for c in last), last
    assert workload.dequeue.command[:2] == ["BLMOVE", "rq:queue:default"]
    process = [c for step in workload.process for c in step.commands]
    assert ["HGETALL", "rq:job:${task}"] in process, process
    assert any(step.commands[0] == ["MULTI"] for step in workload.process)
    assert workload.engine_document()["lifecycle"]["dequeue"]["command"][0] == "BLMOVE"
    # the engine runs it: every task enqueued is done, no error replies
    per_task, cpu_us, tasks = library_check.preset_traffic(workload, None, 1.0)
    assert tasks > 0 and per_task.get("cmdstat_blmove", 0) > 0 and cpu_us > 0
    assert per_task["cmdstat_hgetall"] == pytest.approx(1.0, rel=0.2)
    # checked against the live traffic: replayed at its rate of BLMOVE, shares alike
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "regtrack-openloop at " in checked.stdout and "blmove" in checked.stdout
    assert "server CPU per task (one blmove call)" in checked.stdout, checked.stdout
    assert checked.stdout.splitlines()[-1].startswith("faithful: every command"), checked.stdout


def _steady(client, queue: str, *, for_s: float, within_s: float) -> None:
    """Wait until ``queue`` has held at most 2 jobs for ``for_s`` seconds on end (the
    worker keeps up), at most ``within_s``; the check then fails on its own if it did not."""
    deadline = time.monotonic() + within_s
    since = time.monotonic()
    while time.monotonic() < deadline:
        if client.llen(queue) > 2:
            since = time.monotonic()
        elif time.monotonic() - since >= for_s:
            return
        time.sleep(0.05)


# Celery at 30 tasks/s for 6 s: a solo worker (~400 tasks/s here) keeps up even under the
# sample's MONITOR, so each task is seen whole (at 150 the sample saw only older tasks and
# the capture wrote a mix); the driver then stops its worker itself (killed, the driver
# would leave its worker child running).
CELERY_TASKS, CELERY_RATE = 180, 30.0


@pytest.mark.extended
def test_a_real_celery_sample_replays_as_celery_per_task(tmp_path):
    """Celery 5.7 (kombu's message, its BRPOP on a connection of its own, the result
    backend's SUBSCRIBE) sampled while it runs: the file written is a lifecycle, held to the
    real library the way each preset is (tests/library_check.py): the same commands per
    task, each within 10% (issue 49). The server's CPU per task is measured on both sides
    but not held to 15% here: one check's real figure (two driver runs' difference) spread
    from -15% to +8% around the replay's over 7 interleaved rounds on this VM (median -5%)."""
    out = tmp_path / "celery-sampled.toml"
    with lt.server() as srv:
        driver = lt.start_driver("celery", CELERY_TASKS, srv, CELERY_RATE)
        try:
            time.sleep(2.0)  # its worker started and working
            proc = run_cli("mix", "capture", "--url", srv.url, "--sample", "1.5",
                           "--out", str(out), timeout=60)  # fmt: skip
        finally:
            _, err = driver.communicate(timeout=120)
    assert driver.returncode == 0 and "Traceback" not in err, err[-2000:]
    assert proc.returncode == 0, proc.stderr
    assert 'Written as a task lifecycle (kind = "lifecycle"' in proc.stdout, proc.stdout
    workload = load_workload(str(out))
    assert isinstance(workload, LifecycleWorkload)
    assert workload.dequeue.command[0] == "BRPOP"
    check = library_check.check("celery", 100, 600, str(out))
    table = check.table()
    print(table)  # its CPU per task too, shown with -s
    assert not check.missing and check.commands_ok, table
    assert sum(r.real for r in check.rows) == pytest.approx(17, abs=0.5), table
    assert check.real_cpu_us > 0 and check.preset_cpu_us > 0 and check.preset_tasks > 0, table
