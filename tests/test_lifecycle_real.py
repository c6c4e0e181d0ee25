"""Each lifecycle preset against the real library it follows (tests/library_check.py): the
same command set, and the commands sent once per task within 10% per task of the real
library's (INFO commandstats). taskiq runs in the first tier (its worker starts in well
under a second); the others, whose workers take seconds to start, in the second."""

from __future__ import annotations

import pytest

from tests import library_check

pytestmark = [pytest.mark.slow]


def _checked(library: str) -> library_check.Check:
    check = library_check.check(library, small=20, large=220)
    table = check.table()
    assert check.rows, table
    assert not check.missing, f"commands only one side sends: {check.missing}\n{table}"
    off = [r for r in check.rows if not r.within]
    assert not off, f"outside {library_check.COMMANDS_PCT}% per task: {off}\n{table}"
    assert check.preset_tasks > 0 and check.preset_cpu_us > 0 and check.real_cpu_us > 0
    return check


def test_the_taskiq_preset_sends_what_taskiq_redis_sends_per_task():
    check = _checked("taskiq")
    per_task = {r.command: r for r in check.rows}
    # the stream's own commands are per task, and the ack carries the entry id it read
    assert per_task["cmdstat_xadd"].preset == pytest.approx(1.0, rel=0.1)
    assert per_task["cmdstat_xack"].preset == pytest.approx(1.0, rel=0.1)
    # at the check's arrival rate every read finds one task: the read and its reclaim are
    # held to the bound like the rest, none exempted
    assert check.paced
    assert not any(r.regime for r in check.rows)
    assert per_task["cmdstat_xautoclaim"].real == pytest.approx(1.0, rel=0.1)


@pytest.mark.extended
@pytest.mark.parametrize("library", ["celery", "rq", "arq", "dramatiq"])
def test_each_preset_sends_what_its_library_sends_per_task(library):
    check = _checked(library)
    if library == "arq":
        # checked at a fixed arrival rate: the real worker's poll every 0.5 s finds what
        # arrived since, the regime the server CPU per task is compared in
        assert check.paced
        polls = {r.command: r for r in check.rows}["cmdstat_zrangebyscore"]
        assert polls.real == pytest.approx(1 / (0.5 * check.rate), abs=0.01), check.table()
