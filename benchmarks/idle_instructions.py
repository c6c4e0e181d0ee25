#!/usr/bin/env python3
"""What an idle server counts under callgrind as regtrack runs it (serverCron left out by
--toggle-collect, hz 1): the time-driven instructions per second that an instruction
window of an unsaturated server adds to its count (bench/callgrind/protocol.py bounds
their share with this). Each binary: started under regtrack's callgrind wrapper with
`--hz 1`, CLIENTS idle connections open, instrumentation on, zero, SECONDS of nothing,
dump; then the same with one GET a second (a server that waits on a slow client).

    benchmarks/idle_instructions.py [--seconds 10] [--clients 10] REDIS_SERVER ...
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from regtrack.bench.callgrind import control
from regtrack.bench.callgrind.profile import parse

PORT = 7791


def counted(binary: str, seconds: float, clients: int, gets_per_s: float) -> float:
    """Instructions per second of an idle (or nearly idle) server under callgrind."""
    valgrind, vgdb = control.require()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        argv = [*control.wrapper(valgrind, out), binary, "--port", str(PORT), "--hz",
                str(control.CALLGRIND_HZ), "--save", "", "--appendonly", "no"]  # fmt: skip
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            conns = [redis.Redis(port=PORT) for _ in range(clients)]
            deadline = time.monotonic() + 60
            while True:
                try:
                    conns[0].ping()
                    break
                except redis.ConnectionError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            for c in conns:
                c.ping()
            alive = lambda: proc.poll() is None  # noqa: E731
            control.instrument(vgdb, out, proc.pid, True, alive)
            control.zero(vgdb, out, proc.pid, alive)
            start = time.monotonic()
            while time.monotonic() - start < seconds:
                if gets_per_s:
                    conns[0].get("k")
                    time.sleep(1 / gets_per_s)
                else:
                    time.sleep(0.1)
            wall = time.monotonic() - start
            total = parse(control.dump(vgdb, out, proc.pid, alive)).instructions
            return total / wall
        finally:
            proc.terminate()
            proc.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("binaries", nargs="+")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=10)
    args = parser.parse_args()
    print(f"{'binary':70} {'idle/s':>10} {'1 GET/s, per s':>15}")
    for binary in args.binaries:
        idle = counted(binary, args.seconds, args.clients, 0)
        slow = counted(binary, args.seconds, args.clients, 1)
        print(f"{binary:70} {idle:10,.0f} {slow:15,.0f}")


if __name__ == "__main__":
    main()
