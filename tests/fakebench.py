"""The measuring edge stood in for, so that the flows above it (bisect's search, ci's
sequential blocks, stored baselines, shards and merge, resume) are tested in milliseconds
to seconds, in process, without starting a single server.

``Model`` implements the measuring seam (regtrack/bench/measuring.py) that the command line
hands to the flows; a test gives it to ``main(argv, measuring=model)`` (conftest's
``cli_in_process(..., measuring=model)``), patching nothing. It models a version's visit
(a server process and its trials), a paired-in-time visit (every version's server at
once), the load generator probe's one trial (memtier is client-bound here, as on this VM,
so GET sweeps stay with redis-benchmark, unless ``probe_cpu`` says otherwise) and the
plain servers preflight starts for each version: a modelled server reports what a real
one of the model's Redis version would (INFO server, as redis-py parses it, and the ACL
level that version gets), so stored targets look like real ones. Every server start of a
run goes through the seam, so the model has no path to a real runtime; the one start it
does not model (the server settings check of a run with --server-config) raises
``NotModelled``. Its load generator answers are kept only where ``loadgen_answers``
says (None: neither read nor kept), never in the cache real runs read. Resolving and
building versions (fake repositories whose make is instant, tests/fakerepo.py), CPU plans
and locks, seeds, the machine's environment (valgrind's part asked once a process), the
SQLite store, every analysis and every output stay real.

A ``Model`` says what a trial measures: instructions per op and throughput per version
(looked up by commit, then label, then "*"; under --metric cycles also last-level misses
per op, all getGenericCommand's, that the simulated cycles weigh), times an effect of the
server's seed (the repetition's, in its run's seed offset) that every version shares (as
fixed seeds give), with a little noise of the trial's own; all of it reproducible. Its
``faults`` end one visit after its first trial (a server that died: ``ServerDied``;
Ctrl-C: ``Interrupted``).

The real-run tests (test_bisect, test_ci, test_faults, test_instructions_real, ...) prove
what this leaves out: that servers, load generators and callgrind measure what the model
assumes, and that a real death or signal ends a visit as the model's faults do.
"""

from __future__ import annotations

import contextlib
import hashlib
import platform
import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from hdrh.histogram import HdrHistogram
from redis._parsers.helpers import parse_info

from regtrack.bench import loadgen_choice
from regtrack.bench.job import Job
from regtrack.bench.loadgen.base import LoadgenBinary
from regtrack.bench.plan import Visit
from regtrack.bench.runtimes import access
from regtrack.bench.runtimes.base import RunningServer
from regtrack.bench.trial import judge_load, new_record
from regtrack.core import cycles, interrupts
from regtrack.core.records import (
    CacheSimFacts,
    FunctionCost,
    InvalidReason,
    OpenLoopFacts,
    Progress,
    TrialRecord,
)
from regtrack.results.store import Store
from regtrack.targets.versions import Target

OPS = 20_000  # operations of a trial (either mode)
# An instruction trial's profile: a fixed cost in processCommand, the rest of the count in
# getGenericCommand (so a version's extra instructions are attributed to it by explain).
FIXED_IR_PER_OP = 3000
T = TypeVar("T")


class NotModelled(BaseException):
    """A modelled test reached a server start the model does not stand in for. Not an
    Exception, so that no handler on the way (``main``'s "internal error", exit 4) turns
    it into an exit code a test expects."""


@dataclass
class Model:
    """What each trial measures, by version: commit, else label, else "*"; a Measuring
    (regtrack/bench/measuring.py) whose visits, probe and servers are modelled."""

    instructions: dict[str, float] = field(default_factory=lambda: {"*": 3500.0})
    ll_misses: dict[str, float] = field(default_factory=lambda: {"*": 2.0})  # per op (cycles)
    throughput: dict[str, float] = field(default_factory=lambda: {"*": 400_000.0})
    # p99 (ms) of an open-loop trial at a low rate (p50 0.4 of it, p99.9 twice); at a share
    # rho of the version's throughput it grows as a queue's, 1 / (1 - rho) (rho at most 0.95)
    latency_p99: dict[str, float] = field(default_factory=lambda: {"*": 0.2})
    latency_noise_pct: float = 5.0  # sd of a trial's own (open-loop p99)
    redis_version: dict[str, str] = field(default_factory=lambda: {"*": "7.2.4"})
    seed_effect_pct: float = 1.0  # sd of the shared effect of a seed
    instructions_noise_pct: float = 0.02  # sd of a trial's own (instructions)
    throughput_noise_pct: float = 3.0  # sd of a trial's own (throughput)
    # (label, repetition) -> raised once, after that visit's first trial is stored
    faults: dict[tuple[str, int], BaseException] = field(default_factory=dict)
    visits: list[tuple[str, int, str]] = field(default_factory=list)  # (label, rep, mode)
    started: list[str] = field(default_factory=list)  # labels of servers outside visits
    # The probe's trial: server, client and contended CPU %, or the error it raises.
    probe_cpu: tuple[float, float, float] = (83.0, 99.0, 0.0)
    probe_error: BaseException | None = None
    probes: int = 0  # probes measured
    # label -> what its load generator says as it fails every trial (the trial invalid)
    loadgen_failure: dict[str, str] = field(default_factory=dict)
    capacity_contended: int = 0  # capacity trials, from the first, that other work spoils
    capacity_trials: int = 0  # capacity trials measured
    loadgen_answers: Path | None = None  # where load generator answers are kept (None: not)

    def visit(
        self,
        job: Job,
        store: Store,
        run_id: int,
        visit: Visit,
        target: Target,
        target_ids: dict[str, int],
        progress: Progress,
    ) -> None:
        self.paired_visit(job, store, run_id, visit, {target.label: target}, target_ids, progress)

    def paired_visit(
        self,
        job: Job,
        store: Store,
        run_id: int,
        visit: Visit,
        targets: dict[str, Target],
        target_ids: dict[str, int],
        progress: Progress,
    ) -> None:
        """The visit's trials, modelled and stored in plan order; a planned fault after
        the first."""
        labels = visit.together or (visit.target,)
        for label in labels:
            self.visits.append((label, visit.repetition, visit.mode))
        seed = job.seed(visit.repetition)
        for n, planned in enumerate(visit.trials):
            target = targets[planned.target]
            record = new_record(planned, visit.mode)
            record.seed = seed
            self.fill(record, target, visit.repetition)
            if job.cycle_weights is not None and record.mode == "instructions":
                self.simulate(record, target, job.cycle_weights)
            store.add_trial(run_id, target_ids[target.label], record, self.functions(record))
            progress.trial_done(record)
            if n == 0 and (fault := self.fault(labels, visit.repetition)) is not None:
                raise fault
            interrupts.check()

    def probe_trial(self, job: Job, binary: LoadgenBinary) -> TrialRecord:
        self.probes += 1
        if self.probe_error is not None:
            raise self.probe_error
        return probed_record(job, *self.probe_cpu)

    def capacity_trial(self, job: Job) -> TrialRecord:
        """The baseline's closed-loop trial at pipeline 1: its modelled throughput,
        client-bound (as on this VM)."""
        target = job.targets[0]
        record = TrialRecord(0, 0, target.label, job.workload.name, "pipeline=1",
                             {"pipeline": 1}, "modelled")  # fmt: skip
        self.fill(record, target, 0)
        self.capacity_trials += 1
        if self.capacity_trials <= self.capacity_contended:
            record.contention_pct = 2 * job.settings.contention_limit_pct
        judge_load(job.settings, record, threads=1, client_cpus=1, saturates=True)
        return record

    @contextlib.contextmanager
    def plain_server(
        self,
        job: Job,
        target: Target,
        run_id: int | str,
        seed: str | None = None,
        cpus: tuple[int, ...] | None = None,
    ) -> Iterator[RunningServer]:
        if run_id == "settings":
            raise NotModelled(
                f"the server settings check of {target.label} (--server-config) is not "
                "modelled (tests/fakebench.py): test it on real servers"
            )
        self.started.append(target.label)
        yield self.server(target)

    def _of(self, table: dict[str, T], target: Target) -> T:
        for key in (target.commit, target.label, "*"):
            if key in table:
                return table[key]
        raise KeyError(f"the model has no value for {target.label} ({target.commit})")

    def server(self, target: Target) -> RunningServer:
        """What a real server of the target's modelled version reports at start: INFO
        server parsed as redis-py parses it, and the ACL level that version is given
        (bench/runtimes/access.py: none before 6.0, no channel rules in 6.0)."""
        version = self._of(self.redis_version, target)
        major, minor = (int(part) for part in version.split(".")[:2])
        level = "open" if major < 6 else "acl-no-channels" if (major, minor) == (6, 0) else "acl"
        build = hashlib.sha1(f"{version} {target.commit or target.binary}".encode()).hexdigest()
        info = parse_info(
            "\r\n".join([
                "# Server",
                f"redis_version:{version}",
                f"redis_git_sha1:{(target.commit or '0' * 8)[:8]}",
                "redis_git_dirty:0",
                f"redis_build_id:{build[:16]}",
                "redis_mode:standalone",
                f"os:Linux {platform.release()} {platform.machine()}",
                "arch_bits:64",
                "multiplexing_api:epoll",
                "gcc_version:12.2.0",
                f"executable:{target.binary or '/usr/local/bin/redis-server'}",
            ])
        )  # fmt: skip
        return RunningServer("127.0.0.1", 0, None, info, access=access.new(level))

    def fault(self, labels: tuple[str, ...], repetition: int) -> BaseException | None:
        """The fault planned for one of these versions' visit in this repetition (once)."""
        for label in labels:
            if (label, repetition) in self.faults:
                return self.faults.pop((label, repetition))
        return None

    def value(self, target: Target, repetition: int, mode: str, seed: str | None = None) -> float:
        shared = random.Random(zlib.crc32(f"seed {seed or repetition} {mode}".encode()))
        own = random.Random(
            zlib.crc32(f"{target.commit or target.label} {repetition} {mode}".encode())
        )
        if mode == "instructions":
            base, noise = self._of(self.instructions, target), self.instructions_noise_pct
        elif mode == "latency":
            base, noise = self._of(self.latency_p99, target), self.latency_noise_pct
        else:
            base, noise = self._of(self.throughput, target), self.throughput_noise_pct
        return (
            base
            * (1 + shared.gauss(0, self.seed_effect_pct) / 100)
            * (1 + own.gauss(0, noise) / 100)
        )

    def fill(self, record: TrialRecord, target: Target, repetition: int) -> None:
        """A valid trial as the real ones store it (the fields the analysis reads)."""
        value = self.value(target, repetition, record.mode, record.seed)
        record.wall_s, record.requests, record.server_calls = 1.0, OPS, OPS
        record.server_cpu_pct, record.contention_pct, record.steal_pct = 99.0, 0.5, 0.0
        record.error_replies, record.keyspace_hits, record.keyspace_misses = 0, OPS, 0
        record.syscalls_read, record.syscalls_write = OPS // 10, OPS // 10
        if record.mode == "instructions":
            record.instructions_per_op = value
            record.instructions = int(value * OPS)
            record.instructions_repeat_pct = 0.01
            record.client_cpu_pct = 20.0
        elif record.mode == "latency":
            rate = float(record.params["rate"])
            value /= 1 - min(0.95, rate / self._of(self.throughput, target))
            record.ops_per_sec, record.client_cpu_pct = rate, 10.0
            record.latency_ms = {
                "p50": 0.4 * value,
                "p99": value,
                "p999": 2 * value,
                "max": 5 * value,
            }
            record.open_loop = OpenLoopFacts(
                rate, "poisson", 5.0, 20.0, 10.0, "ns", modelled_histogram(value)
            )
        else:
            record.ops_per_sec = value
            record.client_cpu_pct = 60.0
            record.latency_ms = {"avg": 1.0, "p50": 1.0, "p99": 2.0, "p999": 3.0}
        record.valid = True
        if (failure := self.loadgen_failure.get(target.label)) is not None:
            record.mark_invalid(InvalidReason.LOADGEN_FAILED, failure)

    def simulate(self, record: TrialRecord, target: Target, weights: cycles.Weights) -> None:
        """The cache simulation's events of an instruction trial: its last-level misses
        (data reads, each an L1 miss too), no other miss; cycles at ``weights``."""
        assert record.instructions is not None
        misses = round(self._of(self.ll_misses, target) * OPS)
        events = {e: 0 for e in cycles.EVENTS} | {"Ir": record.instructions}
        events |= {"D1mr": misses, "DLmr": misses}
        record.cache_sim = CacheSimFacts(
            **{e.lower(): n for e, n in events.items()},
            cycles=cycles.grouped(events).cycles(weights),
            geometry=cycles.geometry_text(),
        )

    def functions(self, record: TrialRecord) -> list[FunctionCost] | None:
        """The profile of an instruction trial, as callgrind's would be stored (with its
        simulated events and cycles, all the misses getGenericCommand's, where simulated)."""
        if record.mode != "instructions" or record.instructions is None:
            return None
        fixed = FIXED_IR_PER_OP * OPS
        rest = record.instructions - fixed
        costs = [
            FunctionCost("processCommand", "server.c", "redis-server", fixed, record.instructions),
            FunctionCost("getGenericCommand", "t_string.c", "redis-server", rest, rest),
        ]
        if (sim := record.cache_sim) is not None:
            misses = {"D1mr": sim.d1mr, "DLmr": sim.dlmr}
            for cost, own in zip(costs, ({}, misses), strict=True):
                cost.exclusive_events = {"Ir": cost.exclusive, **own}
                cost.inclusive_events = {"Ir": cost.inclusive, **misses}
                cost.cycles = cost.exclusive + (sim.cycles - sim.ir if own else 0)
        return costs


def modelled_histogram(p99_ms: float) -> str:
    """An HDR histogram (V2 deflate, base64, in ns) of 1,000 requests whose p50 is 0.4 of
    ``p99_ms`` and whose slowest 1% take 2x, as the engine stores one."""
    histogram = HdrHistogram(1, 3_600_000_000_000, 3)
    histogram.record_value(int(0.4e6 * p99_ms), 500)
    histogram.record_value(int(0.8e6 * p99_ms), 490)
    histogram.record_value(int(2e6 * p99_ms), 10)
    return histogram.encode().decode()


def probed_record(job: Job, server: float, client: float, contended: float = 0.0) -> TrialRecord:
    """The memtier probe's one trial with these figures, judged as a real one is (one
    thread on one client CPU at the sweep's deepest pipeline)."""
    pipeline = max(p.params["pipeline"] for p in job.points)
    record = TrialRecord(0, 0, job.targets[0].label, job.workload.name, f"pipeline={pipeline}",
                         {"pipeline": pipeline, "threads": 1}, "modelled")  # fmt: skip
    record.server_cpu_pct, record.client_cpu_pct, record.ops_per_sec = server, client, 4e5
    record.valid, record.contention_pct = True, contended
    judge_load(
        loadgen_choice.probe_settings(job.settings), record,
        threads=1, client_cpus=1, saturates=True,
    )  # fmt: skip
    return record
