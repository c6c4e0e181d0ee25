"""The `regtrack` command group and the exit codes every command documents."""

from __future__ import annotations

import os
from pathlib import Path

import click

from regtrack import __version__
from regtrack.cli.options import StagedCommand

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
    from regtrack.cli.config import default_map

    ctx.default_map = default_map(ctx)
