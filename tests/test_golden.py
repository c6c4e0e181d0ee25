"""Refactoring keeps the answers: the same invocations on one stored database give the same
numbers and verdicts as when tests/golden/ was recorded.

The database is built once per session from modelled trials (tests/fakebench.py, seeds
fixed by a settings file), so it is the same on every machine: a `run` of two versions at
two pipeline depths, throughput and instructions, then a `ci` that decides and stores its
own run. Each invocation's output is reduced to its facts (every number and verdict word,
in order; for JSON every leaf by its path), so a table drawn wider or a reworded heading
does not matter but a changed number, verdict or JSON key does. After a deliberate change
of output, record again with ``REGTRACK_UPDATE_GOLDEN=1`` and review the diff.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests import fakebench
from tests.conftest import cli_in_process, redis_server_path

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("REGTRACK_UPDATE_GOLDEN") == "1"
MODEL = {
    "instructions": {"a": 3500.0, "b": 3570.0},  # +2%
    "throughput": {"a": 400_000.0, "b": 380_000.0},  # -5%
}
# What differs between machines and days, not between versions of regtrack.
VOLATILE = [
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?"), "<time>"),
    (re.compile(r"/\S*/(redis-server|r\.db|ci\.db|r\.json)"), r"<path>/\1"),
    (re.compile(r"\b\d+(\.\d+)? ?(s|ms|min)\b(?! \[)"), "<duration>"),
    (re.compile(r"\b[0-9a-f]{12,40}\b"), "<hash>"),
    (re.compile(r"\bsetup [0-9a-f]{8}\b"), "setup <hash>"),  # the environment's digest
    (re.compile(r"\bkernel \S+"), "kernel <kernel>"),
    (re.compile(r"\bEnvironment: .*?, (\d+ CPUs)"), r"Environment: <cpu model>, \1"),
]
VERDICTS = re.compile(r"no change|regression|improvement|inconclusive|undecided|decided")
NUMBER = re.compile(r"[+-]?\d[\d,]*(?:\.\d+)?%?")
# JSON leaves that describe the machine or the moment, not the answer.
VOLATILE_KEYS = re.compile(
    r"(^|\.)(created|started|finished|date|time|host|hostname|kernel|cpu_model|path|binary|"
    r"environment|env|wall_s|elapsed_s|duration_s|version_info|tools|db|json|report)(\.|$)"
)


def _normal(text: str) -> str:
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return text


def facts(text: str) -> list[str]:
    """Every number and verdict word of a text output, in order."""
    found = []
    for line in _normal(text).splitlines():
        found += [m.group(0) for m in re.finditer(f"{VERDICTS.pattern}|{NUMBER.pattern}", line)]
    return found


def leaves(data: Any, path: str = "") -> dict[str, Any]:
    """A JSON document as {dotted path: value}, without the leaves that vary by machine."""
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(leaves(value, f"{path}.{key}" if path else str(key)))
        return out
    if isinstance(data, list):
        out = {}
        for i, value in enumerate(data):
            out.update(leaves(value, f"{path}[{i}]"))
        return out
    if VOLATILE_KEYS.search(re.sub(r"\[\d+\]", "", path)):
        return {}
    if isinstance(data, str):
        return {path: _normal(data)}
    if isinstance(data, float):
        return {path: round(data, 6)}
    return {path: data}


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Path:
    """One database: a modelled `run` of a and b, then a `ci` of b against a."""
    redis_server = redis_server_path()
    root = tmp_path_factory.mktemp("golden")
    configs = root / "configs"
    configs.mkdir()
    (configs / "regtrack.toml").write_text("[run]\nseed_offset = 0\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REGTRACK_CONFIG_DIR", str(configs))
        model = fakebench.Model(**MODEL)  # type: ignore[arg-type]
        versions = f"a=bin:{redis_server},b=bin:{redis_server}"
        run = cli_in_process(
            "run", "--versions", versions, "--metric", "both", "--pipelines", "1,10",
            "--repetitions", "4", "--db", str(root / "r.db"), "--no-report", measuring=model,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        ci = cli_in_process(
            "ci", "--baseline-version", f"a=bin:{redis_server}",
            "--candidate-version", f"b=bin:{redis_server}",
            "--pipelines", "10", "--metric", "both", "--db", str(root / "r.db"),
            "--json", str(root / "ci.json"), "--no-report", measuring=model,
        )  # fmt: skip
        assert ci.returncode == 1, ci.stdout + ci.stderr  # b is 5% slower: a regression
        (root / "ci.txt").write_text(ci.stdout)
    return root


def _check(name: str, found: Any) -> None:
    path = GOLDEN / f"{name}.json"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(json.dumps(found, indent=1, ensure_ascii=False) + "\n")
    recorded = json.loads(path.read_text())
    if isinstance(recorded, dict):
        missing = {k: v for k, v in recorded.items() if found.get(k) != v}
        assert not missing, {k: (v, found.get(k)) for k, v in missing.items()}
    else:
        assert found == recorded


INVOCATIONS = {
    "compare": ["compare"],
    "compare-run1": ["compare", "--run", "1"],
    "compare-csv": ["compare", "--run", "1", "--format", "csv"],
    "compare-across-runs": [
        "compare",
        "--run",
        "2",
        "--candidate",
        "b",
        "--baseline",
        "a",
        "--baseline-run",
        "1",
        "--force",
    ],
    "explain": ["explain", "--run", "1", "--baseline", "a", "--candidate", "b"],
    "history": ["history", "--point", "pipeline=10", "--by", "run"],
}


@pytest.mark.parametrize("name", sorted(INVOCATIONS))
def test_a_stored_database_gives_the_recorded_answers(stored, name):
    proc = cli_in_process(*INVOCATIONS[name], "--db", str(stored / "r.db"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _check(name, facts(proc.stdout))


def test_compare_json_and_the_gate_give_the_recorded_answers(stored):
    proc = cli_in_process("compare", "--run", "1", "--format", "json", "--db",
                          str(stored / "r.db"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    _check("compare-json", leaves(json.loads(proc.stdout)))
    _check("ci-json", leaves(json.loads((stored / "ci.json").read_text())))
    _check("ci-text", facts((stored / "ci.txt").read_text()))
