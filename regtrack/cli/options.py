"""The command line's options: the measuring commands' options, generated from their one
declaration (core/options.py); the help that shows every command's options by stage, with
its own defaults; and the `regtrack` command group, with the exit codes every command
documents, whose --config and settings file give any option its default (click's
default_map: what `--help` shows and what a command uses when an option is left out).

Defaults, lowest first: the option's declared default (core/options.py, a command's own
where it has one); for an option backed by a setting and a command without a default of
its own, the settings file's [run] value; [defaults] of the settings file (every command
with that option); [defaults.COMMAND] (that command only); then $REGTRACK_* variables and
the command line. A name or value the commands do not know is one line and exit 2.

Declarations only: nothing here imports what measures or analyses, so that `--help` and
`--version` start at once (steps.py holds the steps these commands share around bench).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from regtrack import __version__
from regtrack.core.errors import BadInput
from regtrack.core.limits import Bound
from regtrack.core.option_spec import STAGES, THRESHOLD, GetSweep, Spec, int_list
from regtrack.core.options import (
    Options,
    settle,
    specs,
)
from regtrack.core.settings import load_settings, option_defaults

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]
_FIELD_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Options)}


class Depths(click.ParamType):
    """--pipelines 1,10,30 (or a list in a config file) -> [1, 10, 30]."""

    name = "1,10,30"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value is None or isinstance(value, GetSweep):
            return value
        try:
            return int_list(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class Bounded(click.ParamType):
    """An int or float option held to its range (core/limits.py): inf, nan and 1e20 are
    one line naming the range, before anything starts. Not click's IntRange/FloatRange:
    FloatRange lets nan through, and both print the range into every --help line."""

    def __init__(self, kind: type, bound: Bound) -> None:
        self.kind = kind
        self.bound = bound
        self.name = "integer" if kind is int else "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value is None:
            return None
        try:
            number = self.kind(value)
        except (TypeError, ValueError, OverflowError):
            self.fail(self.bound.refusal(value, self.kind), param, ctx)
        if isinstance(value, float) and self.kind is int and number != value:
            self.fail(self.bound.refusal(value, self.kind), param, ctx)  # 2.5 is no count
        if not self.bound.holds(number):
            self.fail(self.bound.refusal(value, self.kind), param, ctx)
        return number


class StagedOption(click.Option):
    """An option that knows its stage (for grouped help) and what leaving it out means."""

    def __init__(self, *args: Any, stage: str | None = None, unset: str | None = None, **kw: Any):
        super().__init__(*args, **kw)
        self.stage = stage
        self.unset = unset

    def get_help_extra(self, ctx: click.Context) -> Any:
        extra = super().get_help_extra(ctx)
        if "default" not in extra and self.unset and not self.is_flag:
            extra["default"] = self.unset
        return extra


class StagedCommand(click.Command):
    """A command whose help groups options by stage and whose renamed options keep their
    old spelling working, with a one-line warning."""

    def __init__(self, *args: Any, renamed: Mapping[str, str] | None = None, **kw: Any):
        super().__init__(*args, **kw)
        self.renamed = dict(renamed or {})

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, renamed_args(args, self.renamed))

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        groups: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None and isinstance(param, click.Option):
                groups.setdefault(getattr(param, "stage", None) or "other", []).append(record)
        for stage in (*STAGES, "other"):
            if groups.get(stage):
                with formatter.section(TITLES[stage]):
                    formatter.write_dl(groups[stage])
        if self.renamed:
            with formatter.section("Renamed (the old spelling still works, with a warning)"):
                formatter.write_dl([(old, f"now {new}") for old, new in self.renamed.items()])


TITLES = {
    "versions": "Versions",
    "workload": "Workload",
    "CPUs": "CPUs",
    "measuring": "Measuring",
    "statistics": "Statistics",
    "output": "Output",
    "other": "Other options",
}


def renamed_args(args: list[str], renamed: Mapping[str, str]) -> list[str]:
    """``args`` with each deprecated spelling replaced by its new one, each said once."""
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            return out + args[i:]
        old, eq, value = arg.partition("=")
        if old in renamed:
            click.echo(f"regtrack: warning: {old} is deprecated: use {renamed[old]}", err=True)
            arg = renamed[old] + eq + value
        out.append(arg)
    return out


def _type(spec: Spec, command: str) -> Any:
    if spec.choices:
        return click.Choice(spec.command_choices.get(command, spec.choices))
    if spec.kind in ("int", "float"):
        kind = int if spec.kind == "int" else float
        return Bounded(kind, spec.bound) if spec.bound is not None else kind
    return {"ints": Depths(), "path": click.Path(dir_okay=False)}.get(spec.kind)


def spec_option(name: str, spec: Spec, command: str, default: Any = None) -> Decorator:
    """The click option ``spec`` declares, named ``name``, with ``command``'s default and help."""
    flag = spec.flag or "--" + name.replace("_", "-")
    unset = spec.unset or (f"regtrack.toml [run] {spec.setting}" if spec.setting else None)
    return click.option(
        f"{flag}/{spec.off_flag}" if spec.off_flag else flag,
        name,
        cls=StagedOption,
        stage=spec.stage,
        unset=unset,
        type=_type(spec, command),
        is_flag=spec.kind == "flag",
        default=spec.default(command, default),
        show_default=True,
        multiple=spec.multiple,
        metavar=spec.metavar,
        envvar=spec.envvar,
        show_envvar=spec.envvar is not None,
        help=spec.helps.get(command, spec.help),
    )


def model_option(name: str, command: str = "run") -> Decorator:
    """The click option of field ``name`` of Options, with ``command``'s default and help."""
    return spec_option(name, specs()[name], command, _FIELD_DEFAULTS[name])


def threshold_option(command: str) -> Decorator:
    """--threshold as every command that reads verdicts takes it (core/options.THRESHOLD)."""
    assert command in THRESHOLD.commands, command
    return spec_option("threshold", THRESHOLD, command)


def measuring(command: str) -> Decorator:
    """Every option of Options that ``command`` has, with its own defaults; the command's
    callback receives them as one typed ``options`` argument."""
    names = [name for name, spec in specs().items() if command in spec.commands]

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(f)
        def wrapper(*args: Any, **kw: Any) -> Any:
            values = {name: kw.pop(name) for name in names}
            return f(*args, options=settle(Options(**values)), **kw)

        for name in reversed(names):
            wrapper = model_option(name, command)(wrapper)
        return wrapper

    return decorate


def staged(stage: str, *decls: str, **attrs: Any) -> Decorator:
    """A command's own option, shown in ``stage`` of its help."""
    return click.option(*decls, cls=StagedOption, stage=stage, **attrs)


source_repo_option = model_option("source_repo")
db_option = model_option("db")


def range_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--every / --max-commits: how many commits of a range A..B are measured."""
    return model_option("every")(model_option("max_commits")(f))


EXIT_CODES_HELP = """
Exit codes: 0 success (no regression), 1 regression found (ci), 2 bad usage or input
(a bad config file too), 3 could not measure (tool, server or environment failure), 4
internal error (a bug in regtrack), 5 one shard measured and nothing decided (ci), 130
interrupted.
"""


class Regtrack(click.Group):
    """Every command, and every group's, shows its options by stage."""

    command_class = StagedCommand
    group_class = type


@click.group(
    cls=Regtrack,
    epilog=EXIT_CODES_HELP,
    context_settings={"help_option_names": ["-h", "--help"], "show_default": True},
)
@click.version_option(__version__, prog_name="regtrack")
@click.option(
    "--config",
    "config",
    type=click.Path(exists=True, path_type=Path),
    help="A settings file (regtrack.toml: [run], [verdict], and [defaults] for any option's "
    "default), or a directory with regtrack.toml and workloads/*.toml (also "
    "$REGTRACK_CONFIG_DIR). Default: $XDG_CONFIG_HOME/regtrack/ (~/.config/regtrack/), "
    "then the built-in one. Never read from the working directory unless given.",
)
@click.pass_context
def cli(ctx: click.Context, config: Path | None) -> None:
    """Measure whether a Redis version or commit made a workload faster or slower."""
    if config is not None:  # read where settings are looked up (core/settings.py)
        variable = "REGTRACK_CONFIG_DIR" if config.is_dir() else "REGTRACK_CONFIG"
        os.environ.pop("REGTRACK_CONFIG", None)  # a file named before: this one wins
        os.environ[variable] = str(config.resolve())
    ctx.default_map = default_map(ctx)


def default_map(ctx: click.Context) -> dict[str, Any]:
    """The default_map of the root context ``ctx`` (the regtrack group's)."""
    commands = dict(_walk(ctx.command, ()))
    source, table = option_defaults()
    settings = load_settings()
    result: dict[str, Any] = {}
    for name, spec in specs().items():
        for command in spec.commands if spec.setting else ():
            if command not in spec.defaults and (command,) in commands:
                _entry(result, (command,))[name] = getattr(settings, spec.setting)
    tables = {k: v for k, v in table.items() if isinstance(v, dict)}
    plain = {k: v for k, v in table.items() if not isinstance(v, dict)}
    for key, value in plain.items():
        found = [(path, cmd) for path, cmd in commands.items() if _param(cmd, key)]
        if not found:
            raise BadInput(f"{source} [defaults]: no command has an option {key!r}")
        for path, cmd in found:
            _entry(result, path)[_param(cmd, key).name] = _checked(source, "", cmd, key, value)
    for path, cmd, values in _command_tables(source, commands, tables):
        where = " ".join(path)
        for key, value in values.items():
            param = _param(cmd, key)
            if param is None:
                raise BadInput(
                    f"{source} [defaults.{'.'.join(path)}]: regtrack {where} has no option "
                    f"{key!r} (regtrack {where} --help lists them)"
                )
            _entry(result, path)[param.name] = _checked(source, ".".join(path), cmd, key, value)
    return result


def _walk(command: click.Command, path: tuple[str, ...]) -> Any:
    """(path, command) of every command below a group, e.g. (("baseline", "save"), ...)."""
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _walk(sub, (*path, name))
    else:
        yield path, command


def _command_tables(
    source: Path | None, commands: dict[tuple[str, ...], click.Command], tables: dict[str, Any]
) -> Any:
    """(path, command, values) of every [defaults.COMMAND] table, nested for groups."""
    stack = [((name,), value) for name, value in tables.items()]
    while stack:
        path, values = stack.pop(0)
        if path in commands:
            yield path, commands[path], values
            continue
        if not any(p[: len(path)] == path for p in commands):
            raise BadInput(f"{source} [defaults.{'.'.join(path)}]: regtrack has no such command")
        for key, value in values.items():
            if not isinstance(value, dict):
                raise BadInput(
                    f"{source} [defaults.{'.'.join(path)}]: {key!r} is not a table: name a "
                    f"subcommand, e.g. [defaults.{'.'.join(path)}.SUBCOMMAND]"
                )
            stack.append(((*path, key), value))


def _param(command: click.Command, key: str) -> click.Parameter | None:
    """The option ``key`` names: its spelling (server-cpus, shard) or its name."""
    wanted = key.replace("-", "_")
    for param in command.params:
        if not isinstance(param, click.Option):
            continue
        spellings = {param.name, *(o.lstrip("-").replace("-", "_") for o in param.opts)}
        if wanted in spellings:
            return param
    return None


def _checked(source: Path | None, where: str, command: click.Command, key: str, value: Any) -> Any:
    """``value`` as the option converts it; a bad one is one line naming file and key."""
    param = _param(command, key)
    assert param is not None
    if param.multiple and isinstance(value, str):
        value = [value]
    try:
        with click.Context(command) as ctx:
            param.type_cast_value(ctx, value)
    except click.BadParameter as exc:
        table = f"[defaults.{where}]" if where else "[defaults]"
        raise BadInput(f"{source} {table}: {key} = {value!r}: {exc.message}") from None
    return value


def _entry(result: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    for name in path:
        result = result.setdefault(name, {})
    return result
