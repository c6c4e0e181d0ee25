"""The `regtrack` command group and the exit codes every command documents."""

from __future__ import annotations

import os
from pathlib import Path

import click

from regtrack import __version__
from regtrack.cli.options import StagedCommand

EXIT_CODES_HELP = """
Exit codes: 0 success (no regression), 1 regression found (ci), 2 bad usage or input,
3 could not measure (tool, server or environment failure), 4 internal error (a bug in
regtrack), 130 interrupted.
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
    "config_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A directory whose regtrack.toml and workloads/*.toml override the built-in ones "
    "(also $REGTRACK_CONFIG_DIR). Never read from the working directory unless given.",
)
def cli(config_dir: Path | None) -> None:
    """Measure whether a Redis version or commit made a workload faster or slower."""
    if config_dir is not None:  # read where settings are looked up (core/settings.py)
        os.environ["REGTRACK_CONFIG_DIR"] = str(config_dir.resolve())
