"""`regtrack mix capture --sample`: commandstats around a bounded MONITOR sample.

The INFO connection reads commandstats, the sample runs on a connection of its own
(sampler.py), and commandstats is read again: the rates come from the server's counters,
the shapes from the sample. Nothing is sent that changes the server's data: INFO, CONFIG
GET of a fixed list, COMMAND, MONITOR.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import redis

from regtrack.core import redact
from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.workloads import capture
from regtrack.workloads.traffic import sampler


@dataclass(frozen=True)
class SampledCapture:
    """The commandstats capture and the MONITOR sample taken inside it."""

    counted: capture.Capture
    sample: sampler.Sample


def take(
    url: str,
    secret: str | None,
    seconds: float,
    max_commands: int = sampler.MAX_COMMANDS,
    keep_names: bool = False,
) -> SampledCapture:
    """Commandstats around a MONITOR sample bounded by ``seconds`` and ``max_commands``."""
    if seconds <= 0 or max_commands <= 0:
        raise BadInput("--sample and --sample-commands must be positive")
    max_commands = min(max_commands, sampler.MAX_COMMANDS)
    taken: list[sampler.Sample] = []

    def during() -> float:
        client = capture.connect(url, secret, decode=False)
        try:
            taken.append(sampler.take(client, seconds, max_commands, keep_names))
        except redis.ResponseError as exc:
            problem = str(exc).splitlines()[0][:160] if str(exc) else "refused"
            raise CannotMeasure(
                f"{redact.url(url)}: MONITOR refused ({problem}); sample with a user allowed "
                "MONITOR, or capture without --sample"
            ) from None
        finally:
            client.close()
        return max(taken[0].seconds, 1e-3)

    counted = capture.sample(url, seconds, secret, during)
    return SampledCapture(counted, taken[0])


def scripts(given: tuple[str, ...]) -> dict[str, str]:
    """``--script SHA=FILE`` bodies by SHA, each checked against its SHA."""
    out = {}
    for item in given:
        sha, sep, file = item.partition("=")
        sha = sha.strip().lower()
        if not sep or len(sha) != 40 or any(c not in "0123456789abcdef" for c in sha):
            raise BadInput(f"--script {item[:60]!r}: give SHA=FILE, SHA the script's 40 hex digits")
        try:
            body = Path(file).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInput(
                f"--script {sha}: {file}: {getattr(exc, 'strerror', None) or 'not text'}"
            ) from None
        if hashlib.sha1(body.encode()).hexdigest() != sha:
            raise BadInput(f"--script {sha}: {file} is not that script (its SHA1 differs)")
        out[sha] = body
    return out
