"""`regtrack run --resume RUN_ID`: the same plan, the same binaries, only what is missing.

A resumed run must measure what the first attempt would have measured, or its trials are
not comparable with the ones already stored. So the job is rebuilt from the run's stored
configuration (never from today's defaults), and resuming is refused when any binary, image
or the load generator changed (sha256 / image id), or the machine's fingerprint did.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from regtrack.bench import seeds, shards
from regtrack.bench.job import Job
from regtrack.bench.loadgen import memtier
from regtrack.bench.loadgen.base import LoadgenBinary
from regtrack.bench.loadgen_choice import Choice
from regtrack.core import docker_engine, environment
from regtrack.core.cpus import CpuPlan, parse_cpu_list
from regtrack.core.digests import sha256_of
from regtrack.core.errors import BadInput
from regtrack.core.settings import RunSettings
from regtrack.results.store import Store
from regtrack.targets import engine_images
from regtrack.targets.versions import Target
from regtrack.workloads.model import GetPipelineWorkload, MixWorkload

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


def check_resumable(store: Store, run_id: int) -> dict[str, Any]:
    """The run, if it has something missing. Checked again once its CPUs are held: the
    regtrack that left it 'running' may have been alive and finished meanwhile."""
    run = store.run(run_id)
    if run["status"] not in RESUMABLE:
        raise _refuse(run_id, f"it is {run['status']}, nothing is missing")
    return run


def _check_target(run_id: int, target: Target, client: Any) -> None:
    """The version's server is still what the run measured: the same image (``client``:
    the Docker runtime's engine) or the same binary."""
    if client is None:
        _check_file(run_id, f"{target.label}'s server", target.binary, target.binary_sha256)
        return
    wanted = target.details.get("docker", {}).get("image_id")
    have = (
        engine_images.image_digest(client, target.image)["image_id"]
        if (target.image and engine_images.has_image(client, target.image))
        else None
    )
    if wanted and have != wanted:
        raise _refuse(run_id, f"image {target.image} of {target.label} changed or is gone")


def load_job(store: Store, run_id: int, extending: bool = False) -> Job:
    """The run's own job, checked against what is on this machine now. ``extending``: a
    run that is to measure more repetitions (flows/orchestrate.extend), complete or not
    (an extension that was interrupted goes on from its stored trials)."""
    if extending:
        run = store.run(run_id)
        if run["status"] not in ("complete", *RESUMABLE):
            raise _refuse(run_id, f"it is {run['status']}")
    else:
        run = check_resumable(store, run_id)
    config: dict[str, Any] = run["config"]
    kinds = {"get-pipeline": GetPipelineWorkload, "mix": MixWorkload}
    workload = kinds[config["workload"]["kind"]](**config["workload"])
    # A run stored before throughput could be paired in time measured separate trials,
    # and one stored before seed offsets read the seeds of offset 0.
    settings = RunSettings(
        **{"pairing": "separate", **config["settings"], "seed_offset": seeds.offset_of(config)}
    )
    cpus = CpuPlan(
        parse_cpu_list(config["cpus"]["server_cpus"]),
        parse_cpu_list(config["cpus"]["client_cpus"]),
    )
    loadgen = LoadgenBinary(**run["loadgen"])
    _check_file(run_id, "the load generator", loadgen.path, loadgen.sha256)
    targets = [Target(**t) for t in config["targets"]]
    runtime = config.get("runtime", "native")
    client = docker_engine.engine() if runtime == "docker" else None
    for target in targets:
        _check_target(run_id, target, client)
    data = config.get("server_data") or {}
    data_dir = data.get("dir") if runtime == "native" or data.get("persistent") else None
    if data_dir and not Path(data_dir).is_dir():
        raise _refuse(run_id, f"its servers' data directory {data_dir} no longer exists")
    here = environment.capture(cpus, loadgen.as_dict())
    changed = environment.differences(run["environment"], here)
    if changed:
        raise _refuse(run_id, f"this machine differs from the one that started it ({changed})")
    return Job(
        targets=targets,
        workload=workload,
        settings=settings,
        cpus=cpus,
        loadgen=loadgen,
        metric=config.get("metric", "throughput"),
        runtime=runtime,
        memory=config.get("memory"),
        docker=client,
        docker_images=config.get("docker_images"),
        narrowed={int(r): tuple(m) for r, m in config.get("narrowed", {}).items()},
        shard=shards.stored(config.get("shard")),
        data_dir=data_dir,
        loadgen_choice=_choice(config.get("loadgen_choice"), loadgen.name),
    )


def _choice(stored: Any, tool: str) -> Choice:
    """The run's own load generator, as it was chosen: a resumed run never probes again."""
    if isinstance(stored, dict) and _binary_name(stored.get("tool")) == tool:
        return Choice(str(stored["tool"]), str(stored.get("why") or ""), stored.get("probe"))
    return Choice(tool, "the run's own")


def _binary_name(tool: Any) -> Any:
    """A choice names tools as --loadgen does (memtier); a binary by its own name."""
    return memtier.NAME if tool == "memtier" else tool
