"""The `regtrack` command group and the exit codes every command documents."""

from __future__ import annotations

import click

from regtrack import __version__

EXIT_CODES_HELP = """
Exit codes: 0 success (no regression), 1 regression found (ci), 2 bad usage or input,
3 could not measure (tool, server or environment failure), 130 interrupted.
"""


@click.group(epilog=EXIT_CODES_HELP)
@click.version_option(__version__, prog_name="regtrack")
def cli() -> None:
    """Measure whether a Redis version or commit made a workload faster or slower."""
