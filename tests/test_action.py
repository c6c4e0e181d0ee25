"""The GitHub Action (action.yml) and its pull-request comment.

The action's own steps run as the runner runs them (tests/actionrun.py: bash, expressions,
conditions, outputs) against a loopback stand-in for the GitHub API (tests/fakegithub.py),
from a recorded pull_request event. `regtrack` is the real command line with the measuring
edge modelled (tests/fake_regtrack.py, tests/fakebench.py), so a job takes seconds; the
real gate on real builds is test_ci.py. `uses:` steps cannot run here: their `with:` is
checked, and what they would upload or cache is checked to exist.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from regtrack.core.errors import BadInput
from regtrack.github.api import GitHubApi, GitHubApiError, PullRequest
from regtrack.output.answer_text import change_text
from regtrack.output.github_comment import (
    MAX_BODY,
    CiVerdict,
    CommentContext,
    comment_body,
    marker,
)
from tests import fakegithub
from tests.actionrun import ActionRun, job_env, run_action
from tests.conftest import ARTIFACTS, FIXTURES, cli_in_process, redis_server_path

ROOT = Path(__file__).resolve().parent.parent
ACTION = ROOT / "action.yml"
EVENT = json.loads((FIXTURES / "github" / "pull_request.json").read_text())
REPO, NUMBER = "acme/queue", 42
# Shaped like a GitHub token and found nowhere else: if it is ever printed, a test sees it.
TOKEN = "ghs_regtrackTestTokenN0tAR3alOne0123456"
SLOWER = {"throughput": {"a": 400_000.0, "b": 360_000.0}}  # the candidate 10% slower
EQUAL: dict[str, Any] = {}
INPUTS = {
    "metric": "throughput",
    "threshold": "10",
    "budget": "1m",
    "args": "--pipelines 10 --max-repetitions 8",
}


@dataclass
class Job:
    """One repository's jobs on one runner: a workspace, the action, the fake API."""

    tmp: Path
    api: fakegithub.FakeGitHub
    action: Path = ACTION
    runs: int = 0
    home: Path | None = None  # the last job's folder

    def run(
        self,
        model: dict[str, Any],
        head_sha: str = EVENT["pull_request"]["head"]["sha"],
        event_name: str = "pull_request",
        stop_after: str | None = None,
        **inputs: str,
    ) -> ActionRun:
        """One job: the action with these inputs for a push of ``head_sha``."""
        self.runs += 1
        home = self.home = self.tmp / f"job-{self.runs}"
        workspace, temp = home / "workspace", home / "runner-temp"
        workspace.mkdir(parents=True)
        temp.mkdir()
        event = copy.deepcopy(EVENT)
        event["pull_request"]["head"]["sha"] = event["after"] = head_sha
        if event_name == "push":  # a push's event has no pull request
            event = {"ref": "refs/heads/main", "after": head_sha, "repository": EVENT["repository"]}
        event_path = home / "event.json"
        event_path.write_text(json.dumps(event))
        github = {
            "action_path": str(self.action.parent), "token": TOKEN, "event": event,
            "event_name": event_name, "event_path": str(event_path), "repository": REPO,
            "run_id": 9000 + self.runs, "run_attempt": 1, "server_url": "https://github.com",
            "api_url": self.api.url, "workspace": str(workspace), "sha": "f" * 40,
        }  # fmt: skip
        runner = {"os": "Linux", "arch": "X64", "temp": str(temp)}
        env = job_env(github, runner, {
            "PATH": f"{shim(self.tmp)}:{os.environ.get('PATH', '')}",
            "PYTHONPATH": str(ROOT),
            "REGTRACK_FAKE_MODEL": json.dumps(model),
            "REGTRACK_CACHE": str(self.tmp / "cache"),
            "GITHUB_STEP_SUMMARY": str(home / "step-summary.md"),
        })  # fmt: skip
        server = redis_server_path()
        given = {"baseline": f"a=bin:{server}", "candidate": f"b=bin:{server}", **INPUTS, **inputs}
        return run_action(self.action, given, github, runner, env, home / "steps",
                          stop_after=stop_after)  # fmt: skip


def shim(folder: Path) -> Path:
    """A folder whose `regtrack` runs tests/fake_regtrack.py (the real CLI, modelled
    trials), to put first on PATH: the action finds regtrack installed."""
    bin_dir = folder / "shim-bin"
    if not bin_dir.exists():
        bin_dir.mkdir()
        script = bin_dir / "regtrack"
        script.write_text(
            f'#!/bin/bash\nexec "{sys.executable}" "{ROOT / "tests" / "fake_regtrack.py"}" "$@"\n'
        )
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir


@pytest.fixture
def job(tmp_path) -> Any:
    with fakegithub.serve(fakegithub.FakeGitHub(token=TOKEN)) as api:
        yield Job(tmp_path, api)


def _no_token_anywhere(run: ActionRun, *files: Path) -> None:
    assert TOKEN not in run.printed(), "the token was printed"
    for path in files:
        for f in [path] if path.is_file() else path.rglob("*"):
            if f.is_file():
                assert TOKEN.encode() not in f.read_bytes(), f"the token is stored in {f}"


# --- the action, run step by step --------------------------------------------------------


def test_one_comment_kept_up_to_date_and_a_regression_fails_the_job(job):
    """A first push creates the comment; a later push edits it (no second POST); a slower
    candidate fails the ci step (the job fails) and still updates the comment and leaves
    the report where the artifact step uploads it; a push whose ci wrote no verdict
    replaces the verdict with the reason, so no stale one stays on the pull request."""
    first = job.run(EQUAL)
    assert not first.failed, first.printed()
    assert first.step("setup").outputs["install"] == "false", "regtrack is on PATH: no install"
    install = next(s for s in first.steps if s.name.startswith("Install regtrack"))
    assert install.outcome == "skipped"
    assert first.outputs["exit-code"] == "0" and first.outputs["outcome"] == "no regression"
    assert [r.method for r in job.api.requests] == ["GET", "POST"]
    (posted,) = job.api.comments[f"{REPO}#{NUMBER}"]
    body = posted["body"]
    assert body.startswith("<!-- regtrack:ci -->\n## regtrack: ✅ No regression"), body
    assert "| | gating metric | over | blocks | change [interval] and verdict | threshold |" in body
    assert "| ✅ | throughput | pipeline=10 |" in body and "no change | ±10% |" in body
    assert "measured at 5d2b8c0e7f1a" in body and "artifact `regtrack`" in body
    assert first.outputs["comment-url"] == posted["html_url"]
    _caches_and_upload(first, job.tmp / "cache")

    later = job.run(EQUAL, head_sha="7" * 40)
    assert not later.failed, later.printed()
    assert [r.method for r in job.api.requests] == ["GET", "POST", "GET", "PATCH"]
    (edited,) = job.api.comments[f"{REPO}#{NUMBER}"]
    assert edited["id"] == posted["id"] and "measured at 777777777777" in edited["body"]

    slower = job.run(SLOWER, head_sha="8" * 40)
    assert slower.failed, "a regression fails the job"
    ci = slower.step("ci")
    assert ci.outcome == "failure" and ci.returncode == 1, ci.stderr
    assert ci.stdout.startswith("::error title=regtrack: regression::throughput -")
    assert slower.outputs["outcome"] == "regression"
    comment = slower.step("comment")
    assert comment.outcome == "success", comment.stderr
    assert [r.method for r in job.api.requests][-2:] == ["GET", "PATCH"]
    (regressed,) = job.api.comments[f"{REPO}#{NUMBER}"]
    assert regressed["body"].startswith("<!-- regtrack:ci -->\n## regtrack: ❌ Regression")
    assert "| ❌ | throughput | pipeline=10 | 4 |" in regressed["body"], regressed["body"]
    (upload,) = slower.uses("actions/upload-artifact")
    assert upload.outcome == "success" and upload.with_["name"] == "regtrack"
    results = Path(upload.with_["path"])
    assert results == Path(slower.outputs["results-dir"])
    for name in ("ci.json", "summary.md", "regtrack.db", "run-1.html", "index.html"):
        assert (results / name).is_file(), f"the artifact step receives {name}"
    assert json.loads((results / "ci.json").read_text())["outcome"] == "regression"
    step_summary = (job.home / "step-summary.md").read_text()
    assert step_summary == (results / "summary.md").read_text(), "the run's page shows it too"
    ARTIFACTS.mkdir(exist_ok=True)  # docs/ci.md quotes a real comment
    (ARTIFACTS / "action-comment.md").write_text(regressed["body"])

    broken = job.run(EQUAL, head_sha="9" * 40, candidate="b=bin:/nonexistent/redis-server")
    assert broken.failed and broken.step("ci").returncode == 2
    (unknown,) = job.api.comments[f"{REPO}#{NUMBER}"]
    assert unknown["body"].startswith(
        "<!-- regtrack:ci -->\n## regtrack: ⛔ No verdict: `regtrack ci` ended with exit 2 "
        "(bad usage or input)"
    ), unknown["body"]
    assert len(job.api.calls("POST")) == 1, "never a new comment per push"

    assert {r.authorization for r in job.api.requests} == {f"Bearer {TOKEN}"}
    for run in (first, later, slower, broken):
        _no_token_anywhere(run, job.tmp)


def _caches_and_upload(run: ActionRun, cache: Path) -> None:
    """Of a test's first job (run id 9001): actions/cache gets Redis sources and builds
    keyed on what is built, ccache on every run (restoring the newest), the Python
    environment only when installing; the upload names the results folder."""
    setup = run.step("setup").outputs
    caches = {s.name: s for s in run.uses("actions/cache")}
    venv = next(s for n, s in caches.items() if "Python environment" in n)
    assert venv.outcome == "skipped", "regtrack installed: its environment is not cached"
    builds = next(s for n, s in caches.items() if "Redis sources" in n)
    assert setup["cache"] == str(cache), "$REGTRACK_CACHE, where regtrack builds"
    assert builds.with_["path"].split() == [setup["cache"], f"!{setup['cache']}/ccache"]
    assert builds.with_["key"] == f"regtrack-redis-Linux-X64-{setup['builds-key']}"
    assert builds.with_["restore-keys"] == "regtrack-redis-Linux-X64-"
    ccache = next(s for n, s in caches.items() if "ccache" in n)
    assert ccache.with_["path"] == f"{setup['cache']}/ccache"
    assert ccache.with_["key"] == "regtrack-ccache-Linux-X64-9001-1"
    assert ccache.with_["restore-keys"] == "regtrack-ccache-Linux-X64-"
    (upload,) = run.uses("actions/upload-artifact")
    assert upload.with_["path"] == setup["results"] and Path(setup["results"]).is_dir()


def test_installing_is_cached_on_the_lock_file(job, tmp_path):
    """install: always runs scripts/install.sh (here a stand-in that installs the shim
    into .venv) and regtrack is then the installed one; the environment's cache key
    changes with uv.lock, and only with what install.sh installs from."""
    action = tmp_path / "action"
    (action / "scripts").mkdir(parents=True)
    shutil.copy(ACTION, action / "action.yml")
    shutil.copy(ROOT / "uv.lock", action / "uv.lock")
    shutil.copy(ROOT / "scripts" / "uv-requirements.txt", action / "scripts")
    install = action / "scripts" / "install.sh"
    install.write_text(
        '#!/bin/bash\nset -e\ncd "$(dirname "$0")/.."\nmkdir -p .venv/bin\n'
        f'cp "{shim(tmp_path)}/regtrack" .venv/bin/regtrack\necho installed\n'
    )
    install.chmod(0o755)
    job.action = action / "action.yml"
    run = job.run(EQUAL, install="always", stop_after="install")
    assert not run.failed, run.printed()
    setup = run.step("setup").outputs
    assert setup["regtrack"] == f"{action.resolve()}/.venv/bin/regtrack"
    assert run.step("install").stdout == "installed\n"
    assert Path(setup["regtrack"]).is_file(), "ci runs the regtrack install.sh installed"
    (venv, *_) = run.uses("actions/cache")
    assert venv.with_["path"].split() == [f"{action.resolve()}/.venv", f"{action.resolve()}/.tools"]
    key = venv.with_["key"]
    assert key == f"regtrack-venv-Linux-X64-{setup['venv-key']}" and len(setup["venv-key"]) == 20

    def key_now() -> str:
        again = job.run(EQUAL, install="always", stop_after="setup")
        return again.step("setup").outputs["venv-key"]

    assert key_now() == setup["venv-key"], "the same lock file: the same environment"
    with (action / "uv.lock").open("a") as f:
        f.write("\n# another lock\n")
    assert key_now() != setup["venv-key"], "a new uv.lock: a new environment"


def test_action_yml_validates_against_the_published_schema(tmp_path):
    """SchemaStore's github-action schema, as check-jsonschema vendors it (offline)."""
    ok = _check_jsonschema(ACTION)
    assert ok.returncode == 0 and "ok -- validation done" in ok.stdout, ok.stdout + ok.stderr
    broken = yaml.safe_load(ACTION.read_text())
    del broken["runs"]["steps"][0]["shell"]  # a composite run step needs its shell
    bad = tmp_path / "action.yml"
    bad.write_text(yaml.safe_dump(broken))
    refused = _check_jsonschema(bad)
    assert refused.returncode == 1, refused.stdout


def _check_jsonschema(path: Path, schema: str = "github-actions") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", f"vendor.{schema}",
         str(path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


# --- the comment's body, from real ci JSON -----------------------------------------------


@pytest.fixture(scope="module")
def ci_outputs(tmp_path_factory) -> tuple[Path, Path]:
    """(ci.json, summary.md) of a modelled gate whose candidate is 10% slower."""
    from tests import fakebench

    folder = tmp_path_factory.mktemp("ci")
    out, summary = folder / "ci.json", folder / "summary.md"
    model = fakebench.Model(**SLOWER)
    server = redis_server_path()
    proc = cli_in_process(
        "ci", "--baseline-version", f"a=bin:{server}", "--candidate-version",
        f"b=bin:{server}", "--metric", "throughput", "--pipelines", "10",
        "--db", str(folder / "r.db"), "--json", str(out), "--summary", str(summary),
        "--no-report", measuring=model,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return out, summary


def test_the_body_says_what_the_step_summary_says(ci_outputs):
    """The headline and each gating answer in the summary's own words (ci_summary and
    tables render both), the marker first, every point folded below."""
    out, summary = ci_outputs
    verdict = CiVerdict.read(out)
    body = comment_body(verdict, CommentContext(artifact="regtrack", commit="ab" * 20))
    lines = body.splitlines()
    assert lines[0] == "<!-- regtrack:ci -->"
    text = summary.read_text()
    assert lines[1] == text.splitlines()[0], "the summary's first line, word for word"
    answer = next(g for g in verdict.gate if g.metric == "throughput")
    assert {g.metric for g in verdict.gate} == {"throughput", "syscalls_per_op"}
    assert f"- **throughput** over pipeline=10 (4 blocks): {change_text(answer)}" in text
    assert f"| ❌ | throughput | pipeline=10 | 4 | {change_text(answer)} | ±5% |" in body
    assert "<details><summary>Every metric and point (4 records)</summary>" in body
    assert "| throughput (ops/s) | pipeline=10 |" in body
    assert "measured at abababababab" in body and "artifact `regtrack`" in body


def test_an_undecided_forced_gate_and_table_cells(ci_outputs):
    out, _ = ci_outputs
    data = json.loads(out.read_text())
    gate = data["gate"][0]
    gate.update(verdict="inconclusive", change_pct=-2.0, ci_low_pct=-8.0, ci_high_pct=4.0,
                mde_pct=7.5)  # fmt: skip
    data["records"][0]["point"] = "mix|a"  # a '|' must not end the cell
    data["records"][0]["trusted"] = False
    data["forced"] = ["clients 10 != 50"]
    body = comment_body(CiVerdict.from_json(data), CommentContext())
    assert (
        "| ⚠️ | throughput | pipeline=10 | 4 | -2.0% [-8.0, +4.0] inconclusive (detectable: " in body
    )
    assert "**FORCED comparison, not like with like: clients 10 != 50**" in body
    assert "| mix\\|a |" in body and "! no valid trial in this cell" in body


def test_a_huge_verdict_stays_under_githubs_limit(ci_outputs):
    out, _ = ci_outputs
    data = json.loads(out.read_text())
    data["records"] = [dict(data["records"][0], point=f"pipeline={i}") for i in range(5000)]
    body = comment_body(CiVerdict.from_json(data), CommentContext())
    assert len(body) <= MAX_BODY
    assert "| ❌ | throughput |" in body and body.rstrip().endswith("</sub>")
    assert "more records are in the artifact's JSON." in body


def test_what_is_not_ci_json_is_refused(tmp_path):
    with pytest.raises(BadInput, match="no such file"):
        CiVerdict.read(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(BadInput, match="not regtrack ci JSON"):
        CiVerdict.read(tmp_path / "bad.json")
    with pytest.raises(BadInput, match="missing or bad 'records'"):
        CiVerdict.from_json({"outcome": "regression"})


def test_markers_tell_gates_apart():
    assert marker() == "<!-- regtrack:ci -->"
    assert marker("streams-queue.7") == "<!-- regtrack:ci:streams-queue.7 -->"
    for bad in ("a-->b", "x y", "a--b", "<b>"):
        with pytest.raises(BadInput):
            marker(bad)


# --- regtrack github comment and the API client, on the loopback API ----------------------


@pytest.fixture
def api() -> Any:
    with fakegithub.serve(fakegithub.FakeGitHub(token=TOKEN)) as fake:
        yield fake


def _comment(api, out: Path, tmp_path: Path, event: dict | None = EVENT, **env: str | None):
    """`regtrack github comment --json OUT` in process, as the action's step runs it."""
    event_path = tmp_path / "event.json"
    event_path.write_text(json.dumps(event))
    variables = {
        "GITHUB_REPOSITORY": REPO, "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_EVENT_NAME": "pull_request", "GITHUB_API_URL": api.url,
        "GITHUB_TOKEN": TOKEN, "GITHUB_RUN_ID": "77", "GITHUB_OUTPUT": None, **env,
    }  # fmt: skip
    proc = cli_in_process("github", "comment", "--json", str(out), env=variables)
    assert TOKEN not in proc.stdout + proc.stderr, "the token was printed"
    return proc


def test_every_page_is_read_to_find_the_comment(api, ci_outputs, tmp_path):
    """GitHub lists comments in pages (Link: rel="next"): the marked comment on the third
    page is edited, not duplicated."""
    api.page_size = 2
    for i in range(5):
        api.add(REPO, NUMBER, f"review comment {i}", author="octo-dev")
    ours = api.add(REPO, NUMBER, f"{marker()}\nan older verdict")
    proc = _comment(api, ci_outputs[0], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [r.method for r in api.requests] == ["GET", "GET", "GET", "PATCH"]
    assert [r.query.get("page", ["1"])[0] for r in api.calls("GET")] == ["1", "2", "3"]
    assert api.calls("PATCH")[0].path == f"/repos/{REPO}/issues/comments/{ours['id']}"
    assert ours["body"].startswith(f"{marker()}\n## regtrack: ❌ Regression")
    assert f"regtrack: updated the comment on {REPO}#{NUMBER}: {ours['html_url']}" in proc.stdout


def test_only_the_bots_own_comment_is_edited(api, ci_outputs, tmp_path):
    """A comment by someone else that starts with the marker is not taken over."""
    theirs = api.add(REPO, NUMBER, f"{marker()}\n## regtrack: ✅ trust me", author="octo-dev")
    other_gate = api.add(REPO, NUMBER, f"{marker('mixes')}\nanother gate's verdict")
    proc = _comment(api, ci_outputs[0], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [r.method for r in api.requests] == ["GET", "POST"]
    assert theirs["body"].endswith("trust me") and other_gate["body"].endswith("verdict")
    assert "regtrack: created the comment" in proc.stdout


def test_a_refusal_is_one_line_and_exit_3(api, ci_outputs, tmp_path):
    """A read-only token (a fork's pull request): one line naming the call, GitHub's
    words and what to do; no traceback; nothing posted."""
    api.refuse = (403, "Resource not accessible by integration")
    proc = _comment(api, ci_outputs[0], tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.splitlines() == [
        f"regtrack: error: GitHub API GET /repos/{REPO}/issues/{NUMBER}/comments: HTTP 403 "
        "Resource not accessible by integration: the token may not write pull-request "
        "comments: give the job `permissions: pull-requests: write` (a pull request from a "
        "fork gets a read-only token on `pull_request` events; see docs/ci.md, GitHub Action)"
    ]
    api.refuse = None
    wrong = _comment(api, ci_outputs[0], tmp_path, GITHUB_TOKEN="ghs_wrong")
    assert wrong.returncode == 3 and "HTTP 401 Bad credentials" in wrong.stderr


def test_no_pull_request_means_no_comment(api, ci_outputs, tmp_path):
    push = {"ref": "refs/heads/main", "after": "1" * 40, "repository": EVENT["repository"]}
    proc = _comment(api, ci_outputs[0], tmp_path, push, GITHUB_EVENT_NAME="push")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "regtrack: not a pull request event (push): no comment posted\n"
    assert not api.requests
    on_pr = {"issue": {"number": 7, "pull_request": {"url": "x"}}}  # issue_comment on a PR
    assert _comment(api, ci_outputs[0], tmp_path, on_pr).returncode == 0
    assert api.calls("POST")[0].path == f"/repos/{REPO}/issues/7/comments"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"GITHUB_TOKEN": None}, "no GitHub token: set GITHUB_TOKEN"),
        ({"GITHUB_REPOSITORY": None}, "GITHUB_REPOSITORY '' is not owner/name"),
        ({"GITHUB_API_URL": "http://api.example.invalid"}, "the token is sent over HTTPS only"),
    ],
)
def test_bad_settings_are_exit_2_before_any_call(api, ci_outputs, tmp_path, env, message):
    proc = _comment(api, ci_outputs[0], tmp_path, EVENT, **env)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not api.requests


def test_the_token_goes_to_the_api_host_only(api):
    """A next-page link elsewhere is refused: the token is not carried there."""
    api.page_size = 1
    api.next_host = "http://127.0.0.2:9"
    for i in range(2):
        api.add(REPO, NUMBER, f"comment {i}", author="octo-dev")
    client = GitHubApi(api.url, TOKEN, retry_delays_s=())
    with pytest.raises(GitHubApiError, match="on another host"):
        client.comments(PullRequest(REPO, NUMBER))
    assert len(api.requests) == 1
    assert TOKEN not in repr(client), "the token is never in a repr (or a traceback's)"


def test_transient_failures_retry_reads_and_edits_never_posts(api):
    client = GitHubApi(api.url, TOKEN, retry_delays_s=(0, 0))
    pr = PullRequest(REPO, NUMBER)
    api.fail_first = 2
    assert client.comments(pr) == [] and len(api.calls("GET")) == 3
    api.fail_first = 1
    with pytest.raises(GitHubApiError, match="HTTP 502"):
        client.create_comment(pr, "body")
    assert len(api.calls("POST")) == 1, "a POST that may have worked is not sent again"
    gone = GitHubApi("http://127.0.0.1:9", TOKEN, retry_delays_s=(0,), timeout_s=2)
    with pytest.raises(GitHubApiError, match=r"could not reach .*\(tried 2 times\)"):
        gone.comments(pr)


def test_the_example_workflow_uses_the_action_as_it_is():
    """examples/github-action.yml: every input it gives exists, the required ones are
    given, and the job grants the comment's permission (and no more)."""
    flow = yaml.safe_load((ROOT / "examples" / "github-action.yml").read_text())
    action = yaml.safe_load(ACTION.read_text())
    assert flow["permissions"] == {"contents": "read", "pull-requests": "write"}
    (step,) = [
        s for j in flow["jobs"].values() for s in j["steps"] if "regtrack@" in s.get("uses", "")
    ]
    given, known = set(step["with"]), set(action["inputs"])
    assert given <= known, f"unknown inputs {given - known}"
    required = {name for name, spec in action["inputs"].items() if spec.get("required")}
    assert required <= given
    workflow = _check_jsonschema(ROOT / "examples" / "github-action.yml", "github-workflows")
    assert workflow.returncode == 0, workflow.stdout
