"""Server settings: the redis.conf a user's servers run with, applied to every version.

A durable queue runs with AOF, Redis 8's story is its I/O threads, and eviction, ``hz``
and ``lazyfree-*`` change per-command cost too: a comparison under defaults can tell a
team the wrong thing about the servers they run. Settings come from a workload file's
``[server]`` table and from ``--server-config KEY=VALUE`` (which wins), are validated
here for shape and safety (a workload file may be a pull request's: nothing that names a
file, a host or another setting gets through), and against each version's own ``CONFIG
GET`` before measuring (bench/server_settings.py).

A key ending in ``?`` is optional: a version that does not know the setting runs
without it, with a warning, instead of refusing the run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from regtrack.core.errors import BadInput
from regtrack.core.text import printable

# What regtrack itself sets on every server: where it listens, the directory it owns (the
# token it reads back), how it logs and runs. A user's value would break measuring.
OWNED = frozenset(
    {
        "port", "bind", "protected-mode", "daemonize", "dir", "logfile", "unixsocket",
        "unixsocketperm", "unixsocketgroup", "include", "supervised", "pidfile", "tls-port",
        "syslog-enabled", "syslog-ident", "syslog-facility", "rename-command", "loadmodule",
        "enable-debug-command", "enable-protected-configs", "enable-module-command",
    }
)  # fmt: skip
# What a workload may never set, in any version (6.2 to 8.x, Valkey), and why: redis-server
# runs as regtrack's user, root in CI, and the workload file may be a pull request's
# (cluster-config-file=/any/path created a root-owned file there). dbfilename and the AOF
# names stay inside the server's own directory in today's versions; regtrack keeps them
# its own all the same. Every tls-* setting names certificate and key files, and
# regtrack's servers speak plain TCP on loopback.
UNSAFE = {
    **dict.fromkeys(["dbfilename", "appendfilename", "cluster-config-file"], "names a file"),
    "appenddirname": "names a directory",
    **dict.fromkeys(["replicaof", "slaveof"], "connects the server to another host"),
    **dict.fromkeys(
        ["oom-score-adj", "oom-score-adj-values"],
        "changes which process the kernel kills first when memory runs out",
    ),
}
TLS_PREFIX = "tls-"
# Never stored, printed or applied: a benchmark database is shared, secrets are not.
SECRETS = frozenset(
    {"requirepass", "masterauth", "masteruser", "aclfile", "user", "tls-key-file-pass",
     "tls-client-key-file-pass", "sentinel-pass"}
)  # fmt: skip
NAME_RE = re.compile(r"^[a-z][a-z0-9-]*$")
NEGATIVE_RE = re.compile(r"^-[0-9]+(\.[0-9]+)?$")


@dataclass(frozen=True)
class Setting:
    """One server setting; ``optional``: skipped (with a warning) where unknown."""

    name: str
    value: str
    optional: bool = False

    @property
    def key(self) -> str:
        return f"{self.name}?" if self.optional else self.name

    def argv(self) -> list[str]:
        return [f"--{self.name}", self.value]


def _value(name: str, value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float | str):
        return str(value)
    raise BadInput(f"server setting {name}: give a string, number or true/false, not {value!r}")


def setting(key: str, value: Any, where: str) -> Setting:
    """``key`` (``name`` or ``name?``) = ``value``, checked for shape; one clear line."""
    name = key.strip().lower()
    optional = name.endswith("?")
    name = name.removesuffix("?")
    if not NAME_RE.match(name):
        raise BadInput(f"{where}: {key!r} is not a server setting name (e.g. appendonly)")
    if name in SECRETS:
        raise BadInput(
            f"{where}: {name} is a secret; regtrack never sets, stores or prints secrets "
            "(benchmark servers listen on 127.0.0.1 only)"
        )
    if name in OWNED:
        raise BadInput(f"{where}: {name} is set by regtrack itself on every server; leave it out")
    why = UNSAFE.get(name) or ("names TLS files" if name.startswith(TLS_PREFIX) else None)
    if why:
        raise BadInput(
            f"{where}: {name} {why}; regtrack's servers keep their files in a directory of "
            "their own and serve only the load generators, so no workload sets it"
        )
    text = _value(name, value)
    if "\n" in text or "\0" in text:
        raise BadInput(f"{where}: {name}'s value must be one line")
    if text.startswith("-") and not NEGATIVE_RE.match(text):
        # redis-server reads an argument starting with -- as a setting of its own (after
        # --save, in 7.x too), and a lone - as "read the config from stdin": save="--dir
        # /tmp" moved the server's directory.
        raise BadInput(
            f"{where}: {name}'s value {text[:40]!r} starts with '-': redis-server would read "
            "it as a setting of its own; give a negative number or a value without it"
        )
    return Setting(name, text, optional)


def parse_option(text: str) -> Setting:
    """``--server-config KEY=VALUE`` (``KEY?=VALUE``: optional)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise BadInput(
            f"--server-config {text!r}: give KEY=VALUE, e.g. --server-config appendonly=yes"
        )
    return setting(key, value, "--server-config")


def from_table(table: Mapping[str, Any], where: str) -> list[Setting]:
    """A workload file's ``[server]`` table."""
    return [setting(str(k), v, f"{where} [server]") for k, v in table.items()]


def combine(file: Iterable[Setting], options: Iterable[Setting]) -> list[Setting]:
    """The file's settings, then ``--server-config`` ones; the later of one name wins."""
    out: dict[str, Setting] = {}
    for s in [*file, *options]:
        out.pop(s.name, None)
        out[s.name] = s
    return list(out.values())


def as_table(settings: Iterable[Setting]) -> dict[str, str]:
    """What a run stores and shows: {"appendonly": "yes", "io-threads?": "4"}."""
    return {s.key: s.value for s in settings}


def from_stored(table: Mapping[str, str] | None) -> list[Setting]:
    return [setting(k, v, "stored run") for k, v in (table or {}).items()]


def argv(settings: Iterable[Setting]) -> list[str]:
    """redis-server arguments, after regtrack's own (the last of one name wins)."""
    return [arg for s in settings for arg in s.argv()]


def persistent(settings: Iterable[Setting]) -> bool:
    """Whether these settings make the server write its data to disk (AOF or RDB)."""
    by_name = {s.name: s.value.strip().lower() for s in settings}
    return by_name.get("appendonly") == "yes" or by_name.get("save", "").strip('" ') != ""


def io_threads(settings: Iterable[Setting]) -> int:
    """The server threads these settings ask for (1 without io-threads)."""
    for s in settings:
        if s.name == "io-threads":
            try:
                return max(1, int(s.value))
            except ValueError:
                raise BadInput(f"io-threads {s.value!r}: give a number of threads") from None
    return 1


def skipped(table: Mapping[str, str] | None, applied: Mapping[str, str] | None) -> list[str]:
    """The settings of a run's ``table`` that one version ran without (optional ones it
    did not know); ``applied`` None: a version stored before settings were, ran with all."""
    if applied is None:
        return []
    names = {k.removesuffix("?") for k in applied}
    return [k.removesuffix("?") for k in table or {} if k.removesuffix("?") not in names]


def caption(
    table: Mapping[str, Any] | None,
    data: Mapping[str, Any] | None = None,
    without: Mapping[str, list[str]] | None = None,
    quote: Callable[[object], str] = printable,
) -> str:
    """One line for every output: "server: appendonly yes, appendfsync everysec; data on
    ext4 (/)"; a tmpfs is labelled, since it hides the cost of fsync; ``without`` names
    the versions that ran without an optional setting, since they were not run alike.
    Every name and value is stored text (a crafted database chooses it): ``quote`` shows
    each as text in the output's format (Markdown passes its own)."""
    if not table:
        return "server: defaults (no persistence)"
    text = "server: " + ", ".join(
        f"{quote(str(k).removesuffix('?'))} {quote(v)}" for k, v in table.items()
    )
    for label, names in (without or {}).items():
        if names:
            shown = ", ".join(quote(n) for n in names)
            text += f"; {quote(label)} ran without {shown} (optional, unknown to it)"
    if data and data.get("persistent"):
        text += f"; data on {quote(data.get('filesystem'))} ({quote(data.get('mount'))})"
        if data.get("filesystem") == "tmpfs":
            text += ": a tmpfs, fsync costs nothing here"
    return text
