"""What every runtime hands back: a server on loopback that can be queried and stopped."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from regtrack.bench.runtimes.access import Access
from regtrack.core.errors import CannotMeasure
from regtrack.core.redis_options import QUIET_CONNECT

CONTROL_NAME = "regtrack-control"


def connect(
    host: str, port: int, timeout: float = 30.0, access: Access | None = None
) -> redis.Redis:
    """A control connection that never retries: a retry would hide a dead server (and
    redis-py's default back-off turns every SHUTDOWN into seconds of waiting). Named, so
    regtrack can tell its own connections from the load generator's; logged in as the
    server's administrator (``access``)."""
    return redis.Redis(
        host=host,
        port=port,
        username=access.username if access else None,
        password=access.password if access else None,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        decode_responses=True,
        retry=Retry(NoBackoff(), 0),
        client_name=CONTROL_NAME,
        **QUIET_CONNECT,
    )


def server_version(info: dict[str, Any]) -> str:
    for key in ("valkey_version", "redis_version"):
        if info.get(key):
            return str(info[key])
    return "unknown"


class ServerStartError(CannotMeasure):
    """The server did not come up; the message carries the tail of its log."""


class PortRace(ServerStartError):
    """The chosen port was lost to another process: start again on another port."""


class ImpostorError(PortRace):
    """The port answers, but not with the server regtrack started (a lost port race)."""


def check_token(client: redis.Redis, port: int, token_dir: str) -> None:
    """Prove that the server answering on ``port`` is the one regtrack started: each server
    gets a directory of its own (the token) as ``dir``, read back before anything is
    measured. A server that lost the race for the port would otherwise be measured in
    place of the one that won it."""
    try:
        answered = client.config_get("dir").get("dir")
    except redis.AuthenticationError as exc:
        raise ImpostorError(
            f"port {port} is answered by a server that refuses regtrack's password ({exc}), "
            "not the server regtrack started"
        ) from None
    except redis.ResponseError as exc:
        raise ImpostorError(
            f"port {port} is answered by a server that refuses CONFIG GET dir ({exc}), "
            "not the server regtrack started"
        ) from None
    if answered != token_dir:
        raise ImpostorError(
            f"port {port} is answered by another server (dir {answered!r}), not the one "
            f"regtrack started (dir {token_dir!r})"
        )


@dataclass
class RunningServer:
    """A live server on ``host:port``; ``info`` is its ``INFO server`` at start."""

    host: str
    port: int
    pid: int | None
    info: dict[str, Any] = field(default_factory=dict)
    token_dir: str | None = None  # its `dir`, unique to it: see check_token
    is_alive: Callable[[], bool] = lambda: True
    access: Access = field(default_factory=Access)
    # --rtt: the delay proxy in front of it (bench/delay_proxy.DelayProxy: its host, port
    # and report), where load generators are aimed; None: they connect to the server.
    delay: Any = None

    @property
    def aimed_at(self) -> tuple[str, int]:
        """Where load generators connect: the delay proxy, else the server itself."""
        if self.delay is not None:
            return self.delay.host, self.delay.port
        return self.host, self.port

    def alive(self) -> bool:
        """False once the server process has exited (crashed, killed)."""
        return self.is_alive()

    def client(self, timeout: float = 30.0) -> redis.Redis:
        """A control connection, logged in as the server's administrator."""
        return connect(self.host, self.port, timeout, self.access)

    @property
    def version(self) -> str:
        """The server's own version: a fork such as Valkey reports redis_version 7.2.4."""
        return server_version(self.info)

    def server_identity(self) -> dict[str, Any]:
        """The fields that trace a number back to exact code."""
        keys = (
            "redis_version",
            "valkey_version",
            "server_name",
            "redis_git_sha1",
            "redis_git_dirty",
            "redis_build_id",
            "redis_mode",
            "os",
            "arch_bits",
            "multiplexing_api",
            "gcc_version",
            "executable",
        )
        identity = {k: self.info[k] for k in keys if k in self.info}
        identity["version"] = self.version
        identity["access"] = self.access.level
        return identity
