"""The built-in files state each default the code has, at the code's value: a user reads
configs/regtrack.toml and configs/workloads/get-pipeline.toml to learn what regtrack does
when a setting is left out, so neither may drift from core/settings.py or
workloads/model.py. Fast: files and models only, nothing runs."""

from __future__ import annotations

import re

import pytest

from regtrack.core.settings import (
    RunSettings,
    Thresholds,
    builtin_config_dir,
    load_settings,
    load_thresholds,
    read_toml,
)
from regtrack.workloads.model import GetPipelineWorkload

SETTINGS = builtin_config_dir() / "regtrack.toml"
GET_SWEEP = builtin_config_dir() / "workloads" / "get-pipeline.toml"


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
