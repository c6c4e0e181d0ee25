"""The real task-queue libraries' drivers (examples/drivers/) run against a real redis-server
and finish every task, and the harness sees each library's dequeue command per task
(tests/library_traffic.py; benchmarks/library_traffic.py prints the full tables)."""

from __future__ import annotations

import pytest

from tests import library_traffic as lt

pytestmark = [pytest.mark.slow, pytest.mark.extended]

# The command each library's worker takes tasks with, and how many per task at least (one
# for those that run once per task; the stream read takes a batch).
DEQUEUE = {
    "celery": ("cmdstat_brpop", 1.0),
    "rq": ("cmdstat_blmove", 1.0),
    "taskiq": ("cmdstat_xreadgroup", 0.0),
    "arq": ("cmdstat_zscore", 1.0),  # after its ZRANGEBYSCORE poll, each id is checked
    "dramatiq": ("cmdstat_evalsha", 1.0),  # enqueue, fetch and ack: all dispatch.lua
}


@pytest.mark.parametrize("library", list(lt.LIBRARIES))
def test_library_traffic(library):
    traffic = lt.measure(library, small=10, large=40)
    for run in traffic.runs:
        assert run.exit_code == 0, run.stderr[-2000:]
        assert run.task_lines == run.tasks and run.done_line, run.stderr[-2000:]
    command, at_least = DEQUEUE[library]
    per_task = traffic.commands_per_task.get(command, 0)
    assert per_task > 0 and per_task >= at_least, traffic.commands_per_task
    assert traffic.server_cpu_us_per_task > 0
