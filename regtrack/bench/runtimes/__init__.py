"""Runtimes start and stop pinned Redis servers; the runner does not care which one runs."""

from regtrack.bench.runtimes.base import RunningServer, ServerStartError

__all__ = ["RunningServer", "ServerStartError"]
