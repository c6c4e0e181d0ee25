"""Who may do what on a benchmark server: regtrack administers it, anyone else only loads it.

A benchmark server listens on 127.0.0.1, which every local user can reach. Unguarded,
``CONFIG SET dir`` plus a write turns that into code execution as regtrack's user, root in
CI. So every server gets two ACL users, declared on its command line:

* ``regtrack``: every command, with a random password made for this server alone and
  held only in this process's memory; the command line carries its SHA-256 (``#...``),
  which cannot be used to log in, so reading ``/proc/PID/cmdline`` gives nothing away;
* ``default`` (no password: load generators connect as it, since redis-benchmark and
  memtier take a password only on their command line, where any local user could read
  it): every command but the ``@admin`` category (CONFIG SET, DEBUG, MODULE, SHUTDOWN,
  REPLICAOF, ACL, SAVE...), except ``CONFIG GET``, which redis-benchmark asks for at
  start-up (a refusal would count as an error reply in the trial).

Redis 6.0 has no channel rules (``&*``) and Redis before 6.0 no ACL at all: a server that
refuses the declaration at start-up is started again with the next weaker variant, and the
last one (``open``) is recorded with the server, so the run can say so.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field

ADMIN_USER = "regtrack"
LEVELS = ("acl", "acl-no-channels", "open")  # strongest first
# What a server's log says when it does not know a part of the declaration.
_REFUSALS = ("Error in user declaration", "Bad directive", "Unrecognized option")


@dataclass(frozen=True)
class Access:
    """How regtrack's control connections log in to one server (``level``: see LEVELS;
    the default, ``open``, is a server without users, as regtrack did not start it)."""

    level: str = "open"
    password: str | None = field(default=None, repr=False)

    @property
    def username(self) -> str | None:
        return ADMIN_USER if self.level != "open" else None

    def server_args(self) -> list[str]:
        """redis-server arguments that declare the users (no secret among them)."""
        if self.level == "open" or self.password is None:
            return []
        digest = hashlib.sha256(self.password.encode()).hexdigest()
        channels = ["&*"] if self.level == "acl" else []
        return [
            "--user", ADMIN_USER, "on", f"#{digest}", "~*", *channels, "+@all",
            "--user", "default", "on", "nopass", "~*", *channels, "+@all", "-@admin",
            "+config|get",
        ]  # fmt: skip


def new(level: str = "acl") -> Access:
    """A fresh declaration of ``level`` with a password of its own (none for ``open``)."""
    return Access(level, None if level == "open" else secrets.token_urlsafe(24))


def weaker(access: Access, log: str) -> Access | None:
    """The next variant to start with when the server refused ``access`` (its ``log``
    names the declaration), or None when the failure is something else."""
    if access.level == "open" or not any(text in log for text in _REFUSALS):
        return None
    return new(LEVELS[LEVELS.index(access.level) + 1])
