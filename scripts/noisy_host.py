#!/usr/bin/env python3
"""Make this machine as noisy as a shared VM, to see which tests pass only on a quiet one.

CI machines of this kind lose 4-6% of their CPU to other tenants: a sleeping thread woke
late by p99 375 us, p99.9 2 ms, at worst 15 ms (measured 2026-12-06). This puts, on each
CPU, a SCHED_FIFO spinner that takes the CPU for a random stall (lognormal, median
e^MU s, capped) after random gaps (exponential, mean GAP s), for SECONDS. Run it beside
the tests you suspect (under the test lock, as the tests are):

    NOISE_GAP=0.1 NOISE_MU=-8 NOISE_CAP=0.015 scripts/noisy_host.py 600 &   # like CI's worst
    NOISE_GAP=0.04 NOISE_MU=-7 NOISE_CAP=0.03 scripts/noisy_host.py 600 &   # harsher

A test that fails under it for the host's noise, not for the code, has a bound to mend.
Needs root (SCHED_FIFO). Not a test and not a benchmark: it measures nothing.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import sys
import time

GAP = float(os.environ.get("NOISE_GAP", "0.1"))
MU = float(os.environ.get("NOISE_MU", "-8"))
CAP = float(os.environ.get("NOISE_CAP", "0.015"))


def spin(cpu: int, seconds: float, seed: int) -> None:
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    rnd = random.Random(seed)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(rnd.expovariate(1 / GAP))
        stall_until = time.perf_counter() + min(CAP, rnd.lognormvariate(MU, 1.2))
        while time.perf_counter() < stall_until:
            pass


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 600.0
    spinners = [
        mp.Process(target=spin, args=(cpu, seconds, cpu)) for cpu in sorted(os.sched_getaffinity(0))
    ]
    for p in spinners:
        p.start()
    for p in spinners:
        p.join()


if __name__ == "__main__":
    main()
