"""Servers in Docker containers, pinned with --cpuset-cpus, on the host network, removed for sure.

Which image each version runs is decided and made in ``regtrack.targets`` (images.py,
engine_images.py, image_build.py); this module only starts and stops containers.

Every container carries the labels ``regtrack.run`` (run id), ``regtrack.pid`` and
``regtrack.owner`` (the regtrack process: its kernel boot, pid namespace, pid and start
time), so leftovers of a killed regtrack can be found and removed, and only those: a pid
alone could name a live regtrack in another pid namespace (another container, a CI job)
sharing the engine, or a new process that reused a dead one's pid.

Containers are hardened: an unprivileged user (``container_user``), no capabilities,
``no-new-privileges``, and the server's ACL users (``access.py``) as on the host.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from regtrack.bench import seeds
from regtrack.bench.runtimes import access
from regtrack.bench.runtimes.base import (
    ImpostorError,
    PortRace,
    RunningServer,
    ServerStartError,
    check_token,
    connect,
)
from regtrack.core.cpus import format_cpu_list
from regtrack.core.docker_engine import short
from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.core.procs import free_port
from regtrack.targets.engine_images import IMPORTED_REPO

RUN_LABEL = "regtrack.run"
PID_LABEL = "regtrack.pid"
OWNER_LABEL = "regtrack.owner"
HOST = "127.0.0.1"
TOKEN_ROOT = "/regtrack"  # each container's `dir` is TOKEN_ROOT/<its name>
PORT_ATTEMPTS = 3
CONTAINER_ID = 2_000_000_000  # root's servers run as the first uid/gid from here unused here


def server_command(port: int, token_dir: str, settings: list[str] | None = None) -> list[str]:
    """redis-server from the image's PATH: the official images' entrypoint recognises it,
    regtrack's imported images put it on PATH. Loopback only; no persistence unless the
    user's ``settings`` (which come last, and so win) ask for it; ``dir`` is the
    container's own directory (the token check_token reads back)."""
    return [
        "redis-server", "--port", str(port), "--bind", HOST, "--protected-mode", "yes",
        "--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", token_dir,
        "--logfile", "", *(settings or []),
    ]  # fmt: skip


def _affinity(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return "?"


def owner_token(pid: int | None = None) -> str:
    """This process (or ``pid``) as no other process on any host or namespace can be:
    boot id / pid namespace / pid / start time (clock ticks after boot)."""
    pid = pid or os.getpid()
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    namespace = os.readlink(f"/proc/{pid}/ns/pid")
    return f"{boot}/{namespace}/{pid}/{_start_time(pid)}"


def _start_time(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "gone"
    return stat[stat.rindex(")") + 2 :].split()[19]  # field 22: starttime


def owner_alive(labels: dict[str, str], here: str) -> bool | None:
    """Whether the regtrack that started a container lives (None: it cannot be told from
    here, another kernel or pid namespace: its containers are not ours to remove)."""
    owner = labels.get(OWNER_LABEL, "")
    parts = owner.split("/")
    if len(parts) == 4:
        boot, namespace, pid, started = parts
        if [boot, namespace] != here.split("/")[:2]:
            return None
        return pid.isdigit() and _start_time(int(pid)) == started
    pid = labels.get(PID_LABEL, "")  # a container of an older regtrack
    return pid.isdigit() and Path(f"/proc/{pid}").exists()


def remove_leftovers(client: Any, all_of_them: bool = False) -> list[str]:
    """Remove regtrack containers whose regtrack process is gone (killed with -9), or
    every regtrack container with ``all_of_them``."""
    removed = []
    here = owner_token()
    for container in client.containers.list(all=True, filters={"label": RUN_LABEL}):
        if owner_alive(container.labels, here) is not False and not all_of_them:
            continue  # a live regtrack's (this one's, a concurrent run's, or one elsewhere)
        with contextlib.suppress(Exception):
            container.remove(force=True)
            removed.append(container.name)
    return removed


@contextlib.contextmanager
def docker_server(
    client: Any,
    image: str,
    cpus: tuple[int, ...],
    *,
    run_id: int | str,
    memory: str | None = None,
    timeout: float = 30.0,
    seed: str | None = None,
    settings: list[str] | None = None,
    data_dir: str | None = None,
) -> Iterator[RunningServer]:
    """A container of ``image`` pinned to ``cpus``, for the duration of the block; with
    ``seed``, a read-only bind mount puts that seed's bytes on /dev/urandom (regtrack.bench.seeds).
    Its ``dir`` is a directory of its own, read back before it is used (check_token): a
    tmpfs of the container's, or, with ``data_dir`` (a persistent server: AOF or RDB), a
    host directory below it, so that its writes and fsyncs land on that filesystem."""
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="regtrack-seed-"))
        volumes: dict[str, dict[str, str]] = {}
        if seed is not None:
            Path(tmp).chmod(0o755)  # the official images run redis-server as user redis
            path = seeds.write_file(Path(tmp), seed)
            volumes[str(path)] = {"bind": "/dev/urandom", "mode": "ro"}
        uid, gid = container_user()
        host_dir = None
        if data_dir is not None:
            host_dir = stack.enter_context(
                tempfile.TemporaryDirectory(prefix="regtrack-server-", dir=data_dir)
            )
            # 0700 (TemporaryDirectory's mode), owned by the user the server runs as.
            if os.getuid() == 0:
                os.chown(host_dir, uid, gid)
        container, server = _start(
            client,
            image,
            cpus,
            run_id,
            memory,
            timeout,
            volumes,
            settings or [],
            host_dir,
            (uid, gid),
        )
        try:
            yield server
        finally:
            _remove(container)


def container_user() -> tuple[int, int]:
    """The unprivileged user a server runs as in its container: regtrack's own user, or,
    for root, a uid and gid no account on this host has (so no local user can reach a
    persistent server's data folder, which it owns with mode 0700)."""
    if os.getuid() != 0:
        return os.getuid(), os.getgid()
    uid = CONTAINER_ID
    while _taken(uid):
        uid += 1
    return uid, uid


def _taken(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        try:
            grp.getgrgid(uid)
        except KeyError:
            return False
    return True


def _remove(container: Any) -> None:
    with contextlib.suppress(Exception):
        container.remove(force=True)


def _start(
    client: Any,
    image: str,
    cpus: tuple[int, ...],
    run_id: int | str,
    memory: str | None,
    timeout: float,
    volumes: dict[str, dict[str, str]],
    settings: list[str],
    host_dir: str | None,
    user: tuple[int, int],
) -> tuple[Any, RunningServer]:
    """Start the container on a free port; a port lost to another process (the host
    network: the server cannot bind it, or another server answers on it, which the token
    shows) is retried on another port."""
    import docker

    last: ServerStartError | None = None
    rights = access.new()
    for _ in range(PORT_ATTEMPTS + len(access.LEVELS) - 1):
        port = free_port(HOST)
        name = f"regtrack-{run_id}-{uuid.uuid4().hex[:8]}"
        token_dir = f"{TOKEN_ROOT}/{name}"
        # `dir` is the token: a tmpfs of its own, the server's alone, or the host
        # directory a persistent server writes its AOF or RDB to.
        uid, gid = user
        tmpfs = {"/data": ""}
        mounts = dict(volumes)
        if host_dir is None:
            tmpfs[token_dir] = f"mode=0700,uid={uid},gid={gid}"
        else:
            mounts[host_dir] = {"bind": token_dir, "mode": "rw"}
        try:
            container = client.containers.run(
                image,
                command=server_command(port, token_dir, [*rights.server_args(), *settings]),
                name=name,
                detach=True,
                network_mode="host",
                cpuset_cpus=format_cpu_list(cpus),
                mem_limit=memory,
                labels={
                    RUN_LABEL: str(run_id),
                    PID_LABEL: str(os.getpid()),
                    OWNER_LABEL: owner_token(),
                },
                tmpfs=tmpfs,
                volumes=mounts,
                # Hardened: an unprivileged user, no capabilities, nothing gained by exec.
                user=f"{uid}:{gid}",
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
            )
        except docker.errors.ImageNotFound:
            raise CannotMeasure(f"image {image} is not present") from None
        except docker.errors.APIError as exc:
            raise ServerStartError(f"container of {image} did not start: {short(exc)}") from None
        try:
            server = _wait_ready(container, port, image, cpus, timeout, token_dir, rights)
        except PortRace as exc:
            _remove(container)
            last = exc
            continue
        except ServerStartError as exc:
            _remove(container)
            weaker = access.weaker(rights, str(exc))
            if weaker is None:
                raise
            rights, last = weaker, None  # an older Redis: fewer ACL rules, or none
            continue
        except BaseException:
            _remove(container)
            raise
        return container, server
    raise ServerStartError(str(last))


def _answers(container: Any, client: redis.Redis, port: int, image: str, token_dir: str) -> bool:
    """Whether the container's server answers PING as regtrack's own (its token); an
    exited container or another server on the port ends the wait."""
    container.reload()
    if container.status in ("exited", "dead"):
        logs = container.logs(tail=5).decode(errors="replace").strip().replace("\n", " | ")
        lost = "Address already in use" in logs  # the host network: a port race
        raise (PortRace if lost else ServerStartError)(f"container of {image} exited: {logs}")
    try:
        if client.ping():
            check_token(client, port, token_dir)
            return True
    except redis.AuthenticationError as exc:
        raise ImpostorError(
            f"port {port} refused regtrack's password ({exc}): another server"
        ) from None
    except (redis.ConnectionError, redis.TimeoutError):
        pass
    except redis.ResponseError as exc:  # LOADING, or a password-protected impostor
        if "LOADING" not in str(exc):
            raise ImpostorError(f"port {port} answered PING with an error: {exc}") from None
    return False


def _wait_ready(
    container: Any,
    port: int,
    image: str,
    cpus: tuple[int, ...],
    timeout: float,
    token_dir: str,
    rights: access.Access,
) -> RunningServer:
    deadline = time.monotonic() + timeout
    client = connect(HOST, port, timeout=2.0, access=rights)
    try:
        while not _answers(container, client, port, image, token_dir):
            if time.monotonic() >= deadline:
                raise ServerStartError(
                    f"container of {image} did not answer PING within {timeout:.0f} s"
                )
            time.sleep(0.05)
        info = client.info("server")
    finally:
        client.close()
    pid = int(container.attrs["State"]["Pid"])
    wanted = format_cpu_list(cpus)
    actual = _affinity(pid)
    if actual != wanted:
        raise CannotMeasure(
            f"container of {image} runs on CPUs {actual}, not {wanted}: the engine ignored "
            "--cpuset-cpus (cgroup cpuset controller missing?); use --runtime native"
        )

    def alive() -> bool:
        return Path(f"/proc/{pid}").exists()

    info = dict(info)
    info["container"] = {"id": container.id, "name": container.name, "cpuset": actual}
    return RunningServer(
        host=HOST,
        port=port,
        pid=pid,
        info=info,
        token_dir=token_dir,
        is_alive=alive,
        access=rights,
    )


@dataclass(frozen=True)
class EngineImage:
    tags: tuple[str, ...]
    id: str


@dataclass(frozen=True)
class Leftover:
    """A container a run left behind (killed before it could remove it)."""

    name: str
    status: str
    run: str | None  # the run id its label names


@dataclass(frozen=True)
class EngineFacts:
    """What `regtrack doctor` reports of the engine: its version, regtrack's and redis
    images, and leftover containers."""

    version: str | None
    images: tuple[EngineImage, ...]
    leftovers: tuple[Leftover, ...]


def describe_engine(client: Any) -> EngineFacts:
    """For `regtrack doctor`: the engine, regtrack's and redis images, leftover containers."""
    images = tuple(
        EngineImage(tuple(i.tags), i.short_id)
        for i in client.images.list()
        if any(t.startswith((IMPORTED_REPO, "redis:")) for t in i.tags)
    )
    leftovers = tuple(
        Leftover(c.name, c.status, c.labels.get(RUN_LABEL))
        for c in client.containers.list(all=True, filters={"label": RUN_LABEL})
    )
    return EngineFacts(client.version().get("Version"), images, leftovers)


def check_metric(metric: str) -> None:
    if metric != "throughput":
        raise BadInput(
            "--metric instructions needs --runtime native: callgrind runs the server under "
            "valgrind, which the containers here do not have; run the same versions with "
            "--runtime native (they are built from source)"
        )
