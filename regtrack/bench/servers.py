"""A target's server, started the way the run's runtime starts it: a pinned process or a
container, under callgrind for instruction trials."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis

from regtrack.bench import delay_proxy, setup
from regtrack.bench.callgrind import control, protocol
from regtrack.bench.runtimes import docker
from regtrack.bench.runtimes.base import RunningServer
from regtrack.bench.runtimes.native import native_server
from regtrack.core.errors import CannotMeasure
from regtrack.targets.versions import Target

if TYPE_CHECKING:
    from regtrack.bench.job import Job

CALLGRIND_START_TIMEOUT_S = 120.0


class ServerDied(CannotMeasure):
    """The server of one visit exited (killed, crashed): that visit ends, the run goes on."""


def _binary(target: Target) -> str:
    if not target.binary:
        raise CannotMeasure(f"version {target.label}: no redis-server binary to run")
    return target.binary


def plain_server(
    job: Job,
    target: Target,
    run_id: int,
    seed: str | None = None,
    cpus: tuple[int, ...] | None = None,
) -> contextlib.AbstractContextManager:
    """The target's server as the run's runtime starts it (a process, or a container),
    pinned to the run's server CPUs or to ``cpus`` (a duet side's); with --rtt, behind a
    delay proxy on the client CPUs (bench/delay_proxy.py)."""
    cpus = cpus or job.cpus.server
    started: contextlib.AbstractContextManager
    if job.runtime == "docker":
        assert target.image, f"{target.label} has no image"
        started = docker.docker_server(
            job.docker,
            target.image,
            cpus,
            run_id=run_id,
            memory=job.memory,
            timeout=job.settings.server_start_timeout,
            seed=seed,
            settings=job.server_argv(target),
            data_dir=job.files_dir(),
        )
    else:
        started = native_server(
            _binary(target),
            cpus,
            timeout=job.settings.server_start_timeout,
            seed=seed,
            settings=job.server_argv(target),
            data_dir=job.data_dir,
        )
    if job.settings.rtt_us is None:
        return started
    return _behind_delay(started, job)


@contextlib.contextmanager
def _behind_delay(started: contextlib.AbstractContextManager, job: Job) -> Iterator[RunningServer]:
    assert job.engine is not None, "--rtt locates the engine (bench/prepare.py)"
    assert job.settings.rtt_us is not None
    with (
        started as server,
        delay_proxy.delayed(
            server, job.engine.path, job.settings.rtt_us, job.cpus.client
        ) as behind,
    ):
        yield behind


@contextlib.contextmanager
def serve(
    job: Job, target: Target, mode: str, run_id: int = 0, seed: str | None = None
) -> Iterator[tuple[RunningServer, Any]]:
    """A pinned server for one visit; under callgrind for instruction trials."""
    if mode != "instructions":
        with plain_server(job, target, run_id, seed) as server:
            yield server, None
        return
    valgrind, vgdb = control.require()
    weights = job.cycle_weights
    with tempfile.TemporaryDirectory(prefix="regtrack-callgrind-") as tmp:
        outdir = Path(tmp)
        try:
            with native_server(
                _binary(target),
                job.cpus.server,
                timeout=CALLGRIND_START_TIMEOUT_S,
                wrapper=control.wrapper(valgrind, outdir, simulate=weights is not None),
                seed=seed,
                settings=job.server_argv(target),
                data_dir=job.data_dir,
            ) as server:
                _slow_cron(server, target)
                yield server, protocol.Callgrind(vgdb, outdir, weights)
        except ServerDied:
            raise  # already names the version and the mode; the run goes on
        except CannotMeasure as exc:
            raise CannotMeasure(f"{target.label} under callgrind: {exc}") from None


def _slow_cron(server: RunningServer, target: Target) -> None:
    """hz 1 under callgrind (control.CALLGRIND_HZ says why)."""
    client = server.client(timeout=120)
    try:
        client.config_set("hz", control.CALLGRIND_HZ)
    except (redis.RedisError, OSError) as exc:
        if server.alive():
            raise CannotMeasure(f"CONFIG SET hz failed: {exc}") from None
        raise ServerDied(f"redis-server of {target.label} exited under callgrind") from None
    finally:
        client.close()


def set_up(job: Job, server: RunningServer, what: str, tool: str | None = None) -> dict[str, str]:
    """The workload's keys or setup on the live server (what its load specs need, spelt
    as ``tool`` sends them: the run's load generator by default); a server that died doing
    it ends its visit (ServerDied: ``what`` exited while setting up), any other failure
    is the environment's."""
    client = server.client(timeout=600)
    try:
        return setup.prepare_server(client, job.workload, tool or job.loadgen.name)
    except (redis.RedisError, OSError):
        if server.alive():
            raise
        raise ServerDied(f"{what} exited while setting up") from None
    finally:
        client.close()
