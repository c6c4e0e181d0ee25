"""Start a redis-server binary pinned with ``taskset`` on 127.0.0.1, and stop it for sure."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import redis

from regtrack.bench import seeds
from regtrack.bench.runtimes import access, base
from regtrack.core import child_env, procs
from regtrack.core.cpus import format_cpu_list

HOST = "127.0.0.1"
START_TIMEOUT_S = 20.0
PORT_ATTEMPTS = 3


def taskset_path() -> str:
    return procs.util_linux("taskset", "servers cannot be pinned to CPUs")


def server_argv(
    binary: str,
    port: int,
    cpus: tuple[int, ...],
    workdir: Path,
    wrapper: list[str] | None = None,
    settings: list[str] | None = None,
) -> list[str]:
    """Loopback only, protected mode: a benchmark server nobody else can reach; no
    persistence unless the user's ``settings`` (redis-server arguments, which come last
    and so win) ask for it.

    ``wrapper`` (e.g. valgrind) runs between taskset and the server, so it is pinned too.
    """
    return [
        taskset_path(),
        "-c",
        format_cpu_list(cpus),
        *(wrapper or []),
        binary,
        "--port",
        str(port),
        "--bind",
        HOST,
        "--protected-mode",
        "yes",
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "no",
        "--dir",
        str(workdir),
        "--logfile",
        "",
        *(settings or []),
    ]


def _log_tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text[-lines:])


def _wait_ready(
    proc: subprocess.Popen,
    port: int,
    log: Path,
    timeout: float,
    token_dir: str,
    rights: access.Access,
) -> dict:
    deadline = time.monotonic() + timeout
    client = base.connect(HOST, port, timeout=2.0, access=rights)
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise base.ServerStartError(f"exited with code {proc.returncode}: {_log_tail(log)}")
            try:
                if client.ping():
                    base.check_token(client, port, token_dir)
                    return client.info("server")
            except redis.AuthenticationError as exc:
                raise base.ImpostorError(
                    f"port {port} refused regtrack's password ({exc}): another server"
                ) from None
            except (redis.ConnectionError, redis.TimeoutError):
                pass
            except redis.ResponseError as exc:  # e.g. LOADING, or a password-protected impostor
                if "LOADING" not in str(exc):
                    raise base.ServerStartError(f"answered PING with an error: {exc}") from None
            time.sleep(0.02)
        raise base.ServerStartError(f"did not answer PING within {timeout:.0f} s: {_log_tail(log)}")
    finally:
        client.close()


def shutdown(server: base.RunningServer, proc: subprocess.Popen) -> None:
    """SHUTDOWN NOSAVE first (clean exit), then signals; never leaves the process behind."""
    if proc.poll() is None:
        client = server.client(timeout=2.0)
        try:
            client.ping()
            if server.token_dir:  # never shut down a server that is not ours
                base.check_token(client, server.port, server.token_dir)
            asked = True
            # The server closes the connection as it exits; that is the expected answer.
            with contextlib.suppress(redis.ConnectionError):
                client.execute_command("SHUTDOWN", "NOSAVE")
        except (redis.RedisError, OSError, base.ImpostorError):
            asked = False
        finally:
            client.close()
        if asked:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5.0)
    procs.stop(proc)


@contextlib.contextmanager
def native_server(
    binary: str,
    cpus: tuple[int, ...],
    *,
    timeout: float = START_TIMEOUT_S,
    wrapper: list[str] | None = None,
    seed: str | None = None,
    settings: list[str] | None = None,
    data_dir: str | None = None,
) -> Iterator[base.RunningServer]:
    """Run ``binary`` pinned to ``cpus`` for the duration of the block; with ``seed``, it
    reads that seed's bytes from /dev/urandom (regtrack.bench.seeds). Its files (and any
    AOF or RDB) go to a directory of its own below ``data_dir`` (default: the temp dir)."""
    with tempfile.TemporaryDirectory(prefix="regtrack-server-", dir=data_dir) as tmp:
        workdir = Path(tmp).resolve()  # the token: CONFIG GET dir must give it back
        log = workdir / "server.log"
        if seed is not None:
            wrapper = [*seeds.native_wrapper(seeds.write_file(workdir, seed)), *(wrapper or [])]
        last_error: base.ServerStartError | None = None
        rights = access.new()
        for _ in range(PORT_ATTEMPTS + len(access.LEVELS) - 1):
            port = procs.free_port(HOST)
            with log.open("wb") as log_file:
                try:
                    proc = procs.spawn(
                        server_argv(
                            binary,
                            port,
                            cpus,
                            workdir,
                            wrapper,
                            [*rights.server_args(), *(settings or [])],
                        ),
                        stdout=log_file,
                        stderr=subprocess.STDOUT,
                        cwd=workdir,
                        env=child_env.server(),
                    )
                except OSError as exc:
                    raise base.ServerStartError(f"cannot start {binary}: {exc.strerror}") from None
            server = base.RunningServer(
                host=HOST,
                port=port,
                pid=proc.pid,
                token_dir=str(workdir),
                is_alive=lambda p=proc: procs.running(p),
                access=rights,
            )
            try:
                server.info = _wait_ready(proc, port, log, timeout, str(workdir), rights)
            except base.ServerStartError as exc:
                shutdown(server, proc)
                last_error = exc
                if isinstance(exc, base.PortRace) or "Address already in use" in str(exc):
                    continue  # lost a race for the port: take another one
                weaker = access.weaker(rights, str(exc))
                if weaker is not None:
                    rights = weaker  # an older Redis: fewer ACL rules, or none
                    continue
                raise base.ServerStartError(f"{binary} {exc}") from None
            except BaseException:
                shutdown(server, proc)
                raise
            try:
                yield server
            finally:
                shutdown(server, proc)
            return
        raise base.ServerStartError(f"{binary} {last_error}")
