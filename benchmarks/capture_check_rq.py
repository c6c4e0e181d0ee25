#!/usr/bin/env python3
"""`regtrack mix capture --check` on real RQ traffic: the example in docs/workloads.md.

A redis-server on CPU 0 (tests/library_traffic.py's), RQ's driver (a producer and a
SimpleWorker in one process, examples/drivers/rq_driver.py) on CPU 1 at --rate tasks/s;
while it runs, the regtrack command line as a user runs it: `mix capture --sample`, then
`mix capture --check` of the file written. The replay's server and memtier share the two
CPUs with the live traffic (this VM has no others). Prints both commands and their
output; asserts nothing.

    .venv/bin/python benchmarks/capture_check_rq.py [--library rq] [--rate 80] [--seconds 5]
        [--task rpush]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests import library_traffic as lt


def regtrack(*args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "regtrack", *args]
    print("$ regtrack " + " ".join(args), flush=True)
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    print(done.stdout + done.stderr + f"(exit {done.returncode})\n", flush=True)
    return done


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--library", default="rq", help="whose driver (examples/drivers/)")
    parser.add_argument("--rate", type=float, default=80.0, help="tasks per second")
    parser.add_argument("--sample", type=float, default=3.0, help="mix capture --sample")
    parser.add_argument("--seconds", type=float, default=5.0, help="mix capture --check")
    parser.add_argument("--task", help="the command one task sends once (a mix: rpush for RQ)")
    args = parser.parse_args()
    # Enough tasks to last the capture, the live reading and the replay, with margin.
    tasks = int(args.rate * (args.sample + 2 * args.seconds + 15))
    with tempfile.TemporaryDirectory() as tmp, lt.server() as srv:
        out = Path(tmp) / f"{args.library}.toml"
        driver = lt.start_driver(args.library, tasks, srv, args.rate)
        try:
            time.sleep(2.0)  # the worker registered, the queue flowing
            url = f"redis://127.0.0.1:{srv.port}"
            regtrack("mix", "capture", "--url", url, "--sample", f"{args.sample:g}",
                     "--out", str(out))  # fmt: skip
            task = ["--task", args.task] if args.task else []
            regtrack("mix", "capture", "--check", str(out), "--url", url,
                     "--seconds", f"{args.seconds:g}", *task)  # fmt: skip
            print(f"driver still running after the check: {driver.poll() is None}")
        finally:
            lt.stop_driver(driver)


if __name__ == "__main__":
    main()
