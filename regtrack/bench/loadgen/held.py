"""A load generator held on a leash: started once, then paused and resumed on demand.

Paired-in-time trials (bench/paired.py) move the load between servers in short windows.
Starting a load generator takes 0.1-1 s (memtier's threads connect one by one), far
longer than a window, so each server gets its own load generator for the whole point,
told to run far longer than needed, and paused (SIGSTOP) whenever another server has the
load. Its connections stay open while it is paused; the server answers the requests
already in flight into the socket buffers and then sleeps. Nothing it reports is used:
the server counts each window's operations itself (bench/windows.py), and a paused
client's latency figures would count the pause, so this mode gives no latency.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from regtrack.bench.loadgen import memtier, memtier_argv, redis_benchmark
from regtrack.bench.loadgen.base import Aim
from regtrack.core import child_env, procs
from regtrack.core.errors import BadInput
from regtrack.core.records import LoadSpec

# Far more than any window loop needs: the generator is killed when the point is done.
# redis-benchmark reads -n as a C int; memtier's --test-time is in seconds.
FOREVER_REQUESTS = 2_000_000_000
FOREVER_SECONDS = 86_400
PAUSABLE = (redis_benchmark.NAME, memtier.NAME)


def argv(aim: Aim, spec: LoadSpec, json_out: Path) -> list[str]:
    """The command line that runs until it is killed."""
    if aim.binary.name == redis_benchmark.NAME:
        return redis_benchmark.argv(aim, spec, FOREVER_REQUESTS)
    if aim.binary.name == memtier.NAME:
        return memtier_argv.argv(aim, spec, json_out=json_out, test_time=FOREVER_SECONDS)
    raise BadInput(
        f"{aim.binary.name} cannot be paused and resumed (it runs inside regtrack): "
        "measure with --pairing separate, or use memtier or redis-benchmark"
    )


class HeldLoad:
    """One server's load generator processes (one per [[process]] of a mix), paused
    between its windows."""

    def __init__(self, aim: Aim, specs: list[LoadSpec]) -> None:
        self.aim = aim
        self.argv: list[list[str]] = []
        self._procs: list[subprocess.Popen] = []
        self._outputs: list[IO[bytes]] = []
        self._tmp = tempfile.TemporaryDirectory(prefix="regtrack-held-")
        try:
            for i, spec in enumerate(specs):
                command = argv(aim, spec, Path(self._tmp.name) / f"report-{i}.json")
                out = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
                self._outputs.append(out)
                self.argv.append(command)
                self._procs.append(
                    procs.spawn(
                        command,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        env=child_env.load_generator(),
                    )
                )
        except BaseException:
            self.close()
            raise

    def wait_flowing(self, counted: Callable[[], float], timeout: float = 15.0) -> str | None:
        """Wait until the server counts this load's operations, then pause it; a problem
        (the generator exited, nothing arrived in time) is returned, not raised."""
        start = counted()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(0.05)
            problem = self.problem()
            if problem:
                return problem
            if counted() > start:
                self.pause()
                return None
        self.pause()
        return f"no operation reached the server within {timeout:.0f} s of starting the load"

    def pause(self) -> None:
        for proc in self._procs:
            procs.pause(proc)

    def resume(self) -> None:
        for proc in self._procs:
            procs.resume(proc)

    def cpu_seconds(self) -> float:
        """CPU time of the load generator processes so far (their threads included)."""
        return sum(procs.process_cpu_seconds(p.pid) or 0.0 for p in self._procs)

    def problem(self) -> str | None:
        """Why this load stopped early (a generator exited), with its last output line."""
        for proc, out in zip(self._procs, self._outputs, strict=True):
            if proc.poll() is not None:
                out.seek(0)
                lines = [line.strip() for line in out.read().decode(errors="replace")
                         .replace("\r", "\n").splitlines() if line.strip()]  # fmt: skip
                last = lines[-1][:200] if lines else "no output"
                return f"{self.aim.binary.name} exited with code {proc.returncode}: {last}"
        return None

    def close(self) -> None:
        """Kill the generators (paused or not) and drop their files."""
        for proc in self._procs:
            procs.kill(proc)
        for out in self._outputs:
            out.close()
        self._tmp.cleanup()
