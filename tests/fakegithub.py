"""The GitHub REST API's issue-comment calls, served on loopback (http.server in a
thread), standing in for api.github.com: list a pull request's comments (in pages, with
GitHub's Link header), create one, edit one. Every request is recorded with its
Authorization header, so a test can check the token was sent, and sent only here."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

BOT = "github-actions[bot]"


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    authorization: str | None
    body: Any


@dataclass
class FakeGitHub:
    """Comments by pull request ("owner/name#N" -> list), the requests seen, and what to
    answer instead (``refuse``: a status for every call; ``fail_first``: that many 500s)."""

    token: str
    page_size: int = 30
    comments: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    refuse: tuple[int, str] | None = None
    fail_first: int = 0
    next_host: str | None = None  # a Link to another host (must not be followed)
    url: str = ""
    _ids: int = 1000

    def add(self, repo: str, number: int, body: str, author: str = BOT) -> dict[str, Any]:
        self._ids += 1
        comment = {
            "id": self._ids, "body": body, "user": {"login": author},
            "html_url": f"https://github.com/{repo}/pull/{number}#issuecomment-{self._ids}",
        }  # fmt: skip
        self.comments.setdefault(f"{repo}#{number}", []).append(comment)
        return comment

    def calls(self, method: str) -> list[Request]:
        return [r for r in self.requests if r.method == method]

    def handle(self, method: str, raw_path: str, auth: str | None, body: Any) -> tuple:
        """(status, JSON answer, extra headers) for one request."""
        url = urlsplit(raw_path)
        self.requests.append(Request(method, url.path, parse_qs(url.query), auth, body))
        if auth != f"Bearer {self.token}":
            return 401, {"message": "Bad credentials"}, {}
        if self.fail_first > 0:
            self.fail_first -= 1
            return 502, {"message": "Server Error"}, {}
        if self.refuse:
            return self.refuse[0], {"message": self.refuse[1]}, {}
        if m := re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/(\d+)/comments", url.path):
            key = f"{m.group(1)}#{m.group(2)}"
            if method == "GET":
                return self._page(key, url.path, parse_qs(url.query))
            if method == "POST":
                return 201, self.add(m.group(1), int(m.group(2)), body["body"]), {}
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/comments/(\d+)", url.path)
        if m and method == "PATCH":
            for comment in (c for cs in self.comments.values() for c in cs):
                if comment["id"] == int(m.group(2)):
                    comment["body"] = body["body"]
                    return 200, comment, {}
        return 404, {"message": "Not Found"}, {}

    def _page(self, key: str, path: str, query: dict[str, list[str]]) -> tuple:
        every = self.comments.get(key, [])
        size = min(self.page_size, int(query.get("per_page", ["30"])[0]))
        page = int(query.get("page", ["1"])[0])
        chunk = every[(page - 1) * size : page * size]
        headers = {}
        if page * size < len(every):
            host = self.next_host or self.url
            headers["Link"] = f'<{host}{path}?per_page={size}&page={page + 1}>; rel="next"'
        return 200, chunk, headers


@contextmanager
def serve(fake: FakeGitHub) -> Iterator[FakeGitHub]:
    """The fake on a free loopback port for the block's duration (fake.url is its root)."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            status, data, headers = fake.handle(
                self.command, self.path, self.headers.get("Authorization"), body
            )
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PATCH = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
