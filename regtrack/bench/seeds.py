"""Common random numbers: every server process starts with seed bytes regtrack chooses.

Redis seeds its hash functions (the command table's and every dict's SipHash key) from
``/dev/urandom`` at start-up. That seed alone moves instructions per GET by 2-4% between
server processes of one binary, far more than the regressions worth finding. regtrack
therefore gives each process a file of chosen bytes in place of ``/dev/urandom``:

* natively, a private mount namespace (``unshare --mount``, with ``--map-root-user`` when
  not root) bind-mounts the file over ``/dev/urandom`` and then execs the server (the pid
  stays the server's); under callgrind the namespace wraps valgrind, so the same holds;
* in Docker, a read-only bind mount of the file on ``/dev/urandom``.

Repetition r of a run gives every version the same seed and seeds differ between
repetitions, so a comparison averages over seeds while each seed-matched pair cancels the
seed's effect wherever it acts alike on both sides. Seeds also differ between runs: each
run draws an offset (stored in its settings) and repetition r reads seed number
offset + r, so running `ci` again measures other seeds rather than repeating the same
answer by construction (a change living in a few seeds is found by some run). A run
compared with a stored one (`ci --baseline-name`, a bisection's steps) takes the stored
run's offset, so its repetition r is seed-matched with the stored repetition r; the shards
of one plan agree on theirs without talking (bench/shards.seed_offset).
"""

from __future__ import annotations

import functools
import hashlib
import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

from regtrack.core import child_env

# Enough for every reader: Redis reads 16-40 bytes, buffered stdio reads up to 4 KiB.
SEED_FILE_BYTES = 1 << 16
NAMESPACE = "regtrack-seed-v1"
# Offsets are multiples of this, so two runs' repetitions never share seeds unless they
# drew the same offset (one chance in OFFSETS) or one took the other's.
OFFSET_STEP = 1 << 16
OFFSETS = 1 << 15
# Bind the seed file over /dev/urandom in the new mount namespace, then become the server.
_SCRIPT = 'mount --bind "$0" /dev/urandom && exec "$@"'


def for_repetition(repetition: int, offset: int = 0) -> str:
    """The seed of repetition ``repetition`` (0-based) of a run with ``offset``: 16 hex
    digits, the same on every host (offset 0: the seeds of runs made before offsets)."""
    return hashlib.sha256(f"{NAMESPACE}:{offset + repetition}".encode()).hexdigest()[:16]


def draw_offset() -> int:
    """A fresh run's offset, drawn so that its seeds are none of another run's."""
    return secrets.randbelow(OFFSETS) * OFFSET_STEP


def offset_for(text: str) -> int:
    """The offset every host derives from the same ``text`` (a CI pipeline's id)."""
    digest = hashlib.sha256(f"{NAMESPACE}:offset:{text}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % OFFSETS * OFFSET_STEP


def seed_bytes(seed: str) -> bytes:
    """The bytes a server reads from ``/dev/urandom`` under ``seed``."""
    return hashlib.shake_256(f"{NAMESPACE}:{seed}".encode()).digest(SEED_FILE_BYTES)


def write_file(directory: Path, seed: str) -> Path:
    """The seed's bytes in ``directory``, readable by the server (and by a container)."""
    path = directory / f"urandom-{seed}"
    path.write_bytes(seed_bytes(seed))
    path.chmod(0o644)
    return path


def _unshare_argv() -> list[str]:
    unshare = shutil.which("unshare") or "unshare"
    user = [] if os.geteuid() == 0 else ["--map-root-user"]
    return [unshare, *user, "--mount", "--propagation", "private", "--"]


def problem(seeds: str, runtime: str) -> str | None:
    """Why a run's servers will not start with regtrack's seeds (None: they will), asked
    of this machine when a job is made: random seeds asked for (the settings' ``seeds``),
    or a native runtime that cannot bind a file over /dev/urandom here."""
    if seeds == "random":
        return 'random seeds were asked for (seeds = "random")'
    return native_problem() if runtime == "native" else None


@functools.cache
def native_problem() -> str | None:
    """Why seeds cannot be controlled natively here (None when they can): probed once by
    bind-mounting a file over /dev/urandom in a throwaway namespace and reading it back."""
    if not shutil.which("unshare") or not shutil.which("mount"):
        return "unshare or mount is missing (apt-get install util-linux mount)"
    with tempfile.TemporaryDirectory(prefix="regtrack-seed-probe-") as tmp:
        path = write_file(Path(tmp), "probe")
        try:
            out = subprocess.run(
                [*native_wrapper(path), "head", "-c", "16", "/dev/urandom"],
                capture_output=True,
                env=child_env.basic(),
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"unshare failed: {exc}"
    if out.returncode != 0 or out.stdout != seed_bytes("probe")[:16]:
        why = out.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        hint = "" if os.geteuid() == 0 else " (unprivileged user namespaces may be disabled)"
        return f"a private mount namespace is not available: {why[0]}{hint}"
    return None


def native_wrapper(seed_file: Path) -> list[str]:
    """The argv prefix that runs the rest of the argv with ``seed_file`` as /dev/urandom."""
    return [*_unshare_argv(), "sh", "-c", _SCRIPT, str(seed_file)]
