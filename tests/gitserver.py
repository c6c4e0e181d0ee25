"""A real git HTTP server on loopback that requires basic auth: git's dumb protocol (the
bare repository's files, after ``git update-server-info``) behind a handler that checks
the Authorization header, and that can hold one request so a clone or fetch stands still
while a test looks at the processes running it."""

from __future__ import annotations

import base64
import contextlib
import functools
import http.server
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from tests.fakerepo import git, make_repo

REPO = "r.git"


class _Handler(http.server.SimpleHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != self.server.expected:
            self.server.refused += 1
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="regtrack test"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.server.served.append(self.path)
        if self.path.startswith(f"/{REPO}/info/refs") and self.server.armed:
            self.server.armed = False
            self.server.held.set()
            self.server.release.wait(timeout=120)
        super().do_GET()

    do_HEAD = do_GET

    def log_message(self, *args: object) -> None:
        pass  # quiet: pytest shows a failing test's own output


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    expected = ""
    refused = 0
    armed = False

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.served: list[str] = []
        self.held = threading.Event()
        self.release = threading.Event()
        self.dropped = 0

    def handle_error(self, request, client_address) -> None:
        # A client that hangs up mid-answer (a test killing its clone) is counted, not a
        # traceback on stderr; any other error is still printed.
        if isinstance(sys.exc_info()[1], ConnectionError):
            self.dropped += 1
            return
        super().handle_error(request, client_address)


class AuthGitServer:
    """A bare repository (fakerepo's tags and branch) served at ``url(userinfo)``; only
    requests carrying ``user:password`` as basic auth get an answer."""

    def __init__(self, root: Path, user: str, password: str) -> None:
        self.work = root / "work"
        self.commits = make_repo(self.work)
        self.bare = root / "served" / REPO
        self.bare.parent.mkdir(parents=True)
        git(root, "clone", "-q", "--bare", str(self.work), str(self.bare))
        git(self.bare, "update-server-info")
        handler = functools.partial(_Handler, directory=str(self.bare.parent))
        self._server = _Server(("127.0.0.1", 0), handler)
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        self._server.expected = f"Basic {token}"
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def url(self, userinfo: str = "") -> str:
        return f"http://{userinfo + '@' if userinfo else ''}127.0.0.1:{self.port}/{REPO}"

    @property
    def served(self) -> list[str]:
        """Paths answered with the right credentials."""
        return self._server.served

    @property
    def refused(self) -> int:
        return self._server.refused

    def publish(self, tag: str, commit: str) -> None:
        """A new tag in the served repository (for a later fetch to find)."""
        git(self.bare, "tag", tag, commit)
        git(self.bare, "update-server-info")

    @contextlib.contextmanager
    def holding(self) -> Iterator[threading.Event]:
        """The next authorised ref listing waits until the block ends; the event yielded
        is set once it waits (a clone or fetch is then mid-way)."""
        self._server.held.clear()
        self._server.release.clear()
        self._server.armed = True
        try:
            yield self._server.held
        finally:
            self._server.armed = False
            self._server.release.set()

    def close(self) -> None:
        self._server.release.set()
        self._server.shutdown()
        self._server.server_close()


def command_lines() -> dict[int, str]:
    """Every process's command line on this machine, as any local user reads it."""
    found = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                raw = Path(entry.path, "cmdline").read_bytes()
                found[int(entry.name)] = raw.replace(b"\0", b" ").decode(errors="replace")
    return found


def files_holding(root: Path, secret: str) -> list[Path]:
    """Files below ``root`` whose bytes or names hold ``secret``."""

    def holds(path: Path) -> bool:
        if secret in path.name:
            return True
        return path.is_file() and not path.is_symlink() and secret.encode() in path.read_bytes()

    return [path for path in root.rglob("*") if holds(path)]
