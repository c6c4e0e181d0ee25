"""`regtrack merge`: shard databases measured on several hosts, unioned into one."""

from __future__ import annotations

from pathlib import Path

import click

from regtrack.cli.options import EXIT_CODES_HELP, cli
from regtrack.core.errors import CannotMeasure


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--allow-different-plans",
    is_flag=True,
    help="Merge databases of different plans, each plan into its own run.",
)
def merge(out: Path, inputs: tuple[Path, ...], allow_different_plans: bool) -> None:
    """Union the databases of a plan's shards (--shard K/N runs) into OUT: one run per plan,
    every trial once with the host that measured it. Merging again adds nothing; shards
    still missing are named, with how to measure them (exit 3)."""
    from regtrack.flows import shard_merge
    from regtrack.output import merge_text

    results = shard_merge.merge(out, list(inputs), allow_different_plans)
    click.echo(merge_text.render(results, out))
    missing = [m for r in results for m in r.missing]
    if missing:
        raise CannotMeasure(merge_text.missing_line(results, out))
