"""The docs/ci.md workflow, run as the docs hold it, in a pull request's checkout that an
attacker made: a forged database where regtrack's default one would be, links named like
its outputs, and a candidate that is not a release. The step must decide on a database it
created in $RUNNER_TEMP and leave every file outside that folder as it was (issue 45's
acceptance). The runner runs the step with bash (tests/actionrun.py); `regtrack` is the
real command line with the measuring edge modelled (tests/fake_regtrack.py), the versions
real git tags of a small repository whose builds are instant (tests/fakerepo.py)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from regtrack.results.store import Store
from tests import fakerepo
from tests.actionrun import ActionRun, job_env, run_job
from tests.conftest import cli_in_process, settings_dir

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "ci.md"
STEP = "Compare the shipped Redis with the candidate"


def docs_workflow() -> dict[str, Any]:
    """The workflow of docs/ci.md's "queue project" section, as a reader copies it."""
    blocks = re.findall(r"```yaml\n(# \.github/workflows/redis-regression\.yml\n.*?)```",
                        DOCS.read_text(), re.S)  # fmt: skip
    (text,) = blocks
    return yaml.safe_load(text)


def _snapshot(root: Path, skip: tuple[Path, ...]) -> dict[str, tuple]:
    """Every entry below ``root`` (links as links, never followed): kind, content, mode."""
    seen: dict[str, tuple] = {}
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = [d for d in dirs if here / d not in skip]
        for name in dirs + files:
            path = here / name
            info = path.lstat()
            if path.is_symlink():
                seen[str(path)] = ("link", os.readlink(path))
            elif path.is_dir():
                seen[str(path)] = ("dir", info.st_mode)
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                seen[str(path)] = ("file", digest, info.st_mode, info.st_mtime_ns)
    return seen


def _forged_database(path: Path) -> None:
    """A real regtrack database with a trigger that cuts every stored instruction count
    by 20% (what a pull request would commit as reports/regtrack.db)."""
    path.parent.mkdir(parents=True)
    Store.open(path).close()
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TRIGGER forge AFTER INSERT ON trials BEGIN UPDATE trials SET "
        "instructions_per_op = instructions_per_op * 0.8 WHERE id = NEW.id; END"
    )
    conn.commit()
    conn.close()


class Checkout:
    """A runner's folders: the pull request's checkout (the workspace, holding the
    regtrack checkout the workflow's second checkout step makes), $RUNNER_TEMP, and
    files outside both that links in the checkout point at."""

    def __init__(self, tmp: Path, candidate: str):
        self.tmp = tmp
        self.workspace = tmp / "workspace"
        self.temp = tmp / "runner-temp"
        self.cache = tmp / "tool-cache"  # regtrack's build cache: the runner's, not the PR's
        self.outside = tmp / "outside"
        for folder in (self.workspace, self.temp, self.cache, self.outside):
            folder.mkdir()
        repo = tmp / "redis"
        repo.mkdir()
        fakerepo.git(repo, "init", "-q", "-b", "unstable")
        server = fakerepo.shutil.which("redis-server") or "/usr/bin/redis-server"
        for version in ("7.0.15", "7.2.4"):
            fakerepo.commit_version(repo, version, fakerepo.GOOD_MAKEFILE, server)
            fakerepo.git(repo, "tag", version)
        self.settings = settings_dir(
            tmp, f'[defaults]\nsource-repo = "{repo}"\n[defaults.ci]\npipelines = [10]\n'
        )
        self._plant(candidate)

    def _plant(self, candidate: str) -> None:
        ws = self.workspace
        (ws / "deploy").mkdir()
        (ws / "deploy" / "redis-version").write_text(candidate + "\n")
        _forged_database(ws / "reports" / "regtrack.db")
        (self.outside / "victim.md").write_text("keep me\n")
        (ws / "regtrack-summary.md").symlink_to(self.outside / "victim.md")
        (ws / "regtrack.json").symlink_to(self.outside / "victim.md")
        (ws / "reports" / "index.html").symlink_to(self.outside / "victim.md")
        # What the workflow's second checkout and install steps leave: regtrack's command.
        bin_dir = ws / "regtrack" / ".venv" / "bin"
        bin_dir.mkdir(parents=True)
        script = bin_dir / "regtrack"
        script.write_text(
            f'#!/bin/bash\nexec "{sys.executable}" "{ROOT / "tests" / "fake_regtrack.py"}" "$@"\n'
        )
        script.chmod(0o755)
        (ws / "regtrack" / "scripts").mkdir()
        install = ws / "regtrack" / "scripts" / "install.sh"
        install.write_text("#!/bin/bash\ntrue\n")
        install.chmod(0o755)

    def run(self) -> ActionRun:
        github = {
            "workspace": str(self.workspace), "api_url": "http://127.0.0.1:9",
            "server_url": "https://github.com", "repository": "acme/queue",
            "event_name": "pull_request", "event_path": str(self.tmp / "event.json"),
            "run_id": 1, "run_attempt": 1, "sha": "f" * 40,
        }  # fmt: skip
        runner = {"os": "Linux", "arch": "X64", "temp": str(self.temp)}
        env = job_env(github, runner, {
            "PYTHONPATH": str(ROOT),
            "REGTRACK_CONFIG_DIR": str(self.settings),
            "REGTRACK_CACHE": str(self.cache),
            "GITHUB_STEP_SUMMARY": str(self.temp / "step-summary.md"),
        })  # fmt: skip
        return run_job(docs_workflow(), "regtrack", github, runner, env, self.tmp / "steps")


def test_the_docs_step_decides_on_its_own_database_and_touches_nothing_else(tmp_path):
    """The forged database (a trigger cutting instructions per op by 20%) is never
    opened, no link is written through, and the gate, on a database made in
    $RUNNER_TEMP, finds the two versions alike (the model measures them alike)."""
    job = Checkout(tmp_path, "7.2.4")
    before = _snapshot(tmp_path, (job.temp, job.cache, tmp_path / "steps"))
    run = job.run()
    step = next(s for s in run.steps if s.name == STEP)
    assert step.outcome == "success", step.stdout + step.stderr
    assert _snapshot(tmp_path, (job.temp, job.cache, tmp_path / "steps")) == before
    out = job.temp / "regtrack"
    verdict = json.loads((out / "regtrack.json").read_text())
    assert verdict["outcome"] == "no regression", verdict
    gate = {g["metric"]: g for g in verdict["gate"]}
    assert abs(gate["instructions_per_op"]["change_pct"]) < 1, gate
    conn = sqlite3.connect(out / "regtrack.db")
    labels = [row[0] for row in conn.execute("SELECT label FROM targets ORDER BY position")]
    assert labels == ["shipped", "candidate"]
    assert conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger'").fetchone() == (
        0,
    )
    assert (out / "summary.md").read_text().startswith("## regtrack: ✅")
    assert (job.temp / "step-summary.md").read_text() == (out / "summary.md").read_text()
    (upload,) = run.uses("actions/upload-artifact")
    assert upload.with_["path"] == str(out)


@pytest.mark.parametrize(
    "candidate", ["bin:./evil", "src:.", "image:evil", "7.2.4 --source-repo=/tmp/x", "unstable"]
)
def test_a_candidate_that_is_not_a_release_stops_the_step_before_regtrack(tmp_path, candidate):
    job = Checkout(tmp_path, candidate)
    run = job.run()
    step = next(s for s in run.steps if s.name == STEP)
    assert step.outcome == "failure" and step.returncode == 2, step.stdout + step.stderr
    assert "::error::deploy/redis-version must hold a Redis release" in step.stdout
    assert not (job.temp / "regtrack").exists(), "regtrack ran"


def test_the_step_as_it_was_is_refused_before_anything_is_built(tmp_path):
    """docs/ci.md's step before issue 45 (no --db, outputs in the checkout): the planted
    links are refused before anything is built, and under CI the default database, in
    the checkout, is refused too (here with the outputs moved out); nothing is written."""
    job = Checkout(tmp_path, "7.2.4")
    before = _snapshot(tmp_path, (job.cache, job.temp))
    versions = ["--baseline-version", "shipped=7.0.15", "--candidate-version", "candidate=7.2.4"]
    env = {"REGTRACK_CONFIG_DIR": str(job.settings), "REGTRACK_CACHE": str(job.cache)}
    old = ["ci", *versions, "--summary", "regtrack-summary.md", "--json", "regtrack.json"]
    linked = cli_in_process(*old, cwd=job.workspace, env=env)
    assert linked.returncode == 2, linked.stdout + linked.stderr
    assert linked.stderr.strip() == (
        "regtrack: error: the summary regtrack-summary.md is a symbolic link: regtrack never "
        "writes through a link it did not make; remove it or name another file"
    )
    moved = ["ci", *versions, "--json", str(job.temp / "r.json")]
    under_ci = cli_in_process(*moved, cwd=job.workspace, env={**env, "CI": "true"})
    assert under_ci.returncode == 2, under_ci.stdout + under_ci.stderr
    (line,) = under_ci.stderr.strip().splitlines()
    assert "inside the checkout" in line and '--db "$RUNNER_TEMP/regtrack.db"' in line, line
    assert _snapshot(tmp_path, (job.cache, job.temp)) == before
    assert not list(job.cache.iterdir()), "something was built"


@pytest.mark.parametrize("candidate", ["7.2.4", "bin:./evil", "7.2.4-rc1; id", "../../x"])
def test_the_example_workflow_passes_a_release_and_nothing_else(tmp_path, candidate):
    """examples/github-action.yml reads the candidate from the pull request's file: only a
    release number reaches the action's `candidate` input."""
    workflow = yaml.safe_load((ROOT / "examples" / "github-action.yml").read_text())
    job = Checkout(tmp_path, candidate)
    head = {"head": {"repo": {"full_name": "acme/queue"}}}
    github = {"workspace": str(job.workspace), "repository": "acme/queue",
              "event": {"pull_request": head}}  # fmt: skip
    runner = {"os": "Linux", "arch": "X64", "temp": str(job.temp)}
    env = {"PATH": os.environ["PATH"], "RUNNER_TEMP": str(job.temp)}
    run = run_job(workflow, "regtrack", github, runner, env, tmp_path / "steps")
    (action,) = [s for s in run.steps if s.uses and "regtrack@" in s.uses]
    if candidate == "7.2.4":
        assert action.outcome == "success" and action.with_["candidate"] == "candidate=7.2.4"
    else:
        assert run.step("deploy").returncode == 2 and action.outcome == "skipped"
