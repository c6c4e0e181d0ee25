"""What scripts read (issue 31): every listing and result as JSON with a schema_version,
CSV with numbers in their own fields, tables as wide as the terminal, and --summary that
replaces its file unless --append. On the golden database (tests/test_golden.py): one
modelled run and one ci run, built once."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from tests import fakebench
from tests.conftest import cli_in_process
from tests.test_golden import stored as stored  # the database, built once per module

VERDICTS = {"regression", "improvement", "no change", "inconclusive"}


def _ok(*args: str, env: dict[str, str] | None = None, measuring: Any = None) -> str:
    proc = cli_in_process(*args, env=env, measuring=measuring)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_compare_csv_has_numbers_in_fields_and_the_pooled_answers(stored):
    text = _ok("compare", "--run", "1", "--format", "csv", "--db", str(stored / "r.db"))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows and {r["verdict"] for r in rows} <= VERDICTS
    for row in rows:
        for field in ("change_pct", "ci_low_pct", "ci_high_pct", "threshold_pct", "n"):
            float(row[field])  # a number, not "+7.2% [-8.5, +25.4] inconclusive"
        assert row["gating"] in ("0", "1") and row["trusted"] in ("0", "1")
    pooled = [r for r in rows if r["point"] == "pooled"]
    assert {r["metric"] for r in pooled} >= {"throughput", "instructions_per_op"}
    assert all(r["baseline_value"] == "" for r in pooled), "a pooled answer has no median"
    points = [r for r in rows if r["point"] != "pooled"]
    assert all(float(r["baseline_value"]) > 0 for r in points)


def test_listings_and_history_are_json_with_a_schema_version(stored):
    db = ["--db", str(stored / "r.db")]
    runs = json.loads(_ok("compare", "--list", "--format", "json", *db))
    assert runs["schema_version"] == 2 and [r["id"] for r in runs["runs"]] == [2, 1]
    assert runs["runs"][1]["labels"] == ["a", "b"]
    history = json.loads(_ok("history", "--point", "pipeline=10", "--by", "run",
                             "--format", "json", *db))  # fmt: skip
    assert history["schema_version"] == 2 and history["kind"] == "history"
    assert history["history"] and all(
        isinstance(item["value"], float) for item in history["history"]
    )
    _ok("baseline", "save", "shipped", "--run", "1", "--label", "a", *db)
    saved = json.loads(_ok("baseline", "list", "--format", "json", *db))
    ((entry,),) = [saved["baselines"]]
    assert (entry["name"], entry["run_id"], entry["label"]) == ("shipped", 1, "a")
    assert saved["schema_version"] == 2 and len(entry["setup"]) >= 8
    unknown = cli_in_process("ci", "--baseline-name", "nope", "--candidate-version", "7.2.4", *db)
    assert unknown.returncode == 2 and "known: shipped (regtrack baseline save" in unknown.stderr


def test_tables_fit_the_terminal_width(stored):
    db = ["--db", str(stored / "r.db")]
    narrow = _ok("compare", "--run", "1", *db, env={"COLUMNS": "72"})
    assert max(len(line) for line in narrow.splitlines()) <= 72
    wide = _ok("compare", "--run", "1", *db, env={"COLUMNS": "160"})
    assert max(len(line) for line in wide.splitlines()) > 72, "nothing wrapped when it fits"


def test_summary_replaces_its_file_unless_append(tmp_path, monkeypatch, redis_server):
    model = fakebench.Model()
    summary = tmp_path / "s.md"
    summary.write_text("an earlier job's summary\n")
    args = ["ci", "--baseline-version", f"a=bin:{redis_server}", "--candidate-version",
            f"b=bin:{redis_server}", "--metric", "instructions", "--pipelines", "10",
            "--repetitions", "8", "--no-report", "--summary", str(summary)]  # fmt: skip
    _ok(*args, "--db", str(tmp_path / "one.db"), measuring=model)
    once = summary.read_text()
    assert "earlier" not in once and once.count("## regtrack:") == 1
    _ok(*args, "--append", "--db", str(tmp_path / "two.db"), measuring=model)
    assert summary.read_text().count("## regtrack:") == 2
