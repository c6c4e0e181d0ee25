"""What a source build is made with, besides its commit: the make variables of
``--build-flags``, those make takes from regtrack's own environment, and the compiler.
All three move instruction counts, so they key the build cache and are stored with it
(results/comparability.py compares them across runs)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence

from regtrack.core import child_env
from regtrack.core.errors import BadInput, CannotMeasure

FLAG_RE = re.compile(r"^[A-Z_][A-Z0-9_]*=[^\x00-\x1f]*$")


def parse_build_flags(text: str | None) -> list[str]:
    """``"MALLOC=libc OPTIMIZATION=-O2"`` -> make variables; anything else is refused."""
    if not text:
        return []
    try:
        flags = shlex.split(text)
    except ValueError as exc:
        raise BadInput(f"--build-flags {text!r}: {exc}") from None
    for flag in flags:
        if not FLAG_RE.match(flag):
            raise BadInput(
                f"--build-flags: {flag!r} is not a make variable assignment like MALLOC=libc"
            )
    return flags


# Variables Redis's Makefiles read from the environment when make's command line does not
# set them: exported (by a toolchain's activation script, a CI image), they change the
# build as --build-flags would, so they are recorded with it and are part of its cache key.
# CC is not here: it decides the compiler, which is recorded by its version.
MAKE_ENVIRONMENT = (
    "CFLAGS",
    "CPPFLAGS",
    "LDFLAGS",
    "REDIS_CFLAGS",
    "REDIS_LDFLAGS",
    "OPTIMIZATION",
    "MALLOC",
    "DEBUG",
    "SANITIZER",
    "USE_JEMALLOC",
    "USE_TCMALLOC",
    "BUILD_TLS",
    "USE_SYSTEMD",
)


def make_environment(flags: list[str]) -> dict[str, str]:
    """The ``MAKE_ENVIRONMENT`` variables make will take from this environment (a variable
    given in ``flags`` overrides the environment's)."""
    given = {f.split("=", 1)[0] for f in flags}
    return {
        name: os.environ[name]
        for name in MAKE_ENVIRONMENT
        if name in os.environ and name not in given
    }


def flags_text(flags: Sequence[str] | None, environment: Mapping[str, str]) -> str:
    """A build's make variables as one text (its BuildFacts): the ``--build-flags``
    ("default": none), then those it took from the environment."""
    text = " ".join(flags or []) or "default"
    if environment:
        text += " (environment " + " ".join(f"{k}={v}" for k, v in environment.items()) + ")"
    return text


def _compiler_command(flags: list[str]) -> str:
    """The compiler make runs: CC= of the flags, else cc behind ccache (_ccache: it sets
    CC on make's command line), else the environment's CC, else cc."""
    given = next((f.split("=", 1)[1] for f in flags if f.startswith("CC=")), None)
    if given is not None:
        return given
    if shutil.which("ccache") is not None:
        return "cc"
    return os.environ.get("CC") or "cc"


def compiler_version(flags: list[str]) -> str:
    cc_argv = shlex.split(_compiler_command(flags)) or ["cc"]
    try:
        out = subprocess.run(
            [*cc_argv, "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env=child_env.build(MAKE_ENVIRONMENT),
        )
    except OSError:
        raise CannotMeasure(
            f"compiler {cc_argv[0]} not found: install build-essential (apt-get install "
            "build-essential)"
        ) from None
    return (out.stdout.splitlines() or ["unknown"])[0].strip()
