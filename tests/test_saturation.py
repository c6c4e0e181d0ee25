"""Saturation is checked, not assumed: CPU shares over a load generator's measured window
(procs.busiest_window), and memtier threads that let the server be the bottleneck."""

from __future__ import annotations

import pytest

from regtrack.core import procs


def _samples(phases: list[tuple[float, float, float]]) -> list[tuple[float, float, float]]:
    """Samples every 0.1 s through phases of (seconds, client share, server share)."""
    out, t, client, server = [(0.0, 0.0, 0.0)], 0.0, 0.0, 0.0
    for seconds, c, s in phases:
        for _ in range(round(seconds / procs.TICK_S)):
            t += procs.TICK_S
            client += c * procs.TICK_S
            server += s * procs.TICK_S
            out.append((t, client, server))
    return out


def test_start_up_and_teardown_do_not_dilute_the_window():
    """1 s of start-up, 3 s measured at 100%/98%, 1 s of teardown: over its whole life the
    client was 'busy 60%'; over its measured window it was saturated."""
    samples = _samples([(1.0, 0.05, 0.0), (3.0, 1.0, 0.98), (1.0, 0.05, 0.0)])
    client, server = procs.busiest_window(samples, 3.0)
    assert client == pytest.approx(100.0, abs=1.0)
    assert server == pytest.approx(98.0, abs=1.0)
    whole = 100.0 * samples[-1][1] / samples[-1][0]
    assert whole == pytest.approx(62.0, abs=1.0)


def test_a_window_as_long_as_the_run_is_the_whole_run():
    samples = _samples([(2.0, 0.5, 0.3)])
    client, server = procs.busiest_window(samples, 5.0)
    assert client == pytest.approx(50.0, abs=1.0) and server == pytest.approx(30.0, abs=1.0)


def test_too_few_samples_give_no_window():
    assert procs.busiest_window([(0.0, 0.0, 0.0), (0.05, 0.01, 0.0)], 1.0) is None
    assert procs.busiest_window([], 1.0) is None


def test_memtier_gets_a_thread_per_client_cpu_unless_the_workload_says():
    from regtrack.workloads.files import load_workload
    from regtrack.workloads.model import GetPipelineWorkload
    from regtrack.workloads.points import with_loadgen_threads

    default = GetPipelineWorkload(name="g", kind="get-pipeline")
    assert with_loadgen_threads(default, "memtier", 4).threads == 4
    assert with_loadgen_threads(default, "memtier", 1).threads == 1
    assert with_loadgen_threads(default, "redis-benchmark", 4).threads == 1
    chosen = GetPipelineWorkload(name="g", kind="get-pipeline", threads=2)
    assert with_loadgen_threads(chosen, "memtier", 4).threads == 2
    shipped = load_workload("get-pipeline")
    assert with_loadgen_threads(shipped, "memtier", 4).threads == 4, "the shipped sweep too"
    mix = load_workload("list-queue")
    assert with_loadgen_threads(mix, "memtier", 4).threads == mix.threads, "mixes keep theirs"
