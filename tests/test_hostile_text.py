"""Text a pull request chose (workload names, version labels, point names, server setting
values, commit subjects, labels stored in a crafted database) is shown as itself in every
output: never a mention, link, image or HTML in Markdown, never a control sequence or
rich markup on a terminal, never an element in HTML, and never so long that GitHub
refuses the comment (issue 45, items 4 and 11).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import re
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from markdown_it import MarkdownIt

from regtrack.analysis import gate
from regtrack.analysis.records import ComparisonResult, GateContext, ServerFacts
from regtrack.core.errors import BadInput
from regtrack.core.text import FIELD, printable
from regtrack.output import (
    bisect_text,
    ci_summary,
    console,
    doctor_text,
    history_text,
    markdown,
    merge_text,
    tables,
)
from regtrack.output.console import err
from regtrack.output.github_comment import MAX_BODY, CiVerdict, CommentContext, comment_body
from regtrack.output.report import bisect_page, figures, history_page, pages
from regtrack.output.report.render import _environment
from tests import answers, hostile, tiers
from tests.conftest import cli_in_process, stored_plan

GITHUB_COMMENT_LIMIT = 65_536
MENTION = "x` @octocat ![i](https://e.example/i.png) [l](https://e.example) <img src=x> `y"
OSC_TITLE = "\x1b]0;pwned\x07"
OSC_LINK = "\x1b]8;;https://e.example\x1b\\click\x1b]8;;\x1b\\"
CSI = "\x1b[2J\x1b[31m"
RAW = "@octocat ![i](https://e.example/i.png) <img src=x> https://e.example"
MARKUP = "[bold red]loud[/] [link=https://e.example]here[/link]"
HTML_ATTACK = "</script><script>alert(1)</script><a href='https://e.example'>x</a>"
PARSER = MarkdownIt("commonmark").enable(["table", "strikethrough"])
# The HTML regtrack writes itself: the comment's marker, its fold and its small print.
OWN_HTML = re.compile(
    r"(<!-- regtrack:ci[\w:.-]* -->|</?(details|summary|sub)>"
    r"|<details><summary>Every metric and point \(\d+ records\)</summary>)\s*"
)


def result(
    workload: str = "get", label: str = "b", point: str = "pipeline=10", setting: str = "no"
) -> ComparisonResult:
    """A comparison of a and ``label`` at ``point`` of ``workload``, one cell each, whose
    servers ran with ``appendonly = setting``."""
    cells = pd.DataFrame(
        [
            {"workload": workload, "point": point, "point_order": 10, "target": target,
             "metric": "throughput", "value": value, "trusted": True, "problems": (),
             "server_busy_pct": 99.0, "spread_pct": None}
            for target, value in (("a", 400_000.0), (label, 368_000.0))
        ]
    )  # fmt: skip
    named = {"workload": workload, "candidate": label}
    base = answers.result(
        (answers.pooled(points=(point,), **named),), (answers.point(point=point, **named),)
    )
    return dataclasses.replace(
        base,
        targets=("a", label),
        cells=cells,
        server=ServerFacts(server_config={"appendonly": setting}),
    )


def summary_of(found: ComparisonResult, workload: str = "get", label: str = "b") -> str:
    context = GateContext(repetitions=4, baseline="a", candidate=label, workload=workload)
    return ci_summary.ci_summary(found, gate.gate(found), context)


def comment_of(found: ComparisonResult) -> str:
    decision = gate.gate(found)
    data = ci_summary.ci_json(found, decision, GateContext(repetitions=4))
    return comment_body(CiVerdict.from_json(data), CommentContext())


def rendered_outside_code(markdown: str) -> list[tuple[str, str]]:
    """(token type, text) of everything a Markdown renderer would make of ``markdown``
    outside code spans that could act: links, images, HTML, and text that mentions,
    autolinks or holds a backtick that failed to close its span."""
    found = []
    for block in PARSER.parse(markdown):
        if block.type == "html_block" and not OWN_HTML.fullmatch(block.content):
            found.append((block.type, block.content))
        for token in block.children or []:
            if token.type == "html_inline" and OWN_HTML.fullmatch(token.content):
                continue
            acts = token.type in ("link_open", "image", "html_inline")
            if acts or (token.type == "text" and re.search(r"@|`|://|www\.|<|>", token.content)):
                found.append((token.type, token.content))
    return found


def assert_terminal(out: str, shown: list[str], newlines: bool = False) -> None:
    """Nothing in ``out`` a terminal acts on (only printable characters and newlines: the
    consoles draw without colour, so any escape would be the input's), and each of
    ``shown`` is there as text (no markup was read; ``newlines``: a message's kept)."""
    assert all(c.isprintable() or c == "\n" for c in out), repr(out)
    for text in shown:
        assert printable(text, newlines=newlines).strip() in out, (text, out)


# --- reproductions -------------------------------------------------------------------------


def test_a_backtick_in_a_workload_name_does_not_leave_its_code_span():
    found = result(workload=MENTION, label=MENTION, point=MENTION)
    assert rendered_outside_code(summary_of(found, workload=MENTION, label=MENTION)) == []
    assert rendered_outside_code(comment_of(found)) == []


def test_a_server_setting_value_is_not_markdown_in_the_caption():
    found = result(setting=RAW)
    assert rendered_outside_code(summary_of(found)) == []
    assert rendered_outside_code(tables.render(found, "markdown")) == []


def test_a_pipe_in_a_name_does_not_add_a_table_cell():
    found = result(label="b|c", point="p|q")
    tables_ = [t for t in PARSER.parse(tables.render(found, "markdown")) if t.type == "tr_open"]
    assert tables_, "the comparison is a table"
    text = tables.render(found, "markdown")
    widths = {line.count(" | ") for line in text.splitlines() if line.startswith("| ")}
    assert len(widths) == 1, text  # every row as wide as the header


def test_a_70000_character_name_keeps_the_comment_under_githubs_limit():
    found = result(workload="w" * 70_000, point="p" * 70_000, label="l" * 70_000)
    body = comment_of(found)
    assert len(body) <= GITHUB_COMMENT_LIMIT
    assert body.startswith("<!-- regtrack:ci -->\n## regtrack: ")


def test_the_step_summary_stays_under_githubs_limit():
    found = result(workload="w" * 2_000_000, point="p" * 2_000_000, setting="s" * 2_000_000)
    text = summary_of(found, workload="w" * 2_000_000)
    assert len(text.encode()) < 1024 * 1024


def test_terminal_escapes_and_markup_in_labels_are_shown_not_sent():
    hostile = OSC_TITLE + OSC_LINK + CSI + "\x9b31m" + MARKUP
    found = result(workload=hostile, label=hostile, point=hostile, setting=hostile)
    out = tables.render(found, "table")
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", out), repr(out)
    assert "[bold red]loud[/]" in out and "[link=https://e.example]here[/link]" in out


def test_a_stored_bisections_commit_subject_reaches_the_terminal_as_text():
    facts = {answers.MID: {"subject": OSC_TITLE + MARKUP, "author": CSI}}
    stored = {**answers.BISECTION, "config": {**answers.BISECTION["config"], "facts": facts}}
    out = bisect_text.render(answers.stored_bisection(stored))
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", out), repr(out)
    assert "\\x1b]0;pwned\\x07" in out


# --- the sanitisers --------------------------------------------------------------------------


def test_printable_shows_control_characters_as_escapes_and_cuts_long_text():
    assert printable("a\x1b]0;t\x07b\u202e\n") == "a\\x1b]0;t\\x07b\\u202e\\n"
    assert printable("a\nb", newlines=True) == "a\nb"
    assert printable("pipeline=10") == "pipeline=10"
    long = printable("x" * 2_000_000)
    assert len(long) == FIELD and long.endswith("…")
    assert printable("\x1b" * 100, limit=10) == "\\x1b\\x1b\\…"  # cut after escaping too
    assert printable(None) == "None" and printable(7) == "7"


def test_a_code_span_fence_is_longer_than_any_backtick_run_inside():
    assert markdown.code("a") == "`a`"
    assert markdown.code("a``b") == "```a``b```"
    assert markdown.code("`a") == "`` `a ``"  # padded: it starts with a backtick
    assert markdown.code("") == "` `"
    for text in ("`", "a ` b", "``x``", " `lead", "trail` "):
        (token,) = PARSER.parseInline(markdown.code(text))[0].children or []
        assert (token.type, token.content) == ("code_inline", text)


def test_plain_words_stay_as_they_are_and_anything_else_is_code():
    for plain in (
        "pipeline=10",
        "get-pipeline",
        "7.2.4",
        "appendonly",
        "everysec",
        "Intel(R) Xeon(R) CPU @ 2.20GHz",
        "memtier_benchmark 2.1.0",
        "clients 10 != 50",
    ):
        assert markdown.inline(plain) == plain
    for active in (
        "@octocat",
        "a@b.c",
        "[x](y)",
        "![i](y)",
        "www.e.example",
        "http://e",
        "<b>",
        "&amp;",
        ":smile:",
        "x:smile",
        "_x_",
        "*x*",
        "~x~",
        "$x$",
        "#1",
        "GH-1",
        "a\\b",
        " padded ",
        "1. x",
        "- x",
        "[r]: https://e",
    ):
        assert markdown.inline(active).startswith("`"), active
    assert (markdown.inline("a|b"), markdown.cell("a|b"), markdown.cell("a|`")) == (
        "a|b",
        "a\\|b",
        "`` a\\|` ``",
    )


def test_a_list_of_names_is_cut_and_counted():
    assert markdown.items(["a", "b"]) == "a, b"
    text = markdown.items([f"p{i}" for i in range(10_000)])
    assert len(text) < markdown.LIST + 30 and text.endswith(" more")


def test_fit_keeps_whole_lines_and_says_it_cut():
    lines = ["head", "`code span`", "| row |", "| row |"]
    assert markdown.fit(lines, 100, "cut") == lines
    assert markdown.fit(lines, 30, "cut") == ["head", "`code span`", "| row |", "", "cut"]
    assert markdown.fit(lines, 29, "cut") == ["head", "`code span`", "", "cut"]


def test_the_stderr_console_shows_markup_emoji_and_escapes_as_text():
    with contextlib.redirect_stderr(io.StringIO()) as stream:
        err.print(f"regtrack: {OSC_TITLE}{MARKUP} :smile:\nnext line")
    assert stream.getvalue() == (
        "regtrack: \\x1b]0;pwned\\x07[bold red]loud[/] [link=https://e.example]here[/link] "
        ":smile:\nnext line\n"
    )


def test_the_trial_log_line_shows_a_hostile_label_as_text():
    record = hostile.trial(hostile.Names.clean())
    record = dataclasses.replace(record, target_label=OSC_LINK, point=CSI)
    with contextlib.redirect_stderr(io.StringIO()) as stream, console.run_progress() as progress:
        progress.started(1)
        progress.trial_done(record)
        progress.note(OSC_TITLE)
    assert_terminal(stream.getvalue(), [OSC_LINK, CSI, OSC_TITLE])


def test_a_terminal_table_shows_too_wide_intervals_it_used_to_read_as_markup():
    """'[too wide to read]' was a rich markup tag to the table's console, and vanished."""
    found = result()
    wide = dataclasses.replace(found.pooled[0], ci_low_pct=-300.0, ci_high_pct=250.0)
    assert "[too wide to read]" in tables.render(
        dataclasses.replace(found, pooled=(wide,)), "table"
    )


# --- the pull-request comment --------------------------------------------------------------


def test_a_comment_of_an_unknown_verdict_is_refused():
    found = result()
    data = ci_summary.ci_json(found, gate.gate(found), GateContext(repetitions=4))
    data["gate"][0]["verdict"] = "regression @octocat"
    with pytest.raises(BadInput, match="verdict 'regression @octocat'"):
        CiVerdict.from_json(data)


def test_the_comments_run_link_is_a_link_only_when_it_is_a_runs_address():
    verdict = CiVerdict.from_json(
        ci_summary.ci_json(result(), gate.gate(result()), GateContext(repetitions=4))
    )
    good = "https://github.com/acme/queue/actions/runs/42"
    assert f"[workflow run]({good})" in comment_body(verdict, CommentContext(run_url=good))
    bad = "https://e.example) [x](https://e.example"
    body = comment_body(verdict, CommentContext(run_url=bad, artifact="a`b", commit="@octocat"))
    assert rendered_outside_code(body) == []


def test_a_comment_with_a_huge_gate_is_cut_to_whole_lines_with_a_note():
    points = tuple(f"p{i}" for i in range(3_000))
    reasons = tuple("r" * 150 + str(i) for i in range(3_000))
    found = result()
    wide = dataclasses.replace(found.pooled[0], points=points)
    found = dataclasses.replace(found, pooled=(wide,) * 60, forced=reasons)
    body = comment_of(found)
    assert len(body) <= GITHUB_COMMENT_LIMIT
    assert "The comment is cut here to stay within GitHub's 65,536-character limit" in body
    assert body.startswith("<!-- regtrack:ci -->\n## regtrack: ") and body.endswith("</sub>\n")
    assert rendered_outside_code(body) == []


def test_the_fold_of_a_huge_verdict_keeps_its_notes_within_the_limit():
    """The rows stop where the count of the rest and the untrusted note still fit: the
    fold is kept, not dropped for overrunning by its notes."""
    found = result()
    points = tuple(
        dataclasses.replace(found.comparisons[0], point=f"p{i}", trusted=False)
        for i in range(5_000)
    )
    body = comment_of(dataclasses.replace(found, comparisons=points))
    assert len(body) <= MAX_BODY
    assert "<details><summary>Every metric and point (5000 records)</summary>" in body
    assert "more records are in the artifact's JSON." in body
    assert "! no valid trial in this cell" in body and body.endswith(
        "</details>\n\n<sub>One comment, edited on every push</sub>\n"
    )


# --- HTML ---------------------------------------------------------------------------------


def test_a_figures_labels_are_text_to_plotly_and_cannot_end_the_script():
    cells = pd.DataFrame(
        [{"point": HTML_ATTACK, "point_order": 0, "target": HTML_ATTACK, "value": 1.0,
          "min": 1.0, "max": 1.0, "n_valid": 1, "trusted": False, "problems": [HTML_ATTACK]}]
    )  # fmt: skip
    figure = figures.by_point(cells, HTML_ATTACK, "ops/s", [HTML_ATTACK])
    strings = re.findall(r'"((?:[^"\\]|\\.)*)"', json.dumps(figure))
    tags = [s for s in strings if "<" in re.sub(r"<extra></extra>|<br>", "", s)]
    assert not tags, "plotly draws <a href> as a link"
    page = _environment().get_template("_charts.html.j2").render(figures=[figure], plotly="p.js")
    script = page.split("<script>", 1)[1]
    assert "</script" not in script.split("</script>")[0]
    assert script.count("</script>") == 1


def test_templates_escape_everything():
    assert _environment().autoescape is True
    page = _environment().get_template("index.html.j2").render(
        runs=[pages.run_summary(hostile.summarize(hostile.Names(*[HTML_ATTACK + str(i)
                                                                  for i in range(9)])))],
        workloads=[HTML_ATTACK], histories=[], bisections=[], version="1", database="db",
        plotly="p.js",
    )  # fmt: skip
    assert HTML_ATTACK not in page and "<script>alert" not in page


# --- every output, with hostile text in every field (hypothesis) ---------------------------
# Each test renders a record whose every text field an attacker chose, and compares it with
# the same record of plain names: same shape (no element, link, cell or block came from
# the input) and nothing a terminal acts on.

CLEAN = hostile.Names.clean()
EXAMPLES = settings(
    max_examples=tiers.examples(2000), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
# What GitHub acts on in text outside a code span: mentions and e-mail addresses, URLs,
# emoji codes, HTML, a backtick that did not close, and anything a terminal acts on (ci
# prints its summary on stdout).
ACTS = re.compile(r"@[\w-]|://|www\.|:[\w+-]+:|[<>`]|[^\S ]|[\x00-\x1f\x7f-\x9f]")


def shape(text: str) -> list[str]:
    """Every block and inline token of ``text`` by kind, a code span counted as text (a
    name reads as text either way); text outside code spans must hold nothing GitHub
    acts on."""
    out: list[str] = []
    for block in PARSER.parse(text):
        out.append(block.type)
        for token in block.children or []:
            if token.type == "text":
                assert not ACTS.search(token.content), token.content
            kind = "text" if token.type in ("text", "code_inline") else token.type
            if not (kind == "text" and out[-1] == "text"):
                out.append(kind)
    return out


def gated(n: hostile.Names) -> tuple[ComparisonResult, gate.GateDecision, GateContext]:
    found = hostile.comparison(n)
    return found, gate.gate(found), hostile.context(n)


def comment(n: hostile.Names) -> str:
    data = json.loads(json.dumps(ci_summary.ci_json(*gated(n))))
    where = CommentContext(artifact=n.key, commit=n.value, run_url=n.host)
    return comment_body(CiVerdict.from_json(data), where)


SUMMARY_SHAPE = shape(ci_summary.ci_summary(*gated(CLEAN)))
COMMENT_SHAPE = shape(comment(CLEAN))


@EXAMPLES
@given(hostile.names)
def test_hostile_names_in_the_step_summary_read_as_text(n):
    text = ci_summary.ci_summary(*gated(n))
    assert shape(text) == SUMMARY_SHAPE
    assert len(text.encode()) <= ci_summary.MAX_SUMMARY_BYTES


@EXAMPLES
@given(hostile.names)
def test_hostile_names_in_the_pull_request_comment_read_as_text(n):
    body = comment(n)
    assert shape(body) == COMMENT_SHAPE
    assert len(body) <= GITHUB_COMMENT_LIMIT


@pytest.fixture(scope="module")
def wide_terminal():
    """Tables drawn wider than any of these names, so each is on one line."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", "20000")
        yield


@EXAMPLES
@given(hostile.names)
def test_hostile_names_in_a_terminal_comparison_are_shown_as_text(wide_terminal, n):
    found = hostile.comparison(n)
    shown = [n.baseline, n.candidate, n.point, n.key, n.value, n.reason, n.host]
    assert_terminal(tables.render(found, "table"), shown)
    csv_text = tables.render(found, "csv").replace("\r\n", "\n")
    assert all(c.isprintable() or c == "\n" for c in csv_text)


@EXAMPLES
@given(hostile.names)
def test_hostile_names_in_terminal_explain_and_versions_are_shown_as_text(wide_terminal, n):
    out = tables.attribution([hostile.attribution(n)], "table")
    out += tables.versions_table(hostile.versions(n))
    assert_terminal(out, [n.workload, n.baseline, n.candidate, n.point, n.key, n.subject, n.host])


@EXAMPLES
@given(hostile.names)
def test_hostile_names_in_a_terminal_bisection_are_shown_as_text(n):
    bisection = bisect_text.render(hostile.bisection(n))
    assert_terminal(bisection, [n.key, n.value, n.workload, n.subject, n.host, n.reason])


@EXAMPLES
@given(hostile.names)
def test_hostile_names_in_a_terminal_history_are_shown_as_text(n):
    commits, steps = hostile.by_commit(n)
    history = history_text.by_run(hostile.history_rows(n), "ops/s")
    history += history_text.by_commit(commits, steps, "ops/s")
    assert_terminal(history, [n.workload, n.point, n.key, n.value, n.candidate, n.host])


@EXAMPLES
@given(hostile.names)
def test_hostile_names_in_messages_and_progress_are_shown_as_text(n):
    with contextlib.redirect_stderr(io.StringIO()) as stream:
        err.print(f"regtrack: {n.candidate}: {n.subject}")
        with console.run_progress() as progress:
            progress.trial_done(hostile.trial(n))
            progress.note(n.reason)
    assert_terminal(stream.getvalue(), [n.candidate, n.subject, n.reason], newlines=True)
    assert printable(n.point) in stream.getvalue()  # a trial line's fields are one line each
    decision, context = gate.gate(hostile.comparison(n)), hostile.context(n)
    gate_lines = [ci_summary.ci_headline(decision, context)]
    gate_lines += ci_summary.ci_annotations(decision, context.forced)
    assert_terminal("\n".join(gate_lines), [n.reason])
    merge = merge_text.render(hostile.merged(n), Path(n.point))
    merge += merge_text.missing_line(hostile.merged(n), Path(n.point))
    assert_terminal(merge, [n.key, n.workload, n.host, n.reason, str(Path(n.point))])
    assert_terminal(doctor_text.render_text(hostile.checkup(n)), [n.key])


def fake_figure(*texts: Any) -> dict[str, Any]:
    """What the page embeds of a figure, without plotly's cost: the texts as given."""
    return {"data": [{"name": [str(t) for t in texts if isinstance(t, str)]}], "layout": {}}


@pytest.fixture(scope="module")
def quick_figures():
    """Figures drawn by fake_figure: plotly spends ~10 ms on each (plotly's own escaping
    is test_a_figures_labels_are_text_to_plotly_and_cannot_end_the_script)."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ("by_point", "latency", "history", "history_by_commit"):
            patch.setattr(figures, name, lambda frame, *texts: fake_figure(*texts))
        yield


ENVIRONMENT = _environment()
COMMON = {"version": "1", "database": "db", "plotly": "plotly.min.js"}


def index_and_bisection(n: hostile.Names) -> list[str]:
    """The index (a run's line, a bisection, a history) and a bisection's page."""
    summary = pages.run_summary(hostile.summarize(n))
    bisection = bisect_page.page(hostile.bisection(n))
    histories = [{"workload": n.workload, "point": n.point, "metric": n.key, "changes": [1],
                  "file": history_page.history_file(n.workload, n.point, n.key)}]  # fmt: skip
    index = {"runs": [summary], "workloads": [n.workload], "histories": histories,
             "bisections": [bisection]}  # fmt: skip
    return [
        ENVIRONMENT.get_template("index.html.j2").render(**index, **COMMON),
        ENVIRONMENT.get_template("bisect.html.j2").render(page=bisection, **COMMON),
    ]


def run_page(n: hostile.Names) -> list[str]:
    summary = pages.run_summary(hostile.summarize(n))
    links = {(n.workload, n.point, "throughput"): "history-x.html"}
    run = pages.run_page(hostile.run_page(n), links, summary)
    return [ENVIRONMENT.get_template("run.html.j2").render(page=run, **COMMON)]


def history(n: hostile.Names) -> list[str]:
    (page,) = history_page.history_pages(hostile.history_rows(n), *hostile.by_commit(n))
    return [ENVIRONMENT.get_template("history.html.j2").render(page=page, **COMMON)]


class Elements(HTMLParser):
    """Every start and end tag of a page, with its attributes' names, in order; the
    links' targets, which must be regtrack's own pages; the inline scripts' text."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.seen: list[tuple[str, ...]] = []
        self.links: list[str] = []
        self.scripts: list[str] = []
        self.feed(page)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append((tag, *sorted(name for name, _ in attrs)))
        self.links += [value or "" for name, value in attrs if name in ("href", "src")]

    def handle_endtag(self, tag: str) -> None:
        self.seen.append((f"/{tag}",))

    def handle_data(self, data: str) -> None:
        if self.seen and self.seen[-1] == ("script",):
            self.scripts.append(data)


OWN_LINK = re.compile(r"index\.html|run-\d+\.html|bisect-\d+\.html|history-[\w.-]+\.html|data:,"
                      r"|plotly\.min\.js")  # fmt: skip


@functools.cache
def clean_pages(render: Callable[[hostile.Names], list[str]]) -> list[tuple[str, Elements]]:
    return [(page, Elements(page)) for page in render(CLEAN)]


FIGURES = re.compile(r"^  var figures = (.*);$", re.MULTILINE)


def assert_html(render: Callable[[hostile.Names], list[str]], n: hostile.Names) -> None:
    """The pages of hostile names have the elements and attributes those of plain names
    have (so none came from a name), link only to regtrack's own pages, and run the same
    scripts: the figures a script holds are one JSON value, whatever their names say."""
    for page, (_, plain) in zip(render(n), clean_pages(render), strict=True):
        elements = Elements(page)
        assert elements.seen == plain.seen
        assert all(OWN_LINK.fullmatch(link) for link in elements.links)
        assert len(elements.scripts) == len(plain.scripts)
        for script, clean in zip(elements.scripts, plain.scripts, strict=True):
            found = FIGURES.findall(script)
            assert len(found) == len(FIGURES.findall(clean))
            for figures_json in found:
                json.loads(figures_json)
            assert FIGURES.sub("", script) == FIGURES.sub("", clean)


@EXAMPLES
@given(hostile.page_names)
def test_hostile_names_in_the_index_and_a_bisections_page_are_text(n):
    assert_html(index_and_bisection, n)


@EXAMPLES
@given(hostile.page_names)
def test_hostile_names_in_a_run_page_are_text(quick_figures, n):
    assert_html(run_page, n)
    assert FIGURES.search(clean_pages(run_page)[0][0]), "the page embeds its figures"


@EXAMPLES
@given(hostile.page_names)
def test_hostile_names_in_a_history_page_are_text(quick_figures, n):
    assert_html(history, n)


def test_compare_list_and_baseline_list_show_stored_labels_as_text(tmp_path):
    """A crafted database's labels, status and dates reach the terminal as text: the
    lines the commands print themselves (not through a table) escape control
    characters, so an OSC title or a cursor move in a stored label is shown, not sent."""
    from regtrack.results import baselines
    from regtrack.results.store import Store
    from regtrack.targets.versions import Target

    db = tmp_path / "r.db"
    store = Store.open(db)
    run_id = store.create_run(["regtrack", "run"], stored_plan(metric="throughput"), {}, {})
    store.add_target(run_id, 0, Target("a", "bin:/x", "bin"), {})
    store.finish_run(run_id, "complete")
    baselines.save(store, "shipped", run_id, "a")
    hostile = "a\x1b]0;pwned\x07\x1b[2J"
    store.conn.execute("UPDATE targets SET label = ?", (hostile,))
    store.conn.execute("UPDATE baselines SET label = ?", (hostile,))
    store.conn.execute("UPDATE runs SET status = ?, created_at = ?", ("\x1b[31mok", "\x9b1m"))
    store.close()
    for argv in (["compare", "--list"], ["baseline", "list"]):
        proc = cli_in_process(*argv, "--db", str(db))
        assert proc.returncode == 0, proc.stderr
        assert not any(ch in proc.stdout for ch in "\x1b\x07\x9b"), repr(proc.stdout)
        assert r"a\x1b]0;pwned\x07" in proc.stdout, proc.stdout
