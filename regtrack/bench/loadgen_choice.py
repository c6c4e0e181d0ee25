"""Which load generator drives a GET sweep: memtier_benchmark when it saturates the server
here, else redis-benchmark.

memtier is the mission's load generator, but it spends more CPU per request than
redis-benchmark: on a 2-vCPU VM its one thread is client-bound at every pipeline depth
while redis-benchmark saturates the server from pipeline 10 on (docs/workloads.md). So
when the user names no tool, memtier (one thread per client CPU) is tried once: a short
trial at the sweep's deepest pipeline against the first version's server. It drives the
sweep if the server was busy (server_bound_cpu_pct) and memtier was not client-bound
(client_bound_cpu_pct); otherwise redis-benchmark does. Either way the run says which and
why, and stores the probe's figures.

The answer is kept per machine and setup (CPU model and plan, kernel, memtier binary,
clients, pipeline, value size, threads, runtime), so every later run there uses the same
tool: a stored baseline and its candidates stay comparable. Delete the file named in the
run's note, or pass --loadgen, to decide again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis

from regtrack.bench import loadgen, servers, setup, trial
from regtrack.bench.loadgen import memtier, redis_benchmark
from regtrack.bench.plan import PlannedTrial
from regtrack.core import cycles, environment
from regtrack.core.errors import CannotMeasure
from regtrack.core.records import InvalidReason
from regtrack.core.settings import RunSettings
from regtrack.plan.records import LoadgenChoice, LoadgenProbe
from regtrack.workloads import points
from regtrack.workloads.driver import DriverWorkload
from regtrack.workloads.lifecycle import LifecycleWorkload
from regtrack.workloads.model import GetPipelineWorkload

if TYPE_CHECKING:
    from regtrack.bench.job import Job
    from regtrack.bench.measuring import Measuring

__all__ = ["LoadgenChoice", "decide", "pending", "probe", "settle", "unprobed"]

PROBE_SECONDS = 1.0  # memtier measures whole seconds
PROBE_WARMUP_S = 0.0  # a second of memtier is enough to see which side runs out of CPU
# The reasons a valid-looking probe answers "no": the tool, not the server, ran out of CPU.
SATURATION_REASONS = frozenset({InvalidReason.CLIENT_BOUND, InvalidReason.NOT_SERVER_BOUND})


def pending(requested: str | None, binary: str | None, workload: Any, metric: str) -> bool:
    """Whether a probe decides the tool: a GET sweep measured for throughput, neither
    --loadgen nor --loadgen-bin, memtier installed. (Instruction counts do not depend on
    the load generator's speed.)"""
    return (
        requested is None
        and binary is None
        and isinstance(workload, GetPipelineWorkload)
        and metric not in cycles.COUNTING_ONLY
        and memtier.installed() is not None
    )


def unprobed(requested: str | None, binary: str | None, workload: Any, tool: str) -> LoadgenChoice:
    """The choice without a probe: asked for, a mix, or memtier absent."""
    if isinstance(workload, DriverWorkload):
        return LoadgenChoice(tool, "--driver: the user's own program")
    if requested or binary:
        return LoadgenChoice(tool, "--loadgen" if requested else "--loadgen-bin")
    if isinstance(workload, LifecycleWorkload):
        return LoadgenChoice(tool, "a task lifecycle")
    if not isinstance(workload, GetPipelineWorkload):
        return LoadgenChoice(tool, "a command mix" if tool == "memtier" else "a command mix, "
                      "and memtier_benchmark is not installed")  # fmt: skip
    if memtier.installed() is None:
        return LoadgenChoice(tool, "memtier_benchmark is not installed")
    return LoadgenChoice(tool, "instruction counts do not depend on the load generator's speed")


def settle(job: Job, measuring: Measuring) -> Job:
    """``job`` with a GET sweep's load generator decided (a probe, or the answer kept for
    this machine and setup), on memtier when it saturates; a job is not changed once
    built, so a decision is a new job."""
    if job.loadgen_choice is not None:
        return job
    choice = decide(job, measuring)
    if choice.tool != "memtier":
        return dataclasses.replace(job, loadgen_choice=choice)
    return dataclasses.replace(
        job,
        loadgen_choice=choice,
        loadgen=loadgen.locate("memtier"),
        workload=points.with_loadgen_threads(job.workload, "memtier", job.load_cpus),
    )


def decide(job: Job, measuring: Measuring) -> LoadgenChoice:
    """memtier or redis-benchmark for this GET sweep, from the kept answer or a probe
    (``measuring``: how the probe is measured and where answers are kept)."""
    if job.shard is not None:
        # Each host would probe on its own and might choose differently: one plan, one tool.
        return LoadgenChoice(
            redis_benchmark.NAME,
            "a shard of a plan that several hosts measure, where a probe per host could "
            "choose differently (pass --loadgen memtier to use it on every host)",
        )
    memtier_bin = loadgen.locate("memtier")
    answers = measuring.loadgen_answers
    key_file = _answer_file(job, memtier_bin.sha256, answers) if answers else None
    kept = _read(key_file) if key_file else None
    if kept is not None:
        return LoadgenChoice(
            kept["tool"], kept["why"], LoadgenProbe.from_json(kept.get("probe")), str(key_file)
        )
    try:
        record = measuring.probe_trial(job, memtier_bin)
    except (CannotMeasure, redis.RedisError, OSError) as exc:
        # Not kept: the run itself will say what is wrong with the server.
        reason = " ".join(str(exc).split())[:200]
        return LoadgenChoice(
            redis_benchmark.NAME, f"memtier_benchmark could not be probed: {reason}"
        )
    server = record.server_cpu_pct or 0.0
    client = record.client_cpu_pct or 0.0
    pipeline = record.params["pipeline"]
    threads = record.params["threads"]
    probed = LoadgenProbe(
        pipeline=pipeline,
        threads=threads,
        server_cpu_pct=round(server, 1),
        client_cpu_pct=round(client, 1),
        ops_per_sec=round(record.ops_per_sec or 0.0),
        invalid_reason=record.reason_text or None,
        at=datetime.now(UTC).isoformat(timespec="seconds"),
        version=job.targets[0].label,
    )
    figures = (
        f"memtier_benchmark with {threads} thread{'s' if threads > 1 else ''} on CPU "
        f"{job.side_cpus()[job.targets[0].label].client_list} at pipeline {pipeline}: "
        f"server {server:.0f}% busy, client {client:.0f}%"
    )
    # The probe is judged as a trial is (bench/trial.py), at the default limits
    # (probe_settings): client-bound at that share of its CPUs, not server-bound below it.
    reasons = record.reasons
    if record.valid:
        choice = LoadgenChoice("memtier", f"{figures}: it saturates the server", probed)
    elif reasons and all(r.code in SATURATION_REASONS for r in reasons):
        choice = LoadgenChoice(
            redis_benchmark.NAME, f"{figures}: it does not saturate the server", probed
        )
    else:  # not kept: a contended or failed probe says nothing of this machine
        first = reasons[0].text if reasons else "no reason recorded"
        why = f"{figures}: the probe was not usable ({first})"
        return LoadgenChoice(redis_benchmark.NAME, why, probed)
    if key_file:
        _write(key_file, choice)
    return choice


def probe(job: Job, binary: Any) -> Any:
    """One short memtier trial at the deepest pipeline against the first version, on a
    real server (bench/real.py)."""
    target = job.targets[0]
    cpus = job.side_cpus()[target.label]  # a duet's side: its own server and client CPUs
    workload = points.with_loadgen_threads(job.workload, "memtier", len(cpus.client))
    point = max(points.points(workload), key=lambda p: p.params["pipeline"])
    settings = probe_settings(job.settings)
    ctx = trial.Context(settings=settings, cpus=cpus, loadgen=binary, workload=workload)
    planned = PlannedTrial(seq=0, repetition=0, target=target.label, point=point)
    with servers.plain_server(job, target, run_id=0, cpus=cpus.server) as server:
        client = server.client(timeout=600)
        try:
            saved = setup.prepare_server(client, workload, memtier.NAME)
        finally:
            client.close()
        specs = points.load_specs(workload, point, memtier.NAME, saved)
        return trial.throughput_trial(ctx, server, planned, specs)


def probe_settings(settings: RunSettings) -> RunSettings:
    """The probe's trial: one short second, judged by the default limits whatever the run
    relaxes (whether memtier saturates the server is a fact of the machine, not of how
    strictly a run flags its own trials)."""
    defaults = RunSettings.model_fields
    return settings.model_copy(
        update={
            "duration": PROBE_SECONDS,
            "warmup": PROBE_WARMUP_S,
            "client_bound_cpu_pct": defaults["client_bound_cpu_pct"].default,
            "server_bound_cpu_pct": defaults["server_bound_cpu_pct"].default,
        }
    )


def _answer_file(job: Job, memtier_sha: str, answers: Path) -> Path:
    machine = environment.fingerprint(environment.capture(job.cpus))
    workload = job.workload
    key = {
        "machine": machine,
        "cpus": job.side_cpus()[job.targets[0].label].as_dict(),
        "memtier": memtier_sha,
        "clients": workload.clients,
        "pipeline": max(p.params["pipeline"] for p in job.points),
        "data_size": workload.data_size,
        "threads": workload.threads if "threads" in workload.model_fields_set else None,
        "runtime": job.runtime,
        "server": workload.server,  # io-threads and the like change who saturates
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return answers / f"{digest}.json"


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text()) if not path.is_symlink() else None
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("tool") not in ("memtier", redis_benchmark.NAME):
        return None
    return data if isinstance(data.get("why"), str) else None


def _write(path: Path, choice: LoadgenChoice) -> None:
    """Keep the answer; where the cache cannot be written, the next run probes again.

    Written to a fresh file of its own and renamed over the answer: a link planted in a
    shared cache is replaced, never followed."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".answer-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({k: v for k, v in choice.to_json().items() if k != "cached"}, f)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        return
