"""The built-in files state each default the code has, at the code's value: a user reads
configs/regtrack.toml and configs/workloads/get-pipeline.toml (and the option table of
docs/usage.md, the inputs of action.yml) to learn what regtrack does when a setting is
left out, so none may drift from core/settings.py, core/options.py or workloads/model.py.
Fast: files and models only, nothing runs."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from regtrack.core.option_spec import GetSweep
from regtrack.core.options import Options, specs
from regtrack.core.settings import (
    RunSettings,
    Thresholds,
    builtin_config_dir,
    load_settings,
    load_thresholds,
    read_toml,
)
from regtrack.workloads.model import GetPipelineWorkload, MixWorkload

SETTINGS = builtin_config_dir() / "regtrack.toml"
GET_SWEEP = builtin_config_dir() / "workloads" / "get-pipeline.toml"
ROOT = Path(__file__).resolve().parent.parent


def _defaults(model: type) -> dict[str, object]:
    """Each field of a pydantic model with its default (factories called)."""
    return {
        name: field.get_default(call_default_factory=True)
        for name, field in model.model_fields.items()
    }


def test_the_run_table_states_every_setting_at_its_default():
    stated = read_toml(SETTINGS)["run"]
    defaults = _defaults(RunSettings)
    unset = {name for name, value in defaults.items() if value is None}
    assert set(stated) == set(defaults) - unset, "a setting the file leaves out, or one unknown"
    read = load_settings(SETTINGS)
    for name in stated:
        assert getattr(read, name) == defaults[name], (name, stated[name], defaults[name])
    text = SETTINGS.read_text()
    for name in unset:  # no value to state: shown as a commented example
        assert re.search(rf"^# {name} = ", text, re.MULTILINE), name


def test_the_verdict_table_states_every_threshold_at_its_default():
    """Under the key names load_thresholds reads (throughput_pct is Thresholds.throughput)."""
    stated = read_toml(SETTINGS)["verdict"]
    assert {key.removesuffix("_pct") for key in stated} == set(Thresholds.model_fields)
    assert load_thresholds(path=SETTINGS) == Thresholds()


@pytest.mark.parametrize("changed", ["duration", "throughput_pct"])
def test_a_drifted_file_is_caught(tmp_path, changed):
    """The comparisons above can fail: a file with one value changed differs."""
    drifted = tmp_path / "regtrack.toml"
    drifted.write_text(
        re.sub(rf"^{changed} = .*$", f"{changed} = 7.5", SETTINGS.read_text(), flags=re.M)
    )
    assert (load_settings(drifted), load_thresholds(path=drifted)) != (
        RunSettings(),
        Thresholds(),
    )


def test_the_get_sweep_file_states_the_models_defaults():
    """A get-pipeline file of a user's own that leaves out keys or depths gets the built-in
    sweep: the model's defaults are that file's values."""
    stated = read_toml(GET_SWEEP)
    defaults = _defaults(GetPipelineWorkload)
    for name in ("keys", "data_size", "clients", "pipelines"):
        assert name in stated, f"the built-in sweep states {name}"
    for name, value in stated.items():
        if name not in ("name", "kind", "description"):
            assert value == defaults[name], (name, value, defaults[name])


def _option_default(name: str, command: str) -> Any:
    """What ``command`` uses for option ``name`` when it is left out: its own default, else
    the setting behind it, else the field's; the workload's for the GET sweep's fields."""
    spec = specs()[name]
    field_default = {f.name: f.default for f in dataclasses.fields(Options)}[name]
    value = spec.default(command, field_default)
    if isinstance(value, GetSweep):
        return list(value.depths)
    if value is None and spec.setting:
        return _defaults(RunSettings)[spec.setting]
    if value is None and name in GetPipelineWorkload.model_fields:
        return _defaults(GetPipelineWorkload)[name]
    return value


def _text(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _shown(value: Any) -> str:
    """A default as docs/usage.md writes it: 10 s -> 10, 1,5,10 -> [1, 5, 10]."""
    text = value.strip().strip("`").removesuffix(" s")
    return f"[{text.replace(',', ', ')}]" if re.fullmatch(r"[\d,]+,\d+", text) else text


def _usage_table() -> dict[str, dict[str, str]]:
    """The "Options worth knowing" table: each option's default, per command ("run": the
    first value; "ci", "bisect": a parenthesis naming them)."""
    text = (ROOT / "docs" / "usage.md").read_text()
    table = text.split("## Options worth knowing", 1)[1].split("\n\n")[1]
    found: dict[str, dict[str, str]] = {}
    for row in table.splitlines()[2:]:
        names = re.findall(r"`--([a-z-]+)", row.split("|")[1])
        cell = row.split("|")[2].strip()
        plain, _, own = cell.partition(" (`")
        values = {"run": re.split(r", (?![^(]*\))", plain)}
        for part in ("`" + own.rstrip(")")).split("; ") if own else ():
            commands, _, listed = part.partition(": ")
            for command in re.findall(r"`(\w+)`", commands):
                values[command] = listed.split(", ")
        for i, name in enumerate(names):
            found[name.replace("-", "_")] = {
                c: _shown(v[i]) for c, v in values.items() if len(v) > i
            }
    return found


PINNED = (
    "workload", "pipelines", "duration", "warmup", "repetitions", "keys", "data_size",
    "clients", "pairing", "window", "metric", "budget", "max_repetitions", "runtime",
    "docker_images", "instruction_requests",
)  # fmt: skip


def test_the_usage_table_shows_each_commands_defaults():
    """docs/usage.md's option table, for every option whose default is a value."""
    table = _usage_table()
    for name in PINNED:
        assert "run" in table[name], f"docs/usage.md shows no default for --{name}"
        for command, shown in table[name].items():
            assert shown == _text(_option_default(name, command)), (name, command, shown)


def test_the_actions_inputs_say_cis_defaults():
    inputs = yaml.safe_load((ROOT / "action.yml").read_text())["inputs"]
    for name in ("workload", "metric", "budget", "runtime"):
        said = re.search(r"\(default ([^)]+)\)", inputs[name]["description"])
        assert said and said.group(1) == _text(_option_default(name, "ci")), name
    said = inputs["threshold"]["description"]
    assert f"instructions per op {Thresholds().instructions:g}" in said
    assert f"throughput {Thresholds().throughput:g}" in said


def _stated(model: type, pairs: list[tuple[str, str]]) -> None:
    """Each (field, default as written) equals the model's default (strings unquoted)."""
    defaults = _defaults(model)
    assert pairs, model
    for name, written in pairs:
        expected = defaults[name]
        shown = written.strip().strip('"') if isinstance(expected, str) else written.strip()
        assert shown == _text(expected), (model.__name__, name, written, expected)


def test_the_workload_docs_say_the_models_defaults():
    """docs/workloads.md: get-pipeline's fields (`keys` (100000), ...) and the mix table."""
    text = (ROOT / "docs" / "workloads.md").read_text()
    sweep = text.split('## `kind = "get-pipeline"`', 1)[1].split("\n\n")[1]
    _stated(GetPipelineWorkload, re.findall(r"`(\w+)` \(([^()]*(?:\[[^]]*\])?)\)", sweep))
    table = text.split('## `kind = "mix"`', 1)[1].split("\n\n")[1]
    pairs = []
    for row in table.splitlines()[2:]:
        names = re.findall(r"`(\w+)`", row.split("|")[1])
        values = re.split(r", (?![^[]*\])", row.split("|")[2].strip())
        pairs += [
            (name, value)
            for name, value in zip(names, values, strict=False)
            if name in MixWorkload.model_fields and name != "name"  # "file name"
        ]
    _stated(MixWorkload, pairs)
