"""`regtrack run --resume RUN_ID`: the same plan, the same binaries, only what is missing.

A resumed run must measure what the first attempt would have measured, or its trials are
not comparable with the ones already stored. So the job is rebuilt from the run's stored
configuration (never from today's defaults), and resuming is refused when any binary, image
or the load generator changed (sha256 / image id), or the machine's fingerprint did.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from regtrack.bench import seeds
from regtrack.bench.callgrind import control
from regtrack.bench.job import Job
from regtrack.bench.loadgen import openloop
from regtrack.bench.loadgen.base import LoadgenBinary
from regtrack.core import docker_engine, environment
from regtrack.core.digests import sha256_of
from regtrack.core.errors import BadInput
from regtrack.results.store import Store
from regtrack.targets import engine_images
from regtrack.targets.versions import Target
from regtrack.workloads.driver import DriverWorkload
from regtrack.workloads.lifecycle import LifecycleWorkload

RESUMABLE = ("interrupted", "failed", "incomplete", "running")


def _refuse(run_id: int, why: str) -> BadInput:
    return BadInput(f"cannot resume run {run_id}: {why}; start a new run instead")


def _check_file(run_id: int, what: str, path: str | None, sha256: str | None) -> None:
    if not path or not sha256:
        return
    if not Path(path).is_file():
        raise _refuse(run_id, f"{what} {path} no longer exists")
    if sha256_of(path) != sha256:
        raise _refuse(run_id, f"{what} {path} changed since the run started (sha256 differs)")


def _check_status(run_id: int, status: str, extending: bool = False) -> None:
    if extending and status not in ("complete", *RESUMABLE):
        raise _refuse(run_id, f"it is {status}")
    if not extending and status not in RESUMABLE:
        raise _refuse(run_id, f"it is {status}, nothing is missing")


def check_resumable(store: Store, run_id: int) -> None:
    """Refused unless the run has something missing. Checked again once its CPUs are held:
    the regtrack that left it 'running' may have been alive and finished meanwhile."""
    _check_status(run_id, store.run(run_id).status)


def _check_target(run_id: int, target: Target, client: Any) -> None:
    """The version's server is still what the run measured: the same image (``client``:
    the Docker runtime's engine) or the same binary."""
    if client is None:
        _check_file(run_id, f"{target.label}'s server", target.binary, target.binary_sha256)
        return
    wanted = target.docker.image_id if target.docker else None
    have = (
        engine_images.image_digest(client, target.image).image_id
        if (target.image and engine_images.has_image(client, target.image))
        else None
    )
    if wanted and have != wanted:
        raise _refuse(run_id, f"image {target.image} of {target.label} changed or is gone")


def load_job(store: Store, run_id: int, extending: bool = False) -> Job:
    """The run's own job, checked against what is on this machine now. ``extending``: a
    run that is to measure more repetitions (flows/orchestrate.extend), complete or not
    (an extension that was interrupted goes on from its stored trials)."""
    run = store.run(run_id)
    _check_status(run_id, run.status, extending)
    plan = run.plan
    client = docker_engine.engine() if plan.runtime == "docker" else None
    if isinstance(plan.workload, DriverWorkload):
        raise _refuse(
            run_id, "it ran a --driver program, and resuming would run a command read from the "
            "database; run it again with --driver",
        )  # fmt: skip
    lifecycle = isinstance(plan.workload, LifecycleWorkload)  # its loadgen is the engine
    # the delay proxy of --rtt is the engine's too
    engine = openloop.locate() if plan.latency or lifecycle or plan.settings.rtt_us else None
    job = Job.from_config(plan, LoadgenBinary(**run.loadgen.shown()), client, engine)
    if job.metric != "throughput" and job.runtime == "native":
        control.require()
    job = dataclasses.replace(job, seed_problem=seeds.problem(job.settings.seeds, job.runtime))
    _check_file(run_id, "the load generator", job.loadgen.path, job.loadgen.sha256)
    if engine and plan.latency and engine.sha256 != plan.latency.engine_sha256:
        raise _refuse(run_id, f"the open-loop engine {engine.path} is not the one it used")
    for target in job.targets:
        _check_target(run_id, target, client)
    if job.data_dir and not Path(job.data_dir).is_dir():
        raise _refuse(run_id, f"its servers' data directory {job.data_dir} no longer exists")
    here = environment.capture(job.cpus, job.loadgen.as_dict())
    changed = environment.differences(run.environment.shown(), here)
    if changed:
        raise _refuse(run_id, f"this machine differs from the one that started it ({changed})")
    return job
