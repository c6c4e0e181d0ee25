"""The others' share of the pinned CPUs (core/others.py): counted from every process's own
CPU time, ours (regtrack, its servers, their descendants) left out."""

from __future__ import annotations

import subprocess
import time

import psutil
import pytest

from regtrack.core.others import Proc, Snapshot, used_pct

ALL = frozenset({0, 1})


def snap(at: float, procs: dict[tuple[int, float], Proc], ours=frozenset()) -> Snapshot:
    return Snapshot(at, procs, frozenset(ours))


def test_only_what_others_used_since_counts_by_the_share_of_their_cpus_that_are_pinned():
    before = snap(0.0, {
        (10, 1.0): Proc(1, 5.0, ALL),             # runs anywhere: half of it on CPU 0
        (11, 1.0): Proc(1, 2.0, frozenset({1})),  # never on CPU 0
        (12, 1.0): Proc(1, 1.0, frozenset({0})),  # ours
        (13, 1.0): Proc(1, 3.0, frozenset({0})),  # ends; pid 13 is then another process
    }, ours={(12, 1.0)})  # fmt: skip
    after = snap(2.0, {
        (10, 1.0): Proc(1, 5.4, ALL),
        (11, 1.0): Proc(1, 3.0, frozenset({1})),
        (12, 1.0): Proc(1, 2.9, frozenset({0})),
        (13, 1.5): Proc(1, 0.1, frozenset({0})),  # started since: counts whole
    }, ours={(12, 1.0)})  # fmt: skip
    assert used_pct(before, after, [0]) == pytest.approx(100.0 * (0.2 + 0.1) / 2.0)
    assert used_pct(before, after, [1]) == pytest.approx(100.0 * (0.2 + 1.0) / 2.0)
    assert used_pct(before, after, [0, 1]) == pytest.approx(100.0 * (0.4 + 1.0 + 0.1) / 4.0)


def test_a_child_that_ended_counts_once_through_its_parent():
    """A build's compiler that ran 0.5 s, 0.2 s of it before the interval: its parent's
    children's time grows by 0.5 s when it is reaped; only 0.3 s was in the interval."""
    before = snap(0.0, {(20, 1.0): Proc(1, 1.0, ALL), (21, 2.0): Proc(20, 0.2, ALL)})
    after = snap(1.0, {(20, 1.0): Proc(1, 1.0 + 0.5, ALL)})
    assert used_pct(before, after, [0, 1]) == pytest.approx(100.0 * 0.3 / 2.0)


def test_a_pinned_loop_of_another_process_is_seen_and_one_of_ours_is_not():
    """Real processes, a busy loop on each CPU: one a grandchild of the process taken as
    regtrack's (``me``; the test session adopts orphans, so the other loop is its child
    but not regtrack's) counts as nothing, the other as about the whole CPU."""
    loop = "while :; do :; done"
    ours = subprocess.Popen(["sh", "-c", f"taskset -c 1 sh -c '{loop}'"])
    other = subprocess.Popen(["taskset", "-c", "0", "sh", "-c", loop])
    try:
        time.sleep(0.2)
        before = Snapshot.read(me=ours.pid)
        time.sleep(1.0)
        after = Snapshot.read(me=ours.pid)
        assert len(after.ours) == 2  # the shell and its loop
    finally:
        for proc in (other, ours):
            for child in psutil.Process(proc.pid).children(recursive=True):
                child.kill()
            proc.kill()
            proc.wait()
    assert used_pct(before, after, [0]) > 70.0
    assert used_pct(before, after, [1]) < 30.0
