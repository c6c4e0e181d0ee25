"""The `regtrack` command group: its --config, the exit codes every command documents, and
the option defaults read from the settings file, as click's default_map (what `--help`
shows and what a command uses when an option is left out).

Defaults, lowest first: the option's declared default (core/options.py, a command's own
where it has one); for an option backed by a setting and a command without a default of
its own, the settings file's [run] value; [defaults] of the settings file (every command
with that option); [defaults.COMMAND] (that command only); then $REGTRACK_* variables and
the command line. A name or value the commands do not know is one line and exit 2.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from regtrack import __version__
from regtrack.cli.options import StagedCommand
from regtrack.core.errors import BadInput
from regtrack.core.options import specs
from regtrack.core.settings import load_settings, option_defaults

EXIT_CODES_HELP = """
Exit codes: 0 success (no regression), 1 regression found (ci), 2 bad usage or input
(a bad config file too), 3 could not measure (tool, server or environment failure), 4
internal error (a bug in regtrack), 5 one shard measured and nothing decided (ci), 130
interrupted.
"""


class Regtrack(click.Group):
    """Every command, and every group's, shows its options by stage (cli/options.py)."""

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
