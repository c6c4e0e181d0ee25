"""The allowed range of every number a settings file, workload file or option gives.

Those files and options may come from a pull request's checkout (docs/ci.md). A number
without an upper bound hung a run or switched a gate off: ``duration = inf`` started a
server and then crashed, ``repetitions = 1e20`` grew memory without end, ``[verdict]
throughput_pct = inf`` let every change pass, ``data_size`` made populate build a value of
any size. Each bound is far above what a real run asks for and keeps time and memory
finite; a value outside it (inf and nan too) is one line naming the range, before any
server starts. The settings (core/settings.py), the options (core/options.py) and the
workload models (workloads/model.py) all read their ranges from here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import WrapValidator


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def shown(value: Any) -> str:
    """A refused value as an error line quotes it: repr, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass(frozen=True)
class Bound:
    """``low <= value <= high`` (``low < value`` when ``above``), and finite."""

    low: float
    high: float
    above: bool = False

    def holds(self, value: float) -> bool:
        if not math.isfinite(value) or value > self.high:
            return False
        return value > self.low if self.above else value >= self.low

    def text(self) -> str:
        """How the range reads in an error: "0 < value <= 3600"."""
        return f"{_number(self.low)} {'<' if self.above else '<='} value <= {_number(self.high)}"

    def refusal(self, value: Any, kind: type = float) -> str:
        """One line for a value outside the range (or no number at all)."""
        number = "a whole number" if kind is int else "a number"
        return f"{shown(value)}: give {number} with {self.text()}"

    def of(self, kind: type) -> Any:
        """``kind`` (int or float) held to this range, as a pydantic field type."""

        def validate(value: Any, handler: Callable[[Any], Any]) -> Any:
            try:
                checked = handler(value)
            except ValueError:  # pydantic's own: not a number, not finite, too large
                raise ValueError(self.refusal(value, kind)) from None
            if not self.holds(checked):
                raise ValueError(self.refusal(value, kind))
            return checked

        return Annotated[kind, WrapValidator(validate)]


PERCENT = Bound(0, 100, above=True)  # a share or a threshold: past 100% it switches off
PERCENT_OR_OFF = Bound(0, 100)  # 0 turns the check off

# --- [run] settings and the options that override them --------------------------------
# One trial's measured window: an hour is far beyond a trial's use (10 s, 3 s in ci) and
# still ends.
DURATION_S = Bound(0, 3600, above=True)
# Unrecorded load before each trial: ten minutes warms any cache or allocator.
WARMUP_S = Bound(0, 600)
# The plan lists every trial before the first one runs (bench/plan.py): 10,000 per version
# and point keeps that list small.
REPETITIONS = Bound(1, 10_000)
# Requests per instruction trial: under callgrind a server runs some thousands a second,
# so 10 million (50 times the default) is most of an hour per trial.
INSTRUCTION_REQUESTS = Bound(2000, 10_000_000)
# How long a server may take to answer after it is started: a cold container, or a
# server loading its data, is up within minutes.
SERVER_START_S = Bound(0, 600, above=True)
# Seconds a server has the load in a paired-in-time window (docs/methodology.md: A/A runs).
WINDOW_S = Bound(0.05, 10)
# --rtt: a round trip the delay proxy adds (bench/delay_proxy.py), in microseconds: from a
# rack's 20 us to a second (a satellite link's 600 ms fits; more is no what-if a run needs).
RTT_US = Bound(20, 1_000_000)
# Seed offsets a run draws lie below 2^31 (bench/seeds.py); a chosen one fits there too.
SEED_OFFSET = Bound(0, 2**31)
# Cycles one cache miss or mispredicted branch costs (core/cycles.py): a miss to memory
# is some hundreds; 100,000 is beyond any and keeps a cycle count finite.
CYCLE_WEIGHT = Bound(0, 100_000)

# --- workloads -----------------------------------------------------------------------
# Populate, a per-key setup step and the rehash that settles them each take one request
# per key: 100 million keys are minutes of setup and, at the default 1000 bytes, about
# 100 GB of server memory.
KEYS = Bound(1, 100_000_000)
# One value's bytes. Redis refuses strings over 512 MB (proto-max-bulk-len), but regtrack
# builds the payload in its own memory (populate, setup's __data__, the built-in driver)
# and every request in flight carries one: 64 MiB is beyond any queue's payload and keeps
# a populate batch within a few of them.
DATA_SIZE = Bound(1, 64 * 1024 * 1024)
# Connections of one load generator process (per thread under memtier): Redis accepts
# 10,000 clients by default (maxclients); beyond that it refuses them.
CLIENTS = Bound(1, 10_000)
# Load generator threads: more than any host has CPUs for.
THREADS = Bound(1, 1024)
# Every connection of a workload at once (clients x threads, summed over its processes):
# Redis's maxclients again, and the built-in driver runs a thread per connection.
CONNECTIONS = 10_000
# Requests in flight per connection: past a few hundred a deeper pipeline no longer
# changes what the server does per command, and memtier and redis-benchmark buffer them.
PIPELINE = Bound(1, 10_000)
# Depths in one workload: each is a point, measured ``repetitions`` times per version.
PIPELINE_DEPTHS = 100
# Bytes a workload's requests and replies may hold at once (connections x deepest
# pipeline x data_size): what the load generators buffer and the server's client
# buffers hold. 16 GiB is more than a benchmark host gives either.
IN_FLIGHT_BYTES = 16 * 1024**3
# Times in a row a mix sends one command: the built-in driver lists each command that
# many times per rotation.
RATIO = Bound(1, 10_000)

# --- options without a setting ----------------------------------------------------------
EVERY = Bound(1, 1_000_000)  # every Nth commit of a range: beyond any repository's history
MAX_COMMITS = Bound(2, 100_000)  # commits measured from a range: each one is a build
SHARDS = Bound(1, 1000)  # hosts sharing one plan: beyond any CI engine's parallel jobs
MAX_REPETITIONS = Bound(2, 1000)  # sequential repetitions: each is a block of trials
