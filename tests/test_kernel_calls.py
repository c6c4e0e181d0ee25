"""Syscalls by name: the kernel's counts (bench/kernel_calls.py), which calls moved
(analysis/syscall_breakdown.py) and where a gate names them (ci headline, JSON, comment)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from regtrack.analysis import syscall_breakdown
from regtrack.analysis.records import GateContext, GateDecision, PooledComparison
from regtrack.bench import kernel_calls
from regtrack.output import ci_summary, github_comment
from tests.conftest import decoy_server


def test_tracepoints_are_read_by_name_from_tracefs(tmp_path):
    for name, ident in (("getppid", 7), ("read", 3)):
        (tmp_path / "events" / "syscalls" / f"sys_enter_{name}").mkdir(parents=True)
        (tmp_path / "events" / "syscalls" / f"sys_enter_{name}" / "id").write_text(f"{ident}\n")
    (tmp_path / "events" / "syscalls" / "sys_exit_read").mkdir()
    assert kernel_calls.tracepoints(tmp_path) == {"getppid": 7, "read": 3}
    assert kernel_calls.tracepoints(tmp_path / "nowhere") == {}


def test_a_host_that_does_not_mount_tracefs_lends_its_ids_to_a_mount_of_our_own():
    """As root, tracefs is mounted on a directory regtrack made, read, and unmounted at
    once: the host's mounts and its temporary directory are left as they were."""
    mounts = Path("/proc/self/mounts").read_text()
    ids = kernel_calls._from_own_mount()
    assert Path("/proc/self/mounts").read_text() == mounts
    assert not list(Path(tempfile.gettempdir()).glob("regtrack-tracefs-*"))
    if os.geteuid() == 0:  # CI runs as root
        assert ids["getppid"] > 0 and ids["read"] > 0 and len(ids) > 100
    else:
        assert ids == {}


def test_a_window_is_the_difference_of_two_readings():
    before = {"read": 10, "epoll_wait": 4}
    after = {"read": 30, "epoll_wait": 4, "getppid": 20}
    assert kernel_calls.since(before, after) == {"getppid": 20, "read": 20}
    assert kernel_calls.since(None, after) is None


def _trials(extra: int) -> pd.DataFrame:
    """Two labels at two points, 4 valid trials each (1,000 GETs); b makes ``extra``
    getppid calls per GET; one invalid trial of b with a wild count is left out."""
    rows = []
    for label, more in (("a", 0), ("b", extra)):
        for point in ("pipeline=1", "pipeline=10"):
            reads = 1000 if point == "pipeline=1" else 100
            for rep in range(4):
                calls = {"read": reads, "write": reads, "epoll_wait": 10 + rep}
                if more:
                    calls["getppid"] = 1000 * more
                rows.append((label, True, point, 1000, calls, "w"))
    rows.append(("b", False, "pipeline=10", 1000, {"read": 10**6}, "w"))
    return pd.DataFrame(
        rows, columns=["target", "valid", "point", "server_calls", "syscalls_by_name", "workload"]
    )


def test_the_call_that_rose_is_named_first_with_its_calls_per_op():
    b = syscall_breakdown.breakdown(_trials(1), "w", "a", "b")
    assert b is not None and b.points == ("pipeline=1", "pipeline=10")
    first = b.calls[0]
    assert first.name == "getppid" and first.baseline_per_op == 0
    assert first.candidate_per_op == pytest.approx(1.0)
    assert [c.name for c in b.rose()] == ["getppid"]  # the invalid trial's reads stay out
    assert syscall_breakdown.text(first) == "getppid +1.000/op (0 -> 1)"
    same = syscall_breakdown.breakdown(_trials(0), "w", "a", "b")
    assert same is not None and same.rose() == []


def _gate(verdict: str, change: float) -> PooledComparison:
    return PooledComparison(
        workload="w", baseline="a", candidate="b", metric="syscalls_per_op",
        unit="syscalls/op", higher_is_better=False, change_pct=change,
        ci_low_pct=change - 1, ci_high_pct=change + 1, mde_pct=1.0, confidence=0.98,
        n_blocks=4, points=("pipeline=1",), method="t-spending", paired_by="seed",
        threshold_pct=5.0, verdict=verdict, gating=True,
    )  # fmt: skip


def test_a_syscall_regression_names_its_calls_in_the_headline_json_and_comment():
    breakdown = syscall_breakdown.breakdown(_trials(1), "w", "a", "b")
    assert breakdown is not None
    decision = GateDecision(
        outcome="regression", gating=(_gate("regression", 180.0),), syscalls=(breakdown,)
    )
    headline = ci_summary.ci_headline(decision, GateContext(repetitions=4))
    assert "syscalls per op +180.0% [+179.0, +181.0] regression" in headline
    assert "calls that rose: getppid +1.000/op" in headline
    quiet = GateDecision(
        outcome="no regression", gating=(_gate("no change", 0.1),), syscalls=(breakdown,)
    )
    assert "getppid" not in ci_summary.ci_headline(quiet, GateContext(repetitions=4))
    data = {
        "outcome": "regression", "headline": headline, "repetitions": 4, "forced": [],
        "gate": [decision.gating[0].to_json()], "records": [],
        "syscalls": [breakdown.to_json()],
    }  # fmt: skip
    verdict = github_comment.CiVerdict.from_json(json.loads(json.dumps(data)))
    body = github_comment.comment_body(verdict, github_comment.CommentContext())
    line = next(x for x in body.splitlines() if x.startswith("Syscalls per op by call"))
    assert "getppid +1.000/op (0 -> 1)" in line and "read" not in line  # unmoved: left out


def test_a_real_server_s_calls_are_counted_by_name(redis_server, tmp_path):
    """A real redis-server's GETs: every GET reply is written, and the counter closes at
    once (the holders keep the kernel's tracepoints registered)."""
    if why := kernel_calls.unavailable():
        pytest.skip(f"syscalls cannot be counted here: {why}")
    with decoy_server(redis_server, tmp_path) as (_, client, process):
        counter = kernel_calls.start(process.pid)
        assert counter is not None and counter.problem is None
        before = counter.read()
        for _ in range(200):
            client.get("k")
        calls = kernel_calls.since(before, counter.read())
        started = time.monotonic()
        counter.close()
        assert time.monotonic() - started < 1.0
    assert calls is not None
    assert calls.get("write", 0) >= 200 and calls.get("read", 0) >= 200
    assert "getppid" not in calls


def test_without_tracepoints_there_is_one_reason_and_no_counter(monkeypatch):
    monkeypatch.setattr(kernel_calls, "_state", {})
    monkeypatch.setattr(kernel_calls, "tracepoints", lambda root=None: {})
    why = kernel_calls.unavailable()
    assert why is not None and "tracepoints are not readable" in why and "\n" not in why
    assert kernel_calls.start(1) is None


def test_a_baseline_counted_by_proc_io_is_compared_with_read_and_write_calls_alone():
    """A stored baseline from before (or from a host without tracepoints) holds read and
    write calls alone: the candidate's count of every call must not read as +50%."""

    def trials(by_name):
        return pd.DataFrame({
            "server_calls": [1000, 1000], "syscalls_read": [1000, 1000],
            "syscalls_write": [1000, 1000], "syscalls_per_op": [3.0 if by_name else 2.0] * 2,
            "syscalls_by_name": [{"read": 1000, "write": 1000, "epoll_wait": 1000}] * 2
            if by_name else [None, None],
        })  # fmt: skip

    base, cand = syscall_breakdown.alike(trials(False), trials(True))
    assert list(base["syscalls_per_op"]) == list(cand["syscalls_per_op"]) == [2.0, 2.0]
    assert cand["syscalls_by_name"].isna().all(), "no breakdown of calls one side never named"
    both = syscall_breakdown.alike(trials(True), trials(True))
    assert list(both[1]["syscalls_per_op"]) == [3.0, 3.0], "both by name: kept"


def test_the_holders_are_released_without_holding_regtracks_output_or_locks(tmp_path):
    """At exit a forked child closes the holders (the kernel takes ~12 s): it keeps no
    other descriptor, so a caller reading regtrack's output to its end (a CI step) and a
    lock regtrack held are free the moment regtrack exits."""
    lock = tmp_path / "lock"
    code = (
        "import fcntl, sys; from regtrack.bench import kernel_calls; "
        f"f = open({str(lock)!r}, 'w'); fcntl.flock(f, fcntl.LOCK_EX); "
        "print(kernel_calls.unavailable())"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    pipe = f"pipe:[{os.fstat(proc.stdout.fileno()).st_ino}]"
    assert proc.wait(timeout=60) == 0
    if proc.stdout.readline().strip() != "None":
        pytest.skip("no syscall tracepoints here: nothing is held")
    holders = []
    for fd in Path("/proc").glob("[0-9]*/fd/*"):
        if fd.parent.parent.name == str(os.getpid()):  # the pipe's reading end: ours
            continue
        with contextlib.suppress(OSError):
            if os.readlink(fd) in (pipe, str(lock)):
                holders.append(str(fd))
    assert holders == [], "the releasing child holds regtrack's output or its lock"
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free: raises if still held
