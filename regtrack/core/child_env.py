"""The environment of each kind of child process regtrack starts: what it needs, no more.

regtrack runs as root in CI jobs whose environment holds tokens (GITHUB_TOKEN, cloud keys,
registry passwords). A child inherits the whole environment unless told otherwise, and so
does everything it starts; a server, a load generator or a compiler needs none of it, and
a server runs code a pull request chose. So every child gets an allowlist of names for its
kind, and a name that looks like a secret is dropped even where a prefix (LC_*, CCACHE_*)
would let it through. What regtrack itself hands a child (git's credentials for one clone,
ccache's directory) is added by the caller on top of this.

There is no Docker kind: the engine is driven in-process (core/docker_engine.py) and a
container's environment is its image's, never regtrack's.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

# Every child: where programs and the libraries they link are, whose home, the locale and
# time zone, the temp dir.
BASIC = ("PATH", "LD_LIBRARY_PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR")
BASIC_PREFIXES = ("LC_",)

# A server may run under valgrind (callgrind), installed outside the system's prefix.
SERVER = ("VALGRIND_LIB",)

# A build: the toolchain make and the compiler read besides the make variables the caller
# names (make_flags.MAKE_ENVIRONMENT, recorded with the build), and ccache's settings.
TOOLCHAIN = (
    "CC", "CXX", "CPP", "AR", "AS", "LD", "NM", "RANLIB", "STRIP", "OBJCOPY",
    "PKG_CONFIG", "PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR", "CPATH", "C_INCLUDE_PATH",
    "LIBRARY_PATH", "SOURCE_DATE_EPOCH",
)  # fmt: skip
TOOLCHAIN_PREFIXES = ("CCACHE_",)

# git: its configuration, ssh's agent and command, certificates and proxies.
GIT = (
    "XDG_CONFIG_HOME", "SSH_AUTH_SOCK", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_SSH_VARIANT",
    "GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "GIT_SSL_NO_VERIFY", "GIT_PROXY_COMMAND",
    "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM", "GIT_ALLOW_PROTOCOL",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE", "http_proxy", "https_proxy",
    "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY",
)  # fmt: skip
# GIT_CONFIG_COUNT, GIT_CONFIG_KEY_n, GIT_CONFIG_VALUE_n: configuration meant for git.
GIT_PREFIXES = ("GIT_CONFIG_",)

SECRET_NAME_RE = re.compile(
    r"TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|PRIVATE|^(GITHUB|ACTIONS|RUNNER|AWS|AZURE|GCP|"
    r"GOOGLE|NPM|PYPI|TWINE|DOCKER|CI_JOB)_",
    re.IGNORECASE,
)


def looks_secret(name: str) -> bool:
    """Whether a variable's name says it holds a credential or belongs to a CI runner."""
    return bool(SECRET_NAME_RE.search(name))


def allowed(
    names: Iterable[str],
    prefixes: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The variables of ``environ`` (default: regtrack's own) named in ``names`` or starting
    with one of ``prefixes``, minus any whose name looks like a secret."""
    source = os.environ if environ is None else environ
    wanted, starts = set(names), tuple(prefixes)
    return {
        name: value
        for name, value in source.items()
        if (name in wanted or name.startswith(starts)) and not looks_secret(name)
    }


def basic(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A short-lived helper (a tool asked its version, the seed probe, tar)."""
    return allowed(BASIC, BASIC_PREFIXES, environ)


def server(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A Redis server, natively or under valgrind, and vgdb (callgrind's commands) beside it."""
    return allowed((*BASIC, *SERVER), BASIC_PREFIXES, environ)


def load_generator(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """redis-benchmark or memtier_benchmark: the basics, nothing of their own."""
    return allowed(BASIC, BASIC_PREFIXES, environ)


# A user's own producer/worker program (--driver): where its language finds its packages.
DRIVER = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "GEM_HOME", "GEM_PATH", "BUNDLE_GEMFILE",
          "NODE_PATH", "GOPATH", "CLASSPATH")  # fmt: skip


def driver(url: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A user's --driver program: the basics, its language's package paths, and the
    server's address in REDIS_URL (no credential of regtrack's: the load user needs none)."""
    return {**allowed((*BASIC, *DRIVER), BASIC_PREFIXES, environ), "REDIS_URL": url}


def build(
    make_variables: Iterable[str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """make and the compiler: the toolchain and ``make_variables`` (the ones recorded with
    the build, so the build sees exactly what its cache key says)."""
    names = (*BASIC, *TOOLCHAIN, *make_variables)
    return allowed(names, (*BASIC_PREFIXES, *TOOLCHAIN_PREFIXES), environ)


def git(environ: Mapping[str, str] | None = None, *, isolated: bool = False) -> dict[str, str]:
    """git, and what it starts (ssh, git-remote-http, credential helpers). ``isolated``
    keeps none of the user's GIT_* variables (deterministic commits of an offline source
    repository, whoever makes them)."""
    env = allowed((*BASIC, *GIT), (*BASIC_PREFIXES, *GIT_PREFIXES), environ)
    if isolated:
        env = {name: value for name, value in env.items() if not name.startswith("GIT_")}
    return env
