"""--rtt: every server behind a network round trip, as a delay proxy in front of it.

The engine's ``delay`` subcommand (engine/src/delay.rs) listens on 127.0.0.1, forwards to
the server and holds every chunk it reads for half the round trip before passing it on,
each way, order kept (toxiproxy's latency toxic). It needs no privileges and works alike
for a native server and a container's published port: this VM's kernel has no netem, and
a userspace delay measured sound (docs/latency.md). It runs pinned to the client CPUs,
one per server visit; the load generators are aimed at it (trial.Context.aim), the
server's own evidence (INFO, its CPU) still comes from the server.

The proxy says, per trial, how late it forwarded and its own CPU: a trial where it did
not hold the delay is invalid (``delay not held``), as a client-bound trial is.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import subprocess
from collections.abc import Iterator
from typing import IO

import pydantic

from regtrack.bench.runtimes.base import RunningServer
from regtrack.bench.runtimes.native import taskset_path
from regtrack.core import child_env, limits
from regtrack.core.cpus import format_cpu_list
from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.core.records import InvalidReason, TrialRecord

RTT_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(us|µs|ms|s)\s*$")
_UNIT_US = {"us": 1, "µs": 1, "ms": 1000, "s": 1_000_000}
START_TIMEOUT_S = 10.0


def parse_rtt(text: str) -> int:
    """ "0.5ms", "28ms", "200us", "1s" -> microseconds; anything else is one clear line."""
    found = RTT_RE.match(text or "")
    bound = limits.RTT_US
    us = round(float(found.group(1)) * _UNIT_US[found.group(2)]) if found else 0
    if not found or not bound.low <= us <= bound.high:
        raise BadInput(
            f"--rtt {text!r}: give a round trip with its unit, like 0.5ms, 28ms or 200us "
            f"({bound.low:.0f}us to {bound.high / 1e6:.0f}s)"
        )
    return us


def shown(rtt_us: int) -> str:
    """A round trip as people write it: 500us, 0.5ms -> "0.5ms", 28000 -> "28ms"."""
    return f"{rtt_us / 1000:g}ms" if rtt_us >= 100 else f"{rtt_us}us"


class _Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(frozen=True, extra="ignore")


class Listening(_Strict):
    """The proxy's first line: where it listens."""

    listen: str


class Late(_Strict):
    """How late chunks went out after their due time (read + one-way delay), in us."""

    p50: float
    p99: float
    max: float


class ProxyCpu(_Strict):
    user_s: float
    sys_s: float
    busy_fraction: float


class DelayWindow(_Strict):
    """What the proxy forwarded since its last report (engine/src/delay.rs ``Report``)."""

    one_way_us: float
    window_s: float
    connections: int
    refused: int
    chunks: int
    bytes: int
    late_us: Late
    cpu: ProxyCpu
    behind: bool
    behind_reasons: list[str] = []

    def detail(self) -> str:
        """The invalid line's figures."""
        reasons = "; ".join(self.behind_reasons)
        return f"{reasons}; the proxy's CPU {self.cpu.busy_fraction:.0%} of one"


@dataclasses.dataclass
class DelayProxy:
    """A running proxy: where to aim, and its report channel."""

    host: str
    port: int
    rtt_us: int
    process: subprocess.Popen[str]

    def window(self) -> DelayWindow:
        """What it forwarded since the last call (and start a new window)."""
        stdin, stdout = self._pipes()
        try:
            stdin.write("report\n")
            stdin.flush()
            line = stdout.readline()
            return DelayWindow.model_validate_json(line)
        except (OSError, pydantic.ValidationError) as exc:
            raise CannotMeasure(f"the --rtt delay proxy stopped answering: {exc}") from None

    def judge(self, record: TrialRecord) -> None:
        """Mark ``record`` invalid when the proxy did not hold the delay over its window."""
        seen = self.window()
        if seen.behind:
            record.mark_invalid(InvalidReason.DELAY_BEHIND, seen.detail())

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        assert self.process.stdin is not None and self.process.stdout is not None
        return self.process.stdin, self.process.stdout


@contextlib.contextmanager
def delayed(
    server: RunningServer, engine: str, rtt_us: int, cpus: tuple[int, ...]
) -> Iterator[RunningServer]:
    """``server`` with a delay proxy of ``rtt_us`` in front of it, pinned to ``cpus``: the
    same server, its ``delay`` set (Context.aim aims load generators at the proxy)."""
    one_way = max(1, rtt_us // 2)
    argv = [
        taskset_path(), "-c", format_cpu_list(cpus), engine, "delay",
        "--upstream", f"{server.host}:{server.port}", "--one-way-us", str(one_way),
    ]  # fmt: skip
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env.load_generator(),
        )
    except OSError as exc:
        raise CannotMeasure(f"the --rtt delay proxy cannot start: {exc.strerror}") from None
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        try:
            listen = Listening.model_validate_json(first).listen
        except pydantic.ValidationError:
            why = (process.stderr.read() if process.stderr else "").strip()[:200]
            raise CannotMeasure(f"the --rtt delay proxy did not start: {why or first!r}") from None
        host, _, port = listen.rpartition(":")
        proxy = DelayProxy(host, int(port), rtt_us, process)
        yield dataclasses.replace(server, delay=proxy)
    finally:
        with contextlib.suppress(OSError):
            if process.stdin:
                process.stdin.close()  # end of stdin ends the proxy
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
