"""The Docker engine client, or one line saying why there is none; short error texts."""

from __future__ import annotations

from typing import Any

from regtrack.core.errors import CannotMeasure


def engine() -> Any:
    """The Docker engine, or one line saying why there is none (exit 3)."""
    try:
        import docker
    except ImportError:
        raise CannotMeasure("the Docker SDK for Python is missing: pip install docker") from None
    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except Exception as exc:  # the SDK raises many kinds for "no engine"
        raise CannotMeasure(
            f"cannot reach the Docker engine ({short(exc)}): start it (systemctl start "
            "docker), check DOCKER_HOST and your permissions, or use --runtime native"
        ) from None
    return client


def short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:200] or type(exc).__name__
