"""`regtrack bisect` and commit ranges, end to end in process, on fake histories whose
builds are instant and whose trials come from a model (tests/fakebench.py): the search
over real git histories, the store, the answers, the history pages in Chromium. The real
bisection of a real Redis history is test_bisect.py."""

from __future__ import annotations

import json
import sqlite3

import pytest

from regtrack.core.errors import Interrupted
from tests import fakebench
from tests.conftest import cli_in_process, settings_dir
from tests.fakerepo import make_history
from tests.test_report import Page
from tests.test_report import browser as browser  # the Chromium fixture

ARGS = ["--metric", "instructions", "--point", "pipeline=10", "--repetitions", "2", "--no-report"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """Builds of this test's fake histories, apart from the shared cache."""
    monkeypatch.setenv("REGTRACK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _model(commits: list[str], levels: dict[int, float]) -> fakebench.Model:
    """Instructions per op by commit: 3,500 until the first index of ``levels``, then each
    level from its index on."""
    value, table = 3500.0, {}
    for i, commit in enumerate(commits):
        value = levels.get(i, value)
        table[commit] = value
    return fakebench.Model(instructions=table)


def test_three_steps_are_noted_then_all_found(tmp_path, cache, monkeypatch):
    commits = make_history(tmp_path / "repo", ["ok"] * 12)
    model = _model(commits, {3: 3675.0, 6: 3500.0, 9: 3850.0})  # +5%, back, +10%
    db, out = tmp_path / "r.db", tmp_path / "all.json"
    ends = ["--good", commits[0], "--bad", commits[-1], "--source-repo", str(tmp_path / "repo")]
    plain = cli_in_process("bisect", *ends, *ARGS, "--db", str(db), measuring=model)
    assert plain.returncode == 0, plain.stderr
    # Plain bisection names the changes that carry most of the ends' change (up at 3, up
    # again at 9); --all-steps also searches between them and finds the way back down.
    assert "NOTE: the range holds 2 changes" in plain.stdout, plain.stdout
    every = cli_in_process("bisect", *ends, *ARGS, "--all-steps", "--json", str(out),
                           "--db", str(db), measuring=model)  # fmt: skip
    assert every.returncode == 0, every.stderr
    steps = json.loads(out.read_text())["result"]["steps"]
    assert [s["first_bad"] for s in steps] == [commits[3], commits[6], commits[9]]
    assert [s["change"]["verdict"] for s in steps] == ["regression", "improvement", "regression"]
    # Every step read the ends' run's seeds (its seed offset), so each pairs with it seed
    # by seed; the second search reused the first's runs rather than measure again.
    with sqlite3.connect(db) as conn:
        configs = [json.loads(c) for (c,) in conn.execute("SELECT config FROM runs")]
    assert len({c["settings"]["seed_offset"] for c in configs}) == 1
    assert sum(c["bisection"]["role"] == "ends" for c in configs) == 1


def test_ends_that_do_not_differ_are_refused_with_what_was_measured(tmp_path, cache, monkeypatch):
    commits = make_history(tmp_path / "repo", ["ok"] * 4)
    model = _model(commits, {})
    proc = cli_in_process(
        "bisect", "--good", commits[0], "--bad", commits[3], "--source-repo",
        str(tmp_path / "repo"), *ARGS, "--db", str(tmp_path / "r.db"), measuring=model,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "nothing to bisect" in proc.stderr and "measured" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert {label for label, _, _ in model.visits} == {commits[0][:7], commits[3][:7]}, "ends"


def test_cycles_find_a_step_that_instructions_cannot_see_and_name_its_misses(
    tmp_path, cache, monkeypatch
):
    """A commit that adds last-level misses and no instruction (a memory stall): bisect
    --metric cycles names it, measuring each step alone against the ends' seeds, and its
    explain table names the function whose misses rose; by instructions the ends are
    alike and there is nothing to bisect."""
    commits = make_history(tmp_path / "repo", ["ok"] * 8)
    misses = {c: (2.0 if i < 5 else 4.0) for i, c in enumerate(commits)}
    model = fakebench.Model(ll_misses=misses)  # cycles +11% at commit 5, instructions flat
    ends = ["--good", commits[0], "--bad", commits[-1], "--source-repo", str(tmp_path / "repo")]
    cycle_args = [*ARGS[:1], "cycles", *ARGS[2:]]
    out, db = tmp_path / "b.json", tmp_path / "r.db"
    found = cli_in_process("bisect", *ends, *cycle_args, "--json", str(out), "--db", str(db),
                           measuring=model)  # fmt: skip
    assert found.returncode == 0, found.stderr
    answer = json.loads(out.read_text())
    (step,) = answer["result"]["steps"]
    assert (step["last_good"], step["first_bad"]) == (commits[4], commits[5])
    assert step["change"]["verdict"] == "regression"
    assert 8 < step["change"]["change_pct"] < 14, step["change"]
    (table,) = step["explain"]
    assert table["metric"] == "cycles", table
    top = table["functions"][0]
    assert top["function"] == "getGenericCommand" and top["diff_per_op"] > 300, top
    assert "First bad commit: " + commits[5] in found.stdout
    assert "Δ LL misses/op" in found.stdout, found.stdout
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT COUNT(*) FROM targets GROUP BY run_id ORDER BY run_id")
        together = [n for (n,) in rows]
    assert together[0] == 2 and set(together[1:]) == {1}, "the ends, then each step alone"
    blind = cli_in_process("bisect", *ends, *ARGS, "--db", str(tmp_path / "i.db"),
                           measuring=model)  # fmt: skip
    assert blind.returncode == 2 and "nothing to bisect" in blind.stderr, blind.stderr


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
    model = _model(commits, {9: 3675.0})
    db = tmp_path / "r.db"
    proc = cli_in_process(
        "run", "--versions", f"{commits[0]}..{commits[-1]}", "--every", "2", "--metric",
        "instructions", "--pipelines", "10", "--repetitions", "2", "--source-repo",
        str(tmp_path / "repo"), "--db", str(db), measuring=model,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"skipped {commits[11][:7]}" in proc.stderr, "the commit that does not build"
    history = cli_in_process("history", "--db", str(db))
    assert history.returncode == 0, history.stderr
    assert f"between {commits[7][:7]} and {commits[9][:7]}" in history.stdout, history.stdout
    as_json = cli_in_process("history", "--db", str(db), "--format", "json")
    (step,) = json.loads(as_json.stdout)["steps"]
    assert (step["before"], step["after"], step["metric"]) == (
        commits[7],
        commits[9],
        "instructions_per_op",
    )
    assert 4 < step["change_pct"] < 6 and step["source_repo"] and step["comparability"]
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
    configs = settings_dir(tmp_path, '[run]\nseeds = "random"\n')
    monkeypatch.setenv("REGTRACK_CONFIG_DIR", str(configs))
    commits = make_history(tmp_path / "repo", ["ok"] * 4)
    model = _model(commits, {2: 3675.0})
    out = tmp_path / "b.json"
    proc = cli_in_process(
        "bisect", "--good", commits[0], "--bad", commits[-1], "--source-repo",
        str(tmp_path / "repo"), *ARGS, "--json", str(out), "--db", str(tmp_path / "r.db"),
        measuring=model,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "internal error" not in proc.stderr
    assert proc.stderr.count("warning: hash seeds are not controlled (random seeds") == 1
    (step,) = json.loads(out.read_text())["result"]["steps"]
    assert commits[2] == step["first_bad"] or commits[2] in step["between"]


def test_an_answer_that_carries_half_the_change_says_more_may_be_there():
    from regtrack.output import bisect_text
    from regtrack.results.bisection_plan import BisectionPlan
    from regtrack.results.records import StoredBisection
    from tests import answers

    a, b, c = "a" * 40, "b" * 40, "c" * 40
    step = {"kind": "step", "last_good": a, "first_bad": b, "between": [], "share": 0.51}
    record = StoredBisection(
        id=1,
        created_at="",
        status="done",
        config=BisectionPlan.from_json(
            {"facts": {}, "commits": [a, b, c], "request": answers.request(good=a, bad=c)}
        ),
        result={
            "steps": [step],
            "measured_commits": [a, b, c],
            "by_estimate": [b],
            "carried": 0.51,
            "more_may_be_left": True,
        },
    )
    text = bisect_text.render(record)
    assert f"First bad commit: {b} (51% of the ends' change)" in text
    assert "carries 51% of the ends' change" in text and "--all-steps" in text
    assert "placed by their point estimate" in text and b[:7] in text
    step["share"] = 0.97
    record.result.update(carried=0.97, more_may_be_left=False)
    assert "--all-steps" not in bisect_text.render(record)


def test_a_step_needing_more_seeds_than_the_ends_have_grows_the_ends_run(
    tmp_path, cache, monkeypatch
):
    """A commit's position needs more seed pairs than the ends' run has: the ends' run
    measures more repetitions with it (the next seeds of its offset, on both sides)
    rather than the commit being placed by its estimate at once; once more seeds could
    no longer decide it (it sits near the cut, and the runs' shifts stay in the
    interval), its estimate places it, well before --max-repetitions."""
    commits = make_history(tmp_path / "repo", ["ok"] * 6)
    model = _model(commits, {2: 3700.0, 3: 3850.0})  # 58% of +10%, then all
    model.instructions_noise_pct = 0.3
    db, out = tmp_path / "r.db", tmp_path / "b.json"
    proc = cli_in_process(
        "bisect", "--good", commits[0], "--bad", commits[-1], "--source-repo",
        str(tmp_path / "repo"), *ARGS, "--max-repetitions", "12", "--json", str(out),
        "--db", str(db), measuring=model,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    short = commits[2][:7]
    assert f"bisect: {short} needs more seed pairs than the ends' run has" in proc.stderr
    assert f"bisect: {short} is 58% of the way to bad, above the cut at 50% (by its" in proc.stderr
    result = json.loads(out.read_text())["result"]
    assert [s["first_bad"] for s in result["steps"]] == [commits[2], commits[3]]
    with sqlite3.connect(db) as conn:
        configs = {r: json.loads(c) for r, c in conn.execute("SELECT id, config FROM runs")}
        reps = {run_id: config["settings"]["repetitions"] for run_id, config in configs.items()}
        statuses = {s for (s,) in conn.execute("SELECT status FROM runs")}
        seeds_of = {
            run_id: {s for (s,) in conn.execute(
                "SELECT seed FROM trials WHERE run_id = ?", (run_id,))}
            for run_id in reps
        }  # fmt: skip
    assert 4 < reps[1] == reps[2] < 12, reps  # the ends' run and the commit's grew together
    assert seeds_of[1] == seeds_of[2], "the new repetitions pair seed by seed"
    # The grown plan was recorded again; why the run was measured stayed as it was.
    assert configs[1]["bisection"]["role"] == "ends" and configs[1]["design"] == "sequential"
    assert statuses == {"complete"}


def test_throughput_all_steps_names_both_steps_side_by_side(tmp_path, cache, monkeypatch):
    """Throughput: steps of -4% and -8% in 12 commits, 3% trial noise (unequal, so the
    commits between them are not on the first cut). Every step measures good,
    the commit and bad together (throughput drifts between runs), and --all-steps names
    both steps, each confirmed as parent and child measured side by side."""
    commits = make_history(tmp_path / "repo", ["ok"] * 12)
    table, value = {}, 400_000.0
    for i, commit in enumerate(commits):
        value *= {3: 0.96, 8: 0.92}.get(i, 1.0)
        table[commit] = value
    model = fakebench.Model(throughput=table)
    db, out = tmp_path / "r.db", tmp_path / "b.json"
    proc = cli_in_process(
        "bisect", "--good", commits[0], "--bad", commits[-1], "--source-repo",
        str(tmp_path / "repo"), "--metric", "throughput", "--point", "pipeline=10",
        "--all-steps", "--max-repetitions", "8", "--no-report", "--json", str(out),
        "--db", str(db), measuring=model,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    steps = json.loads(out.read_text())["result"]["steps"]
    found = sorted(commits.index(s["first_bad"]) for s in steps)
    assert found == [3, 8], proc.stdout
    assert all(s["change"]["change_pct"] < 0 for s in steps)
    with sqlite3.connect(db) as conn:
        labels = {}
        for run_id, role in conn.execute(
            "SELECT id, json_extract(config, '$.bisection.role') FROM runs"
        ):
            labels[run_id] = (role, conn.execute(
                "SELECT COUNT(*) FROM targets WHERE run_id = ?", (run_id,)
            ).fetchone()[0])  # fmt: skip
    assert all(n == 3 for role, n in labels.values() if role == "step"), labels
    assert sum(role == "confirm" for role, _ in labels.values()) == 2


def test_ctrl_c_during_a_step_then_resume_measures_only_what_the_search_still_needs(
    tmp_path, cache, monkeypatch
):
    """test_bisect's Ctrl-C and --resume, modelled: Ctrl-C in the first step's run stops
    the bisection (exit 130, stored interrupted); --resume replays the stored log, so the
    ends are not measured again, and names the commit."""
    commits = make_history(tmp_path / "repo", ["ok"] * 3)  # one commit between the ends
    model = _model(commits, {1: 3675.0})
    model.faults = {(commits[1][:7], 0): Interrupted("SIGINT")}
    db, out = tmp_path / "r.db", tmp_path / "b.json"
    proc = cli_in_process(
        "bisect", "--good", commits[0], "--bad", commits[-1], "--source-repo",
        str(tmp_path / "repo"), *ARGS, "--db", str(db), measuring=model,
    )  # fmt: skip
    assert proc.returncode == 130, proc.stderr
    assert "interrupted" in proc.stderr and "Traceback" not in proc.stderr
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM bisections").fetchone()[0] == "interrupted"
    ends = {commits[0][:7], commits[-1][:7]}
    assert not model.faults, "stopped inside the step"
    model.visits.clear()
    resumed = cli_in_process("bisect", "--resume", "--db", str(db), "--json", str(out),
                             "--no-report", measuring=model)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert model.visits and not {label for label, _, _ in model.visits} & ends
    (step,) = json.loads(out.read_text())["result"]["steps"]
    assert step["first_bad"] == commits[1] and step["last_good"] == commits[0]


def test_a_bare_resume_takes_the_newest_unfinished_bisection(tmp_path):
    from regtrack.core.errors import BadInput
    from regtrack.results import bisections
    from regtrack.results.bisection_plan import BisectionPlan
    from regtrack.results.store import Store
    from tests import answers

    store = Store.open(tmp_path / "r.db")
    plan = BisectionPlan.from_json(answers.BISECTION["config"])
    ids = [bisections.create(store, plan) for _ in range(4)]
    bisections.finish(store, ids[0], "interrupted")
    bisections.finish(store, ids[1], "failed")
    bisections.finish(store, ids[2], "done")
    bisections.finish(store, ids[3], "refused")
    assert bisections.latest_unfinished(store) == ids[1]
    for i in ids[:2]:
        bisections.finish(store, i, "done")
    with pytest.raises(BadInput, match="no unfinished bisection"):
        bisections.latest_unfinished(store)


def test_a_bisections_plan_is_stored_as_it_always_was_and_shown_as_stored(tmp_path, cache):
    """The plan `start` stores is the document it wrote as a dict before it was a record
    (the request with its options, the commits, their facts, the source repository, in that
    order), and `bisect --json` shows that document unchanged."""
    import dataclasses

    from regtrack.core.options import Options
    from regtrack.flows import bisect_request
    from regtrack.output import bisect_text
    from regtrack.results import bisections
    from regtrack.targets.sources import SourceRepo

    commits = make_history(tmp_path / "repo", ["ok"] * 3)
    options = Options(source_repo=str(tmp_path / "repo"), server_config=("appendonly=no",))
    request = bisect_request.Request(
        commits[0], commits[-1], "instructions", 1.5, False, "10m", 8, options
    )
    store, bisection_id = bisect_request.start(request, str(tmp_path / "r.db"))
    repo = SourceRepo(options.source_repo)
    as_written = {
        "request": {
            **dataclasses.asdict(request),
            "options": {**dataclasses.asdict(options), "source_repo": repo.location},
        },
        "commits": commits,
        "facts": {c: repo.describe(c) for c in commits},
        "source_repo": repo.location,
    }
    del as_written["request"]["stored_options"]
    try:
        (stored,) = store.conn.execute("SELECT config FROM bisections").fetchone()
        assert stored == json.dumps(as_written)
        shown = bisect_text.render(bisections.get(store, bisection_id), "json")
        assert json.dumps(json.loads(shown)["config"]) == stored
    finally:
        store.close()
