"""HTML reports from real runs, opened in headless Chromium (Debian's chromium).

Screenshots of each page type go to tests/artifacts/screenshots/ for a person to look at.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from regtrack.analysis.records import PointComparison
from regtrack.output import answer_text
from tests import fakebench
from tests.conftest import ARTIFACTS, SHORT_RUN, cli_in_process, quiet_configs, run_cli

SCREENSHOTS = ARTIFACTS / "screenshots"
HOSTILE = "<script>alert('x')</script>"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """Three runs in one database, each `regtrack run` writing the report next to it: two
    GET sweeps of modelled trials (tests/fakebench.py; one version behind a path that holds
    HTML) and a real command mix whose trials include invalid ones."""
    server = shutil.which("redis-server")
    if not server or not shutil.which("redis-benchmark"):
        pytest.skip("redis-server and redis-benchmark are needed (apt-get install redis)")
    folder = tmp_path_factory.mktemp("report")
    hostile_dir = folder / "<script>alert('x')<" / "script>"
    hostile_dir.mkdir(parents=True)
    (hostile_dir / "redis-server").symlink_to(server)
    # This is about pages, not noise: a busy machine must not leave cells without a valid
    # trial (the history shows trusted cells only).
    configs = folder / "configs"
    configs.mkdir()
    (configs / "regtrack.toml").write_text(
        "[run]\ncontention_limit_pct = 100\nclient_bound_cpu_pct = 100\nserver_bound_cpu_pct = 0\n"
    )
    env = {"REGTRACK_CONFIG_DIR": str(configs)}
    db = folder / "r.db"
    sweep = ["--pipelines", "1,10", "--repetitions", "2", *SHORT_RUN, "--db", str(db)]
    model = fakebench.Model()
    for _ in range(2):
        proc = cli_in_process(
            "run", "--versions", f"a=bin:{hostile_dir}/redis-server,b=bin:{server}",
            *sweep, env=env, measuring=model,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
    proc = run_cli(
        "run", "--versions", f"bin:{server}", "--workload", "list-queue", "--loadgen",
        "builtin", "--pipelines", "1", "--repetitions", "1", *SHORT_RUN, "--db", str(db),
        env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"Report: {folder}/run-3.html" in proc.stdout
    return db, env


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield instance
        instance.close()


class Page:
    """A page opened in Chromium, with every console error and JS exception recorded."""

    def __init__(self, browser, path: Path):
        self.page = browser.new_page(viewport={"width": 1300, "height": 900})
        self.problems: list[str] = []
        self.dialogs: list[str] = []
        self.page.on(
            "console",
            lambda m: self.problems.append(m.text) if m.type in ("error", "warning") else None,
        )
        self.page.on("pageerror", lambda e: self.problems.append(str(e)))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.goto(path.as_uri())
        self.wait_for_charts()

    def wait_for_charts(self) -> None:
        self.page.wait_for_function(
            "() => [...document.querySelectorAll('.chart')].every(c => c.dataset.drawn === '1')",
            timeout=20_000,
        )

    def shot(self, name: str) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)

    def clean(self) -> None:
        assert not self.problems, self.problems
        assert not self.dialogs, f"a script from the data ran: {self.dialogs}"


def test_the_index_lists_every_run_and_filters(measured, browser):
    db, _ = measured
    page = Page(browser, db.parent / "index.html")
    rows = page.page.locator("#runs tr.run")
    assert rows.count() == 3
    assert rows.first.locator("a").inner_text() == "run 3", "newest first"
    page.page.select_option("#filter-workload", "list-queue")
    assert page.page.locator("#runs tr.run:not(.hidden)").count() == 1
    page.page.select_option("#filter-workload", "")
    page.page.fill("#filter-version", "script>alert")
    assert page.page.locator("#runs tr.run:not(.hidden)").count() == 2
    page.page.fill("#filter-version", "")
    page.shot("index")
    page.page.click("#runs a:text-is('run 1')")
    page.wait_for_charts()
    assert page.page.locator("h1").inner_text().startswith("Run 1")
    page.clean()


def test_the_run_page_draws_every_chart_and_shows_compare_numbers(measured, browser):
    db, env = measured
    page = Page(browser, db.parent / "run-2.html")
    charts = page.page.locator(".chart")
    assert charts.count() >= 3, "throughput, syscalls and latency at least"
    assert page.page.locator(".chart .main-svg").count() >= charts.count()
    records = json.loads(
        cli_in_process("compare", "--db", str(db), "--run", "2", "--format", "json", env=env).stdout
    )["records"]
    rows = page.page.locator("#comparisons tr.cmp")
    assert rows.count() == len(records)
    shown = {(r.get_attribute("data-metric"), r.get_attribute("data-point")): r for r in rows.all()}
    for rec in records:
        row = shown[(rec["metric"], rec["point"])]
        assert row.get_attribute("data-verdict") == rec["verdict"]
        if rec["change_pct"] is not None:
            assert float(row.get_attribute("data-change")) == pytest.approx(rec["change_pct"])
        assert row.locator("td.change").inner_text() == answer_text.change_text(
            PointComparison.from_json(rec)
        )
    # The pooled answer per metric, and the seed every repetition's servers started with.
    pooled = page.page.locator("#pooled li")
    assert pooled.count() >= 1
    assert {p.get_attribute("data-metric") for p in pooled.all()} >= {"throughput"}
    seeds = page.page.locator("#seeds").inner_text()
    assert seeds.startswith("fixed: rep 1 ") and ", rep 2 " in seeds
    markdown = page.page.locator("#markdown").input_value()
    assert (
        markdown.strip()
        == cli_in_process(
            "compare", "--db", str(db), "--run", "2", "--format", "markdown"
        ).stdout.strip()
    )
    page.shot("run")
    page.clean()


def test_a_label_holding_html_is_shown_as_text(measured, browser):
    db, _ = measured
    page = Page(browser, db.parent / "run-1.html")
    spec_cell = page.page.locator("#versions tbody tr").first
    assert HOSTILE in spec_cell.inner_text()
    html = (db.parent / "run-1.html").read_text()
    assert HOSTILE not in html and "&lt;script&gt;alert(" in html
    index = (db.parent / "index.html").read_text()
    assert HOSTILE not in index
    page.clean()


def test_the_mix_run_page_breaks_down_commands_and_lists_invalid_trials(measured, browser):
    db, _ = measured
    page = Page(browser, db.parent / "run-3.html")
    commands = page.page.locator("#commands tbody tr td:nth-child(4)").all_inner_texts()
    assert {"lpush", "brpop"} <= {c.lower() for c in commands}, commands
    invalid = page.page.locator("#invalid tbody tr")
    stored = (
        sqlite3.connect(db)
        .execute("SELECT COUNT(*) FROM trials WHERE run_id = 3 AND valid = 0")
        .fetchone()[0]
    )
    assert invalid.count() == stored >= 1, "the built-in driver's throughput is never valid"
    assert "built-in driver" in invalid.first.inner_text()
    page.clean()


def test_history_pages_link_runs_both_ways(measured, browser):
    db, _ = measured
    page = Page(browser, db.parent / "run-2.html")
    link = page.page.locator("#history-links a", has_text="pipeline=10 · throughput")
    link.click()
    page.wait_for_charts()
    assert page.page.locator("h1").inner_text().startswith("History: get-pipeline")
    values = page.page.locator("#values tbody tr")
    assert values.count() == 4, "two runs x two versions"
    traces = {t for t in page.page.locator("#values tbody tr td:nth-child(3)").all_inner_texts()}
    assert len(traces) == 2, "a=<hostile path> and b=redis-server are two series"
    page.shot("history")
    page.page.locator("#values a", has_text="run 1").first.click()
    page.wait_for_charts()
    assert page.page.locator("h1").inner_text().startswith("Run 1")
    page.clean()


def test_report_command_and_its_errors(measured, tmp_path):
    db, _ = measured
    out = tmp_path / "elsewhere"
    proc = cli_in_process("report", "--db", str(db), "--out", str(out), "--run", "1")
    assert proc.returncode == 0, proc.stderr
    assert (out / "run-1.html").is_file() and not (out / "run-2.html").exists()
    assert (out / "plotly.min.js").is_file() and (out / "index.html").is_file()
    assert len(list(out.glob("history-*.html"))) >= 4
    unknown = cli_in_process("report", "--db", str(db), "--out", str(out), "--run", "99")
    assert unknown.returncode == 2
    assert re.fullmatch(r"regtrack: error: run 99 is not in .*\n", unknown.stderr)
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    proc = cli_in_process("report", "--db", str(db), "--out", str(blocked / "sub"))
    assert proc.returncode == 2 and "cannot create the report folder" in proc.stderr
    missing = cli_in_process("report", "--db", str(tmp_path / "none.db"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_the_run_page_shows_the_verdicts_the_terminal_printed(tmp_path, browser, monkeypatch):
    """`run --threshold 20 --baseline b` prints b as the baseline and 20% thresholds; the
    page (written by that run) and a later plain `compare` use the same (modelled trials)."""
    model = fakebench.Model()
    server = shutil.which("redis-server")
    env = quiet_configs(tmp_path, server_bound_cpu_pct=0)
    db = tmp_path / "r.db"
    proc = cli_in_process(
        "run", "--versions", f"a=bin:{server},b=bin:{server}", "--pipelines", "1,10",
        "--repetitions", "2", *SHORT_RUN, "--threshold", "20", "--baseline", "b",
        "--db", str(db), env=env, measuring=model,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "% change a vs b" in proc.stdout
    asked = ["compare", "--db", str(db), "--run", "1", "--format", "json"]
    terminal = json.loads(
        cli_in_process(*asked, "--threshold", "20", "--baseline", "b", env=env).stdout
    )["records"]
    assert json.loads(cli_in_process(*asked, env=env).stdout)["records"] == terminal
    assert {r["baseline"] for r in terminal} == {"b"}
    page = Page(browser, tmp_path / "run-1.html")
    rows = {
        (r.get_attribute("data-metric"), r.get_attribute("data-point")): r
        for r in page.page.locator("#comparisons tr.cmp").all()
    }
    assert len(rows) == len(terminal)
    for rec in terminal:
        row = rows[(rec["metric"], rec["point"])]
        assert row.get_attribute("data-verdict") == rec["verdict"]
        assert row.get_attribute("data-candidate") == rec["candidate"] == "a"
        assert row.locator("td.change").inner_text() == answer_text.change_text(
            PointComparison.from_json(rec)
        )
    page.clean()


def test_a_point_without_a_valid_trial_is_not_drawn_as_measured(tmp_path, browser):
    """Every trial is invalid here (a 1% client-bound limit): the charts draw no line
    through such cells, only markers named 'no valid trial'."""
    server = shutil.which("redis-server")
    env = quiet_configs(tmp_path, client_bound_cpu_pct=1, server_bound_cpu_pct=0)
    db = tmp_path / "r.db"
    proc = run_cli(
        "run", "--versions", f"a=bin:{server}", "--pipelines", "1,10", "--repetitions", "1",
        *SHORT_RUN, "--db", str(db), env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    page = Page(browser, tmp_path / "run-1.html")
    traces = page.page.evaluate(
        "() => [...document.querySelectorAll('.chart')].flatMap("
        "c => c.data.map(t => ({name: t.name, y: t.y})))"
    )
    lines = [t for t in traces if not t["name"].endswith("no valid trial")]
    markers = [t for t in traces if t["name"].endswith("no valid trial")]
    assert markers and all(all(v is not None for v in t["y"]) for t in markers), traces
    assert lines and all(all(v is None for v in t["y"]) for t in lines), traces
    page.clean()
