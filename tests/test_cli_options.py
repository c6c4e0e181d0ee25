"""The measuring commands' options, declared once (core/options.py): each command's --help
shows the defaults it really uses, -h works everywhere, renamed options keep their old
spelling with a warning, and a config file sets any option's default or fails in one line.

Nothing is measured: the step that would build and measure is replaced by one that keeps
the options it was handed and stops.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import click
import pytest

from regtrack.cli import cli
from regtrack.cli.options import StagedOption, default_map, renamed_args
from regtrack.core.option_spec import STAGES, THRESHOLD
from regtrack.core.options import Options, command_defaults, specs
from regtrack.results.store import Store
from tests.conftest import cli_in_process

MEASURING = {
    "run": ["--versions", "7.0.15,7.2.4"],
    "ci": ["--baseline-version", "7.0.15", "--candidate-version", "7.2.4"],
    "bisect": ["--good", "7.0.15", "--bad", "7.2.4"],
}


@pytest.fixture(autouse=True)
def no_user_config(tmp_path, monkeypatch):
    """The tests' own settings only: none of the machine's user's, none from the shell."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for name in ("REGTRACK_CONFIG_DIR", "REGTRACK_CONFIG", "REGTRACK_DB", "REGTRACK_SOURCE_REPO"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def captured(monkeypatch) -> dict[str, Any]:
    """What run and ci hand to prepare, and bisect to bisect_request.start, instead of measuring."""
    from regtrack.cli import steps
    from regtrack.flows import bisect_request

    seen: dict[str, Any] = {}

    def prepare(specs, options):
        seen.update(specs=[s.text for s in specs], options=options)
        raise SystemExit(0)

    def start(request, db):
        seen.update(specs=[request.good, request.bad], options=request.options)
        raise SystemExit(0)

    monkeypatch.setattr(steps, "prepare", prepare)
    monkeypatch.setattr(bisect_request, "start", start)
    return seen


def _used(captured: dict[str, Any], *argv: str) -> Options:
    proc = cli_in_process(*argv)
    assert proc.returncode == 0, proc.stderr
    return captured.pop("options")


def _shown_defaults(command: str) -> dict[str, str | None]:
    """Each option's default as `regtrack COMMAND --help` prints it (None: none shown)."""
    root = click.Context(cli, info_name="regtrack", show_default=True)
    root.default_map = default_map(root)
    cmd = cli.commands[command]
    ctx = click.Context(cmd, info_name=command, parent=root)
    return {
        p.name: p.get_help_extra(ctx).get("default")
        for p in cmd.params
        if isinstance(p, click.Option) and p.name in specs()
    }


def _as_shown(value: Any, option: StagedOption) -> str | None:
    if isinstance(value, bool):
        return (option.opts if value else option.secondary_opts or [""])[0].lstrip("-") or None
    if value is None:
        return option.unset
    if isinstance(value, list | tuple):
        return ",".join(map(str, value)) or None
    return str(value)


@pytest.mark.parametrize("command", list(MEASURING))
def test_help_shows_the_defaults_the_command_uses(command, captured):
    used = _used(captured, command, *MEASURING[command])
    shown = _shown_defaults(command)
    params = {p.name: p for p in cli.commands[command].params}
    assert shown, "the measuring options are generated"
    for name, text in shown.items():
        expected = _as_shown(getattr(used, name), params[name])
        if name == "pipelines" and text and "for get-pipeline" in text:
            assert text.startswith(f"{expected} for get-pipeline"), (name, text, expected)
        else:
            assert text == expected, (name, text, expected)


def test_each_command_declares_its_own_defaults(captured):
    """ci and bisect measure short trials in blocks; run's come from the settings."""
    run = _used(captured, "run", *MEASURING["run"])
    ci = _used(captured, "ci", *MEASURING["ci"])
    bisect = _used(captured, "bisect", *MEASURING["bisect"])
    assert (run.duration, run.warmup, run.repetitions, run.instruction_requests) == (
        10.0, 2.0, 3, 200_000,
    )  # fmt: skip
    assert (run.metric, run.pipelines) == ("throughput", None)
    for used, metric in ((ci, "both"), (bisect, "instructions")):
        assert (used.duration, used.warmup, used.repetitions) == (3.0, 1.0, 4)
        assert (used.instruction_requests, used.metric, used.pipelines) == (
            100_000,
            metric,
            [10, 30],
        )
    assert command_defaults("ci").duration == 3.0
    mix = _used(captured, "ci", *MEASURING["ci"], "--workload", "list-queue")
    assert mix.pipelines is None, "the GET sweep's depths are no default of a mix"


def test_the_printed_help_shows_them(captured):
    run = cli_in_process("run", "--help")
    ci = cli_in_process("ci", "--help")
    assert run.returncode == ci.returncode == 0
    flat = {name: " ".join(p.stdout.split()) for name, p in (("run", run), ("ci", ci))}
    assert "per trial. [default: 10.0]" in flat["run"]
    assert "per trial. [default: 3.0]" in flat["ci"]
    assert "Requests per instruction trial. [default: 100000]" in flat["ci"]
    for stage in ("Versions:", "Workload:", "CPUs:", "Measuring:", "Statistics:", "Output:"):
        assert stage in run.stdout and stage in ci.stdout


def test_every_option_has_a_stage():
    assert all(spec.stage in STAGES for spec in specs().values())
    for command in MEASURING:
        for param in cli.commands[command].params:
            if isinstance(param, click.Option) and param.name != "help":
                assert getattr(param, "stage", None) in STAGES, (command, param.name)


def test_threshold_is_one_option_wherever_verdicts_are_read():
    """run, ci, compare and bisect each declared --threshold (compare's and bisect's with
    their own help): now one declaration gives all of them one help, range and default."""
    found = {}
    for path in _commands(cli):
        command = cli.get_command(click.Context(cli), path[0]) if path else None
        for name in path[1:]:
            command = command.get_command(click.Context(command), name)
        for param in command.params if command is not None else ():
            if "--threshold" in getattr(param, "opts", ()):
                found[" ".join(path)] = param
    assert set(found) == set(THRESHOLD.commands)
    shapes = {(p.name, p.help, p.type.bound, p.default, p.stage, p.unset) for p in found.values()}
    assert len(shapes) == 1, shapes
    assert shapes.pop()[1:3] == (THRESHOLD.help, THRESHOLD.bound)


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path]
    for name, sub in group.commands.items():
        if isinstance(sub, click.Group):
            found += _commands(sub, (*path, name))
        else:
            found.append((*path, name))
    return found


@pytest.mark.parametrize("path", _commands(cli), ids=lambda p: " ".join(p) or "regtrack")
def test_dash_h_is_help(path):
    short, long = cli_in_process(*path, "-h"), cli_in_process(*path, "--help")
    assert short.returncode == 0, short.stderr
    assert short.stdout.startswith("Usage: regtrack") and short.stdout == long.stdout


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (["--baseline", "7.0.15", "--candidate", "7.2.4"], ["--baseline", "--candidate"]),
        (["--baseline=7.0.15", "--candidate-version", "7.2.4"], ["--baseline"]),
    ],
)
def test_ci_old_spellings_still_work_and_warn(captured, old, new):
    proc = cli_in_process("ci", *old)
    assert proc.returncode == 0, proc.stderr
    assert captured["specs"] == ["7.0.15", "7.2.4"]
    warnings = proc.stderr.strip().splitlines()
    assert warnings == [
        f"regtrack: warning: {name} is deprecated: use {name}-version" for name in new
    ]


def test_ci_baseline_run_is_now_baseline_name(tmp_path):
    db = tmp_path / "r.db"
    Store.open(db).close()
    proc = cli_in_process("ci", "--baseline-run", "nope", "--candidate-version", "7.2.4",
                          "--db", str(db))  # fmt: skip
    assert proc.returncode == 2
    warning, error = proc.stderr.strip().splitlines()
    assert warning == "regtrack: warning: --baseline-run is deprecated: use --baseline-name"
    assert "no baseline named 'nope'" in error


@pytest.mark.parametrize("command", ["compare", "history"])
def test_metric_of_what_is_shown_is_now_show(tmp_path, command):
    db = tmp_path / "r.db"
    Store.open(db).close()
    extra = ["--list"] if command == "compare" else []
    proc = cli_in_process(command, *extra, "--metric", "throughput", "--db", str(db))
    assert "regtrack: warning: --metric is deprecated: use --show" in proc.stderr.splitlines()
    assert "no such option" not in proc.stderr


def test_renamed_args_stop_at_a_double_dash():
    renamed = {"--metric": "--show"}
    assert renamed_args(["--metric=a", "--", "--metric"], renamed) == ["--show=a", "--", "--metric"]


def test_a_config_file_sets_defaults(tmp_path, captured):
    config = tmp_path / "mine.toml"
    config.write_text(
        '[defaults]\nserver-cpus = "0"\nrepetitions = 6\n'
        "[defaults.ci]\nduration = 5\npipelines = [1, 10]\nreport = false\n"
    )
    ci = _used(captured, "--config", str(config), "ci", *MEASURING["ci"])
    run = _used(captured, "--config", str(config), "run", *MEASURING["run"])
    assert (ci.duration, ci.pipelines, ci.report, ci.server_cpus, ci.repetitions) == (
        5.0, [1, 10], False, "0", 6,
    )  # fmt: skip
    assert (run.duration, run.pipelines, run.report, run.server_cpus, run.repetitions) == (
        10.0, None, True, "0", 6,
    )  # fmt: skip
    given = _used(captured, "--config", str(config), "ci", *MEASURING["ci"], "--duration", "2")
    assert given.duration == 2.0, "the command line wins"
    shown = " ".join(cli_in_process("--config", str(config), "ci", "-h").stdout.split())
    assert "per trial. [default: 5]" in shown


def test_the_users_config_and_the_settings_run_table(tmp_path, monkeypatch, captured):
    """$XDG_CONFIG_HOME/regtrack/regtrack.toml is read unasked; its [run] duration is the
    default of every command without one of its own (run), not ci's."""
    user = tmp_path / "xdg" / "regtrack"
    user.mkdir(parents=True)
    (user / "regtrack.toml").write_text("[run]\nduration = 7\n[defaults.bisect]\nwarmup = 0.5\n")
    assert _used(captured, "run", *MEASURING["run"]).duration == 7.0
    assert _used(captured, "ci", *MEASURING["ci"]).duration == 3.0
    assert _used(captured, "bisect", *MEASURING["bisect"]).warmup == 0.5
    assert _shown_defaults("run")["duration"] == "7.0"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[defaults\n", "not valid TOML"),
        ("[defaults]\nnope = 1\n", "[defaults]: no command has an option 'nope'"),
        ("[defaults.ci]\nversions = 'x'\n", "[defaults.ci]: regtrack ci has no option 'versions'"),
        ("[defaults.cii]\nduration = 1\n", "[defaults.cii]: regtrack has no such command"),
        ("[defaults.ci]\nduration = 'long'\n", "[defaults.ci]: duration = 'long':"),
        ("[defaults.bisect]\nmetric = 'both'\n", "[defaults.bisect]: metric = 'both':"),
        ("[defaults.baseline]\nx = 1\n", "'x' is not a table"),
        ("defaults = 3\n", "[defaults] is not a table"),
    ],
)
def test_a_bad_config_file_is_one_line_and_exit_2(tmp_path, text, message):
    config = tmp_path / "bad.toml"
    config.write_text(text)
    proc = cli_in_process("--config", str(config), "run", "--versions", "7.0.15")
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"regtrack: error: {config}") and message in line, line


def test_options_round_trip_as_a_bisection_stores_them():
    """results/bisection_plan.py stores asdict(options) and reads them back as Options; an
    older regtrack's, with fewer fields, read with the defaults of the rest."""
    from regtrack.results.bisection_plan import BisectionPlan, BisectRequest

    options = Options(pipelines=[10], duration=3.0, server_config=("appendonly=yes",))
    asked = BisectRequest("v1", "v2", "throughput", 1.0, False, "10m", 30, options)
    doc = json.loads(json.dumps(BisectionPlan(asked, ("a" * 40, "b" * 40)).to_json()))
    assert doc["request"]["options"] == json.loads(json.dumps(dataclasses.asdict(options)))
    assert BisectionPlan.from_json(doc).request.options == options
    doc["request"]["options"] = {"workload": "get-pipeline", "pipelines": [10]}
    older = BisectionPlan.from_json(doc)
    assert older.request.options.budget == "10m" and older.to_json() == doc


def test_a_settings_directory_still_works(tmp_path, captured):
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "regtrack.toml").write_text("[run]\nrepetitions = 5\n")
    used = _used(captured, "--config", str(configs), "run", *MEASURING["run"])
    assert used.repetitions == 5
    assert Path(configs).is_dir()
