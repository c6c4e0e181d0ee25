"""Option defaults from the settings file, as click's default_map: what `--help` shows and
what a command uses when an option is left out.

Lowest first: the option's declared default (core/options.py, a command's own where it
has one); for an option backed by a setting and a command without a default of its own,
the settings file's [run] value; [defaults] of the settings file (every command with
that option); [defaults.COMMAND] (that command only); then $REGTRACK_* variables and the
command line. A name or value the commands do not know is one line and exit 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from regtrack.core.errors import BadInput
from regtrack.core.options import specs
from regtrack.core.settings import load_settings, option_defaults


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
