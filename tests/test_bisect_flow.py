"""`regtrack bisect` and commit ranges, end to end in process, on fake histories whose
builds are instant and whose trials come from a model (tests/fakebench.py): the search
over real git histories, the store, the answers, the history pages in Chromium. The real
bisection of a real Redis history is test_bisect.py."""

from __future__ import annotations

import json

import pytest

from tests import fakebench
from tests.conftest import cli_in_process
from tests.fakerepo import make_history
from tests.test_report import Page
from tests.test_report import browser as browser  # the Chromium fixture

ARGS = ["--metric", "instructions", "--point", "pipeline=10", "--repetitions", "2", "--no-report"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """Builds of this test's fake histories, apart from the shared cache."""
    monkeypatch.setenv("REGTRACK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _model(monkeypatch, commits: list[str], levels: dict[int, float]) -> fakebench.Model:
    """Instructions per op by commit: 3,500 until the first index of ``levels``, then each
    level from its index on."""
    value, table = 3500.0, {}
    for i, commit in enumerate(commits):
        value = levels.get(i, value)
        table[commit] = value
    return fakebench.install(monkeypatch, fakebench.Model(instructions=table))


def test_three_steps_are_noted_then_all_found(tmp_path, cache, monkeypatch):
    commits = make_history(tmp_path / "repo", ["ok"] * 12)
    _model(monkeypatch, commits, {3: 3675.0, 6: 3500.0, 9: 3850.0})  # +5%, back, +10%
    db, out = tmp_path / "r.db", tmp_path / "all.json"
    ends = ["--good", commits[0], "--bad", commits[-1], "--source-repo", str(tmp_path / "repo")]
    plain = cli_in_process("bisect", *ends, *ARGS, "--db", str(db))
    assert plain.returncode == 0, plain.stderr
    # Plain bisection names the changes that carry most of the ends' change (up at 3, up
    # again at 9); --all-steps also searches between them and finds the way back down.
    assert "NOTE: the range holds 2 changes" in plain.stdout, plain.stdout
    every = cli_in_process("bisect", *ends, *ARGS, "--all-steps", "--json", str(out),
                           "--db", str(db))  # fmt: skip
    assert every.returncode == 0, every.stderr
    steps = json.loads(out.read_text())["result"]["steps"]
    assert [s["first_bad"] for s in steps] == [commits[3], commits[6], commits[9]]
    assert [s["change"]["verdict"] for s in steps] == ["regression", "improvement", "regression"]


def test_ends_that_do_not_differ_are_refused_with_what_was_measured(tmp_path, cache, monkeypatch):
    commits = make_history(tmp_path / "repo", ["ok"] * 4)
    model = _model(monkeypatch, commits, {})
    proc = cli_in_process(
        "bisect", "--good", commits[0], "--bad", commits[3], "--source-repo",
        str(tmp_path / "repo"), *ARGS, "--db", str(tmp_path / "r.db"),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "nothing to bisect" in proc.stderr and "measured" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert {label for label, _, _ in model.visits} == {commits[0][:7], commits[3][:7]}, "ends"


def test_a_ref_that_does_not_exist_is_bad_input(tmp_path, cache):
    commits = make_history(tmp_path / "repo", ["ok"] * 2)
    proc = cli_in_process("bisect", "--good", "no-such-ref", "--bad", commits[-1],
                          "--source-repo", str(tmp_path / "repo"), *ARGS,
                          "--db", str(tmp_path / "r.db"))  # fmt: skip
    assert proc.returncode == 2
    assert "no-such-ref" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_range_run_draws_the_step_between_the_commits_around_it(
    tmp_path, cache, monkeypatch, browser
):
    """16 commits, a +5% step at commit 9 and a commit that does not build (11): every
    second commit is measured, the broken one is skipped with one line, and `regtrack
    history` and the history page put the step between commits 7 and 9."""
    kinds = ["ok"] * 16
    kinds[11] = "broken"
    commits = make_history(tmp_path / "repo", kinds)
    _model(monkeypatch, commits, {9: 3675.0})
    db = tmp_path / "r.db"
    proc = cli_in_process(
        "run", "--versions", f"{commits[0]}..{commits[-1]}", "--every", "2", "--metric",
        "instructions", "--pipelines", "10", "--repetitions", "2", "--source-repo",
        str(tmp_path / "repo"), "--db", str(db),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"skipped {commits[11][:7]}" in proc.stderr, "the commit that does not build"
    history = cli_in_process("history", "--db", str(db))
    assert history.returncode == 0, history.stderr
    assert f"between {commits[7][:7]} and {commits[9][:7]}" in history.stdout, history.stdout
    page_file = next(db.parent.glob("history-get-pipeline-*instructions*.html"))
    page = Page(browser, page_file)
    steps = page.page.locator("#commit-steps tbody tr")
    assert steps.count() == 1
    assert steps.first.inner_text().split()[:2] == [commits[7][:12], commits[9][:12]]
    ticks = page.page.locator("#chart-1 .xtick text").all_text_contents()
    assert any(t.startswith(commits[9][:7]) for t in ticks), ticks
    page.shot("history-by-commit")
    page.clean()


def test_a_bisection_without_controlled_seeds_says_so_and_keeps_the_step_in_its_answer(
    tmp_path, cache, monkeypatch
):
    """Where seeds cannot be controlled, a bisection's steps compare runs without seed
    pairs (Welch, one look): the model's 1% seed effect can keep a commit's position
    undecided, and its point estimate places it then; the answer must hold the step, the
    bisection says why once, and ends without an internal error."""
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "regtrack.toml").write_text('[run]\nseeds = "random"\n')
    monkeypatch.setenv("REGTRACK_CONFIG_DIR", str(configs))
    commits = make_history(tmp_path / "repo", ["ok"] * 4)
    _model(monkeypatch, commits, {2: 3675.0})
    out = tmp_path / "b.json"
    proc = cli_in_process(
        "bisect", "--good", commits[0], "--bad", commits[-1], "--source-repo",
        str(tmp_path / "repo"), *ARGS, "--json", str(out), "--db", str(tmp_path / "r.db"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "internal error" not in proc.stderr
    assert proc.stderr.count("warning: hash seeds are not controlled (random seeds") == 1
    (step,) = json.loads(out.read_text())["result"]["steps"]
    assert commits[2] == step["first_bad"] or commits[2] in step["between"]


def test_an_answer_that_carries_half_the_change_says_more_may_be_there():
    from regtrack.output import bisect_text

    a, b, c = "a" * 40, "b" * 40, "c" * 40
    step = {"kind": "step", "last_good": a, "first_bad": b, "between": [], "share": 0.51}
    record = {
        "id": 1,
        "config": {
            "facts": {},
            "commits": [a, b, c],
            "request": {"good": a, "bad": c, "metric": "instructions", "threshold": 1.0},
        },
        "result": {
            "steps": [step],
            "measured_commits": [a, b, c],
            "by_estimate": [b],
            "carried": 0.51,
            "more_may_be_left": True,
        },
        "log": [],
    }
    text = bisect_text.render(record)
    assert f"First bad commit: {b} (51% of the ends' change)" in text
    assert "carries 51% of the ends' change" in text and "--all-steps" in text
    assert "placed by their point estimate" in text and b[:7] in text
    step["share"] = 0.97
    record["result"].update(carried=0.97, more_may_be_left=False)
    assert "--all-steps" not in bisect_text.render(record)
