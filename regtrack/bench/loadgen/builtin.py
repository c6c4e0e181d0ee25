"""The built-in replay driver: the same workload files where memtier is absent.

redis-py over raw connections, one thread per connection, each sending batches of
``pipeline`` commands in the workload's rotation (a command ``ratio`` times in a row, then
the next), with memtier's placeholders: ``__key__`` drawn by the command's key pattern,
``__data__`` the payload. Its throughput measures this Python client, not Redis, so
regtrack never uses it for throughput verdicts; it is valid for instructions per
operation, where only the server's work is counted.
"""

from __future__ import annotations

import hashlib
import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from regtrack import __version__
from regtrack.bench.loadgen.base import Aim, LoadgenBinary, LoadgenResult
from regtrack.core.records import LoadSpec, MixCommand
from regtrack.core.redis_options import QUIET_CONNECT

NAME = "builtin"
THROUGHPUT_DETAIL = (
    "its throughput measures the Python client, not Redis (use memtier for throughput, or "
    "--metric instructions, for which it is valid)"
)
THROUGHPUT_CAVEAT = f"built-in driver: {THROUGHPUT_DETAIL}"


def locate() -> LoadgenBinary:
    source = Path(__file__).read_bytes()
    return LoadgenBinary(
        name=NAME,
        path=str(Path(__file__)),
        version=f"regtrack {__version__} built-in driver, redis-py {redis.__version__}",
        sha256=hashlib.sha256(source).hexdigest(),
    )


@dataclass
class _Shared:
    """State the connection threads share: the stop signal and the counts."""

    deadline: float | None
    budget: int | None
    sent: int = 0
    done: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    per_command: dict[str, int] = field(default_factory=dict)
    problem: str | None = None
    cpu_s: float = 0.0  # CPU time of the connection threads (not of regtrack's others)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, n: int) -> int:
        """Claim up to n requests of the budget (all n when running for a time)."""
        with self.lock:
            if self.problem or (self.deadline and time.monotonic() >= self.deadline):
                return 0
            if self.budget is None:
                return n
            n = min(n, self.budget - self.sent)
            self.sent += max(n, 0)
            return max(n, 0)


class _Rotation:
    """One connection's command sequence and key draws, as memtier does them."""

    def __init__(self, spec: LoadSpec, index: int, count: int, rng: random.Random):
        self.cycle: list[MixCommand] = [c for c in spec.commands for _ in range(c.ratio)]
        if not self.cycle:  # a GET sweep
            self.cycle = [MixCommand(("GET", f"{spec.key_prefix}__key__"))]
        self.position = 0
        self.rounds = 0
        self.spec = spec
        self.rng = rng
        span = spec.key_max - spec.key_min + 1
        share = max(1, span // count)
        self.lockstep_first = spec.key_min + index * share
        self.lockstep_span = share
        self.sequential = spec.key_min
        self.payload = "x" * spec.data_size

    def _key(self, pattern: str) -> int:
        spec = self.spec
        if pattern == "P":  # lockstep: the same number for every command of one cycle
            return self.lockstep_first + self.rounds % self.lockstep_span
        if pattern == "S":
            self.sequential = spec.key_min + (self.sequential - spec.key_min + 1) % (
                spec.key_max - spec.key_min + 1
            )
            return self.sequential
        if pattern == "G":
            middle = (spec.key_min + spec.key_max) / 2
            sigma = (spec.key_max - spec.key_min) / 6 or 1
            return int(min(spec.key_max, max(spec.key_min, self.rng.gauss(middle, sigma))))
        return self.rng.randint(spec.key_min, spec.key_max)

    def next(self) -> tuple[str, list[str]]:
        """The next command of the rotation; the cycle advances after its keys are drawn,
        so every command of one cycle gets the lockstep (P) number of that cycle."""
        command = self.cycle[self.position]
        args = []
        for arg in command.args:
            if arg == "__data__":
                args.append(self.payload)
            elif "__key__" in arg:
                args.append(arg.replace("__key__", str(self._key(command.key_pattern))))
            else:
                args.append(arg)
        self.position += 1
        if self.position == len(self.cycle):
            self.position = 0
            self.rounds += 1
        return command.args[0].upper(), args


def _connection_loop(aim: Aim, spec: LoadSpec, index: int, count: int, shared: _Shared) -> None:
    os.sched_setaffinity(0, aim.cpus)  # this thread only: the load runs on the client CPUs
    cpu_start = time.thread_time()
    rotation = _Rotation(spec, index, count, random.Random(index))
    conn = redis.Connection(host=aim.host, port=aim.port, socket_timeout=60, **QUIET_CONNECT)
    try:
        conn.connect()
        while True:
            n = shared.take(spec.pipeline)
            if n <= 0:
                return
            batch = [rotation.next() for _ in range(n)]
            conn.send_packed_command(conn.pack_commands([args for _, args in batch]))
            errors: dict[str, int] = {}
            for name, _ in batch:
                try:
                    conn.read_response()
                except redis.ResponseError as exc:
                    kind = str(exc).split(" ", 1)[0] or "ERR"
                    errors[f"{name} {kind}"] = errors.get(f"{name} {kind}", 0) + 1
            with shared.lock:
                shared.done += n
                for name, _ in batch:
                    shared.per_command[name] = shared.per_command.get(name, 0) + 1
                for key, value in errors.items():
                    shared.errors[key] = shared.errors.get(key, 0) + value
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        with shared.lock:
            shared.problem = shared.problem or f"built-in driver lost the server: {exc}"
    finally:
        conn.disconnect()
        with shared.lock:
            shared.cpu_s += time.thread_time() - cpu_start


def run_once(
    aim: Aim,
    spec: LoadSpec,
    *,
    test_time: float | None = None,
    requests: int | None = None,
    timeout: float = 600.0,
) -> LoadgenResult:
    """Send the spec's load for ``test_time`` seconds, or ``requests`` requests in all."""
    count = spec.clients * spec.threads
    deadline = time.monotonic() + test_time if test_time else None
    shared = _Shared(deadline=deadline, budget=requests)
    start = time.monotonic()
    threads = [
        threading.Thread(target=_connection_loop, args=(aim, spec, i, count, shared), daemon=True)
        for i in range(count)
    ]
    for t in threads:
        t.start()
    hard_stop = start + timeout
    for t in threads:
        t.join(max(0.0, hard_stop - time.monotonic()))
    wall = time.monotonic() - start
    if any(t.is_alive() for t in threads):
        with shared.lock:
            shared.problem = (
                shared.problem or f"built-in driver did not finish within {timeout:.0f} s"
            )
            shared.deadline = time.monotonic()
    per_command = {
        name: {"count": float(n), "ops_per_sec": n / wall if wall else 0.0}
        for name, n in sorted(shared.per_command.items())
    }
    if shared.errors:
        per_command["__errors__"] = {"count": float(sum(shared.errors.values()))}
    return LoadgenResult(
        argv=["regtrack-builtin", f"clients={count}", f"pipeline={spec.pipeline}"],
        exit_code=0 if shared.problem is None else 1,
        wall_s=wall,
        client_cpu_s=shared.cpu_s,
        requests=shared.done,
        ops_per_sec=shared.done / wall if wall else None,
        latency_ms={},
        raw_output=f"errors: {shared.errors}" if shared.errors else "",
        problem=shared.problem,
        per_command=per_command,
    )
