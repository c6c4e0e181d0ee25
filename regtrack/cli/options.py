"""The measuring commands' options, generated from their one declaration (core/options.py),
and the help that shows every command's options by stage, with its own defaults.

Declarations only: nothing here imports what measures or analyses, so that `--help` and
`--version` start at once (steps.py holds the steps these commands share around bench).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

import click

from regtrack.core.options import STAGES, GetSweep, Options, int_list, settle, specs

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


def _type(name: str, command: str) -> Any:
    spec = specs()[name]
    if spec.choices:
        return click.Choice(spec.command_choices.get(command, spec.choices))
    if spec.kind == "int":
        bounded = spec.minimum is not None or spec.maximum is not None
        return click.IntRange(spec.minimum, spec.maximum) if bounded else int
    return {"float": float, "ints": Depths(), "path": click.Path(dir_okay=False)}.get(spec.kind)


def model_option(name: str, command: str = "run") -> Decorator:
    """The click option of field ``name`` of Options, with ``command``'s default and help."""
    spec = specs()[name]
    flag = spec.flag or "--" + name.replace("_", "-")
    unset = spec.unset or (f"regtrack.toml [run] {spec.setting}" if spec.setting else None)
    return click.option(
        f"{flag}/{spec.off_flag}" if spec.off_flag else flag,
        name,
        cls=StagedOption,
        stage=spec.stage,
        unset=unset,
        type=_type(name, command),
        is_flag=spec.kind == "flag",
        default=spec.default(command, _FIELD_DEFAULTS[name]),
        show_default=True,
        multiple=spec.multiple,
        metavar=spec.metavar,
        envvar=spec.envvar,
        show_envvar=spec.envvar is not None,
        help=spec.helps.get(command, spec.help),
    )


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


# One verdict threshold for every metric, as run and ci take it (bisect's is the smallest
# change that counts, in its own words).
THRESHOLD = staged(
    "statistics",
    "--threshold",
    type=float,
    help="Verdict threshold in percent, for every metric.",
    unset="regtrack.toml [verdict], per metric",
)
