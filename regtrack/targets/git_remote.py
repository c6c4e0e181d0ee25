"""How a source repository's URL reaches git: its credentials never on a command line.

Every local user reads every process's command line (/proc/PID/cmdline), and git hands
the URL it is given to ``git-remote-http`` as an argument. So the userinfo of an http(s)
URL (``user:TOKEN@`` or a lone ``TOKEN@``) is taken out of the URL git sees and given to
git by a credential helper that prints it from git's own environment, which only its
owner can read. The helper is configured with ``-c`` (portable to every git; its text
names the variables, never their values) after an empty ``credential.helper`` that drops
the user's own helpers, so that no ``store`` helper writes the token to a file and no
other helper answers in its place. It answers only for the URL's own host.

A query string cannot be kept off git-remote-http's command line, so a URL with one is
refused; so is a password in any other kind of URL (ssh takes keys).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import unquote

from regtrack.core import redact
from regtrack.core.errors import BadInput

CREDENTIAL_SCHEMES = ("http", "https", "ftp", "ftps")
USERNAME, PASSWORD, HOST = "REGTRACK_GIT_USERNAME", "REGTRACK_GIT_PASSWORD", "REGTRACK_GIT_HOST"

# git runs a helper starting with "!" through the shell with the action appended ("get",
# "store", "erase"), writes the request (protocol=, host=, ...) to its stdin and reads
# username= and password= back. printf is the shell's own: no process has them as argv.
HELPER = (
    '!f() { test "$1" = get || return 0; h=; '
    'while IFS= read -r l; do case "$l" in host=*) h="${l#host=}";; esac; done; '
    f'test "$h" = "${HOST}" || return 0; '
    f'printf \'username=%s\\npassword=%s\\n\' "${USERNAME}" "${PASSWORD}"; }}; f'
)


@dataclass(frozen=True)
class Remote:
    """A URL as git's command line may show it, and what git needs besides to use it."""

    url: str
    config: tuple[str, ...] = ()  # "name=value" for git -c: never a secret
    env: dict[str, str] = field(default_factory=dict)  # the secrets, for git's environment

    def argv(self, *args: str) -> list[str]:
        """git's arguments: the helper's configuration first, then ``args``."""
        return [arg for item in self.config for arg in ("-c", item)] + list(args)


def remote(location: str) -> Remote:
    """How git reaches ``location`` (a URL as the user gave it, or a local path)."""
    if "://" not in location:
        return Remote(location)  # a local path, or scp-like git@host:path (ssh keys)
    scheme, userinfo, hostpart, query = redact.parts(location)
    if query or "?" in location:
        raise BadInput(
            f"--source-repo {redact.url(location)}: a query string would reach git's command "
            "line, which every local user can read; give a token as "
            "https://USER:TOKEN@HOST/PATH (git gets it from its environment)"
        )
    if not userinfo:
        return Remote(location)
    if scheme.lower() not in CREDENTIAL_SCHEMES:
        if ":" in userinfo:
            raise BadInput(
                f"--source-repo {redact.url(location)}: a password in a {scheme} URL would "
                "reach git's command line; use an ssh key, or an https URL with the token"
            )
        return Remote(location)  # ssh://git@host/...: a user name, not a secret
    name, _, password = userinfo.partition(":")
    host = re.split(r"[/#]", hostpart, maxsplit=1)[0]
    return Remote(
        url=f"{scheme}://{hostpart}",
        config=("credential.helper=", f"credential.helper={HELPER}"),
        env={USERNAME: unquote(name), PASSWORD: unquote(password), HOST: host},
    )
