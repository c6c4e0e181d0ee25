"""`regtrack github comment`: the gate's verdict as one pull-request comment, edited in
place on every push (the GitHub Action's last step, action.yml)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from regtrack.cli.options import cli
from regtrack.core.errors import BadInput

if TYPE_CHECKING:
    from regtrack.github.api import PullRequest
    from regtrack.output.github_comment import CommentContext

GITHUB_EXIT_CODES = """
Exit codes: 0 the comment was created or updated, or there is no pull request to comment
on (said on stderr); 2 bad usage or input (no token, no repository, an unreadable event
or ci JSON); 3 the GitHub API could not be reached or refused (the line says which call
and why); 4 internal error (a bug in regtrack).
"""
DEFAULT_AUTHOR = "github-actions[bot]"


@cli.group()
def github() -> None:
    """Report to GitHub: the pull-request comment of the GitHub Action (docs/ci.md)."""


@github.command("comment", epilog=GITHUB_EXIT_CODES)
@click.option(
    "--json",
    "json_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The verdict: `regtrack ci --json FILE`'s file.",
)
@click.option(
    "--exit-code",
    type=int,
    help="`regtrack ci`'s exit code: when it wrote no JSON, the comment says it ended "
    "without a verdict (and why) instead of failing.",
)
@click.option(
    "--comment-id",
    default="",
    help="Tells this gate's comment from another gate's on the same pull request.",
)
@click.option(
    "--author",
    default=DEFAULT_AUTHOR,
    show_default=True,
    help="Only a comment by this login is edited ('' for any): who the token posts as.",
)
@click.option(
    "--pull-request",
    "number",
    type=click.IntRange(min=1),
    help="The pull request's number. Default: from the event ($GITHUB_EVENT_PATH).",
)
@click.option("--artifact", help="The artifact that holds the report, named in the comment.")
def comment(
    json_path: Path,
    exit_code: int | None,
    comment_id: str,
    author: str,
    number: int | None,
    artifact: str | None,
) -> None:
    """Create or update the pull request's regtrack comment from ci's JSON.

    Reads $GITHUB_REPOSITORY, $GITHUB_EVENT_PATH (a pull_request event), $GITHUB_API_URL
    (default https://api.github.com) and the token from $GITHUB_TOKEN, which is never
    printed or stored. Not a pull request: says so, posts nothing, exits 0.
    """
    from regtrack.github import api as github_api
    from regtrack.output import github_comment

    event = _event()
    pr = _pull_request(number, event)
    if pr is None:
        what = os.environ.get("GITHUB_EVENT_NAME") or "no GitHub event"
        click.echo(f"regtrack: not a pull request event ({what}): no comment posted", err=True)
        return
    if json_path.exists() or exit_code is None:
        verdict: github_comment.CiVerdict | None = github_comment.CiVerdict.read(json_path)
    else:
        verdict = None  # ci ended before its verdict: the comment says so
    body = github_comment.comment_body(verdict, _context(comment_id, artifact, exit_code, event))
    api = github_api.GitHubApi(
        os.environ.get("GITHUB_API_URL") or github_api.DEFAULT_API_URL,
        os.environ.get("GITHUB_TOKEN", ""),
    )
    posted = github_api.upsert_comment(
        api, pr, body, github_comment.marker(comment_id), author or None
    )
    where = posted.comment.url or f"comment {posted.comment.id}"
    click.echo(f"regtrack: {posted.action} the comment on {pr.repository}#{pr.number}: {where}")
    _step_outputs({"comment-id": str(posted.comment.id), "comment-url": posted.comment.url})


@dataclass(frozen=True)
class Event:
    """What the comment needs of the event that started the job: the pull request it is
    about (a pull_request(_target) event, or an issue_comment on a pull request) and the
    pull request's head commit."""

    pull_number: int | None = None
    head_sha: str | None = None

    @classmethod
    def of(cls, event: dict[str, Any]) -> Event:
        pull, issue = event.get("pull_request"), event.get("issue")
        number = None
        if isinstance(pull, dict) and isinstance(pull.get("number"), int):
            number = pull["number"]
        elif isinstance(issue, dict) and issue.get("pull_request"):
            number = issue.get("number") if isinstance(issue.get("number"), int) else None
        head = (pull if isinstance(pull, dict) else {}).get("head")
        sha = head.get("sha") if isinstance(head, dict) else None
        return cls(number, str(sha) if sha else None)


def _event() -> Event:
    """The event that started the job ($GITHUB_EVENT_PATH), empty outside GitHub Actions."""
    path = os.environ.get("GITHUB_EVENT_PATH")
    if not path:
        return Event()
    try:
        event = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise BadInput(f"GITHUB_EVENT_PATH {path}: not a readable event ({exc})") from None
    if not isinstance(event, dict):
        raise BadInput(f"GITHUB_EVENT_PATH {path}: not an event object")
    return Event.of(event)


def _pull_request(number: int | None, event: Event) -> PullRequest | None:
    """The pull request the job runs for: --pull-request, else the event's; None when the
    event is not about one."""
    from regtrack.github.api import PullRequest

    repository = os.environ.get("GITHUB_REPOSITORY", "")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repository):
        raise BadInput(f"GITHUB_REPOSITORY {repository!r} is not owner/name")
    number = event.pull_number if number is None else number
    return None if number is None else PullRequest(repository, number)


def _context(
    comment_id: str, artifact: str | None, exit_code: int | None, event: Event
) -> CommentContext:
    """The comment's last line: the run, its artifact, the commit measured (the pull
    request's head: GITHUB_SHA is the merge commit on pull_request events)."""
    from regtrack.output.github_comment import CommentContext

    server = os.environ.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    repository, run_id = os.environ.get("GITHUB_REPOSITORY"), os.environ.get("GITHUB_RUN_ID")
    run_url = f"{server}/{repository}/actions/runs/{run_id}" if repository and run_id else None
    return CommentContext(
        comment_id=comment_id,
        run_url=run_url,
        artifact=artifact,
        commit=event.head_sha or os.environ.get("GITHUB_SHA") or None,
        exit_code=exit_code,
    )


def _step_outputs(values: dict[str, str]) -> None:
    """The step's outputs, where GitHub Actions reads them ($GITHUB_OUTPUT)."""
    from regtrack.core import writes

    path = os.environ.get("GITHUB_OUTPUT")
    if path:
        lines = "".join(f"{key}={value}\n" for key, value in values.items())
        writes.append_text(path, lines, "step output file")
