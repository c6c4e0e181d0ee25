"""Commit ranges A..B as version specs: parsed, resolved along the first parent, thinned
(both ends kept), listed by `regtrack versions`, and a commit that does not build is
skipped with a line saying so, never fatal to the range."""

from __future__ import annotations

import json
import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from regtrack.core.errors import BadInput
from regtrack.targets import versions
from tests import fakebench
from tests.conftest import SHORT_RUN, cli_in_process, run_cli
from tests.fakerepo import BAD_MAKEFILE, GOOD_MAKEFILE, git, make_repo


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("REGTRACK_CACHE", str(path))
    return path


def test_a_range_is_one_spec_of_kind_range():
    spec = versions.parse_spec("7.0.0..unstable")
    assert (spec.kind, spec.value) == ("range", "7.0.0..unstable")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x=1.0..2.0", "leave out the label"),
        ("1.0..", "give two tags, branches or commits"),
        ("..2.0", "give two tags, branches or commits"),
        ("1.0...2.0", "is not a tag, branch or commit name"),
    ],
)
def test_bad_ranges_are_refused_with_a_message(text, message):
    with pytest.raises(BadInput, match=message):
        versions.parse_spec(text)


@given(
    n=st.integers(min_value=1, max_value=300),
    every=st.one_of(st.none(), st.integers(min_value=1, max_value=50)),
    most=st.one_of(st.none(), st.integers(min_value=2, max_value=40)),
)
def test_thinning_keeps_both_ends_order_and_the_limits(n, every, most):
    commits = [f"c{i}" for i in range(n)]
    picked = versions.thin(commits, every, most)
    assert picked[0] == commits[0] and picked[-1] == commits[-1]
    assert picked == sorted(set(picked), key=commits.index), "a subset, in order, no repeats"
    if most:
        assert len(picked) <= most
    if every and not most:
        assert len(picked) == len(range(0, n, every)) + (0 if (n - 1) % every == 0 else 1)


def _history(path, commits: int, broken_at: int | None = None) -> list[str]:
    """A repository whose unstable branch has ``commits`` commits after tag base."""
    make_repo(path)
    git(path, "checkout", "-q", "unstable")
    git(path, "tag", "base")
    shas = []
    for i in range(commits):
        makefile = BAD_MAKEFILE if i == broken_at else GOOD_MAKEFILE
        server = "/usr/bin/redis-server"
        (path / "Makefile").write_text(makefile.replace("{server}", server))
        (path / "src" / "note.txt").write_text(f"edit {i}\n")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", f"step {i}: harmless edit")
        shas.append(git(path, "rev-parse", "HEAD"))
    return shas


def test_versions_lists_what_a_range_resolves_to(tmp_path, cache):
    shas = _history(tmp_path / "repo", 7)
    env = {"REGTRACK_CACHE": str(cache)}
    args = ["versions", "base..unstable", "--source-repo", str(tmp_path / "repo")]
    proc = run_cli(*args, "--format", "json", env=env)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["commit"] for r in rows] == shas, "every first-parent commit after base, in order"
    assert [r["label"] for r in rows] == [s[:7] for s in shas]
    assert rows[3]["subject"] == "step 3: harmless edit" and rows[3]["date"]
    thinned = json.loads(run_cli(*args, "--every", "3", "--format", "json", env=env).stdout)
    assert [r["commit"] for r in thinned] == [shas[0], shas[3], shas[6]]
    most = json.loads(run_cli(*args, "--max-commits", "2", "--format", "json", env=env).stdout)
    assert [r["commit"] for r in most] == [shas[0], shas[-1]]
    table = run_cli(*args, env=env)
    assert "step 6: harmless edit" in table.stdout and shas[6][:12] in table.stdout


def test_a_range_that_holds_no_commit_is_bad_input(tmp_path, cache):
    _history(tmp_path / "repo", 2)
    proc = cli_in_process(
        "versions", "unstable..base", "--source-repo", str(tmp_path / "repo"),
        env={"REGTRACK_CACHE": str(cache)},
    )  # fmt: skip
    assert proc.returncode == 2
    assert "holds no commits" in proc.stderr and "Traceback" not in proc.stderr


def test_a_commit_of_a_range_that_does_not_build_is_skipped(tmp_path, cache, monkeypatch):
    """Builds are real (make fails on commit 1); the trials are modelled (tests/fakebench.py)."""
    model = fakebench.Model()
    shas = _history(tmp_path / "repo", 3, broken_at=1)
    db = tmp_path / "r.db"
    args = [
        "run", "--versions", "base..unstable", "--source-repo", str(tmp_path / "repo"),
        "--pipelines", "10", "--repetitions", "1", *SHORT_RUN, "--db", str(db), "--no-report",
    ]  # fmt: skip
    proc = cli_in_process(*args, env={"REGTRACK_CACHE": str(cache)}, measuring=model)
    assert proc.returncode == 0, proc.stderr
    assert f"skipped {shas[1][:7]} (step 1: harmless edit): does not build" in proc.stderr
    with sqlite3.connect(db) as conn:
        labels = [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT t.label FROM trials JOIN targets t ON t.id = trials.target_id"
            )
        ]
        config = json.loads(conn.execute("SELECT config FROM runs").fetchone()[0])
    assert sorted(labels) == sorted([shas[0][:7], shas[2][:7]])
    assert [s["commit"] for s in config["skipped"]] == [shas[1]]
    again = cli_in_process(*args, env={"REGTRACK_CACHE": str(cache)}, measuring=model)
    assert again.returncode == 0, again.stderr
    assert "remembered" in again.stderr, "a commit that failed to compile is not built again"
