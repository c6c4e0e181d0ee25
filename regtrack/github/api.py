"""The few GitHub REST calls the pull-request comment needs: list a pull request's
comments (every page), create one, edit one. Standard library only (urllib).

The token goes in one header to one host: the API's own. It is never printed, stored or
put in an error message, is not sent over plain HTTP except to this machine (loopback,
for tests), and redirects are not followed (urllib would carry the header to wherever
they point); a next-page link to another host is refused.
"""

from __future__ import annotations

import ipaddress
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Literal

from regtrack import __version__
from regtrack.core.errors import EXIT_CANNOT_MEASURE, BadInput, RegtrackError

DEFAULT_API_URL = "https://api.github.com"
PER_PAGE = 100
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="next"')


class GitHubApiError(RegtrackError):
    """GitHub could not be reached, or refused or failed a call (exit 3: the
    environment failed, as for a tool that would not run)."""

    exit_code = EXIT_CANNOT_MEASURE


@dataclass(frozen=True)
class PullRequest:
    """owner/name and the pull request's number."""

    repository: str
    number: int


@dataclass(frozen=True)
class IssueComment:
    id: int
    body: str
    author: str
    url: str


@dataclass(frozen=True)
class Posted:
    """What was done: a comment created or edited in place."""

    action: Literal["created", "updated"]
    comment: IssueComment


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # urllib then raises HTTPError with the 3xx status


@dataclass
class GitHubApi:
    """A client of one GitHub API root with one token."""

    base_url: str
    token: str = field(repr=False)
    timeout_s: float = 30.0
    # Pauses before retrying a GET or PATCH that met a 5xx or no answer; a POST is never
    # retried (it may have created the comment).
    retry_delays_s: tuple[float, ...] = (1.0, 4.0)

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        url = urllib.parse.urlsplit(self.base_url)
        if url.scheme not in ("https", "http") or not url.hostname:
            raise BadInput(f"GITHUB_API_URL {self.base_url!r} is not an http(s) URL")
        if url.scheme == "http" and not _loopback(url.hostname):
            raise BadInput(
                f"GITHUB_API_URL {self.base_url!r}: the token is sent over HTTPS only "
                "(plain HTTP only to this machine)"
            )
        if not self.token:
            raise BadInput(
                "no GitHub token: set GITHUB_TOKEN (the action passes its github-token "
                "input, by default the job's token)"
            )
        self._opener = urllib.request.build_opener(_NoRedirects)

    def comments(self, pr: PullRequest) -> list[IssueComment]:
        """Every comment of the pull request's conversation, following the pages."""
        url: str | None = (
            f"{self.base_url}/repos/{pr.repository}/issues/{pr.number}/comments?per_page={PER_PAGE}"
        )
        found: list[IssueComment] = []
        while url is not None:
            data, headers = self._call("GET", url)
            if not isinstance(data, list):
                raise GitHubApiError(f"GitHub's list of comments of {_name(pr)} is not a list")
            found += [_comment(c) for c in data]
            url = self._next_page(headers.get("Link", ""))
        return found

    def create_comment(self, pr: PullRequest, body: str) -> IssueComment:
        url = f"{self.base_url}/repos/{pr.repository}/issues/{pr.number}/comments"
        data, _ = self._call("POST", url, {"body": body})
        return _comment(data)

    def update_comment(self, repository: str, comment_id: int, body: str) -> IssueComment:
        url = f"{self.base_url}/repos/{repository}/issues/comments/{comment_id}"
        data, _ = self._call("PATCH", url, {"body": body})
        return _comment(data)

    def _next_page(self, link: str) -> str | None:
        """The Link header's next page, only on the API's own host."""
        match = _NEXT.search(link)
        if match is None:
            return None
        url = match.group(1)
        if _origin(url) != _origin(self.base_url):
            raise GitHubApiError(
                f"GitHub's next page of comments is on another host ({_origin(url)}): "
                "not following it with the token"
            )
        return url

    def _call(
        self, method: str, url: str, payload: dict[str, Any] | None = None
    ) -> tuple[Any, Any]:
        """One call, retried where that is safe; its JSON and headers."""
        retries = () if method == "POST" else self.retry_delays_s
        for attempt in range(len(retries) + 1):
            try:
                return self._once(method, url, payload)
            except _Transient as exc:
                if attempt == len(retries):
                    tries = f" (tried {attempt + 1} times)" if attempt else ""
                    raise GitHubApiError(f"{exc}{tries}") from None
                time.sleep(retries[attempt])
        raise AssertionError("unreachable")

    def _once(self, method: str, url: str, payload: dict[str, Any] | None) -> tuple[Any, Any]:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/vnd.github+json")
        request.add_header("X-GitHub-Api-Version", "2022-11-28")
        request.add_header("User-Agent", f"regtrack/{__version__}")
        request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        what = f"{method} {urllib.parse.urlsplit(url).path}"
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                text = response.read().decode("utf-8", "replace")
                headers = response.headers
        except urllib.error.HTTPError as exc:
            message = self._scrub(_message(exc))
            if exc.code >= 500:
                raise _Transient(f"GitHub API {what}: HTTP {exc.code} {message}") from None
            raise GitHubApiError(_refusal(what, exc.code, message)) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise _Transient(
                f"could not reach the GitHub API at {self.base_url} ({what}): {reason}"
            ) from None
        try:
            return json.loads(text), headers
        except json.JSONDecodeError:
            raise GitHubApiError(f"GitHub API {what}: the answer is not JSON") from None

    def _scrub(self, text: str) -> str:
        return text.replace(self.token, "***") if self.token else text


class _Transient(Exception):
    """A failure another try may not meet (5xx, no answer)."""


def upsert_comment(
    api: GitHubApi, pr: PullRequest, body: str, marker: str, author: str | None
) -> Posted:
    """Edit the pull request's comment whose first line is ``marker`` (by ``author``,
    when given), or create it: one comment per pull request, however many pushes."""
    mine = [
        c
        for c in api.comments(pr)
        if c.body.split("\n", 1)[0].strip() == marker and (not author or c.author == author)
    ]
    if mine:
        return Posted("updated", api.update_comment(pr.repository, mine[0].id, body))
    return Posted("created", api.create_comment(pr, body))


def _comment(data: Any) -> IssueComment:
    try:
        return IssueComment(
            id=int(data["id"]),
            body=str(data.get("body") or ""),
            author=str((data.get("user") or {}).get("login") or ""),
            url=str(data.get("html_url") or ""),
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        raise GitHubApiError("GitHub answered with a comment without an id") from None


def _message(exc: urllib.error.HTTPError) -> str:
    """GitHub's own words for a refusal ("Resource not accessible by integration")."""
    try:
        body = json.loads(exc.read().decode("utf-8", "replace"))
        return str(body.get("message") or exc.reason)
    except (ValueError, AttributeError, OSError):
        return str(exc.reason)


def _refusal(what: str, code: int, message: str) -> str:
    hint = {
        401: "the token is not valid (expired, or not the job's)",
        403: "the token may not write pull-request comments: give the job `permissions: "
        "pull-requests: write` (a pull request from a fork gets a read-only token on "
        "`pull_request` events; see docs/ci.md, GitHub Action)",
        404: "no such repository, pull request or comment, or the token cannot see it",
    }.get(code, "")
    if 300 <= code < 400:
        hint = "a redirect, not followed with the token: check GITHUB_API_URL"
    return f"GitHub API {what}: HTTP {code} {message}" + (f": {hint}" if hint else "")


def _origin(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme, parts.netloc.lower()


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _name(pr: PullRequest) -> str:
    return f"{pr.repository}#{pr.number}"
