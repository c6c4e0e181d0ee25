"""`regtrack sources offline`: the offline source set, a git repository of real Redis or
Valkey releases made from PyPI and Debian (or pinned archives), for machines without
GitHub; an installed regtrack (pipx, a wheel) has it, not only a clone of this repository."""

from __future__ import annotations

from pathlib import Path

import click

from regtrack.cli.options import cli

OFFLINE_HELP = """
Tags and branches carry upstream's names (Redis: tags 6.2.14, 7.0.15, 8.0.2, branches 6.2,
7.0, 8.0 and unstable at 8.0.6; Valkey: 8.1.1, and unstable at 9.1.2), so version specs
resolve as against upstream: regtrack run --versions 7.0 --source-repo DIR. Every archive is
checked against its pinned SHA-256 and the commits are deterministic: two machines get the
same SHAs. A DIR that is already complete is kept. Progress goes to stderr; DIR and one
`ref -> commit -> version` line per tag and branch to stdout. Needs git, and apt-get with
Debian's archive keyring for what is neither in an archive folder nor cached.

Exit codes: 0 the repository is in DIR, 2 bad usage, 3 an archive could not be had or
checked, or DIR holds something else.
"""


@cli.group()
def sources() -> None:
    """Source repositories that versions are built from."""


@sources.command("offline", epilog=OFFLINE_HELP)
@click.argument("product", metavar="PRODUCT")
@click.argument("dest", metavar="DIR", type=click.Path(path_type=Path))
@click.option(
    "--work",
    type=click.Path(file_okay=False, path_type=Path),
    help="Download cache and scratch space. [default: $XDG_CACHE_HOME/regtrack/"
    "offline-sources, ~/.cache/regtrack/offline-sources]",
)
@click.option(
    "--archives",
    type=click.Path(file_okay=False, path_type=Path),
    multiple=True,
    help="A folder of the pinned release archives to take before downloading (each still "
    "checked against its SHA-256); repeatable, after those of $REGTRACK_SOURCE_ARCHIVES "
    "(folders separated by ':').",
)
@click.option("--force", is_flag=True, help="Make DIR again even if it is complete.")
@click.option("--bare", is_flag=True, help="A bare repository (no checkout).")
def offline(
    product: str, dest: Path, work: Path | None, archives: tuple[Path, ...], force: bool, bare: bool
) -> None:
    """Make DIR a git repository of PRODUCT's (redis or valkey) real releases, from the
    pinned archives of PyPI and Debian: for --source-repo where GitHub cannot be reached."""
    from regtrack.targets.offline import make, recipes

    def progress(message: str) -> None:
        click.echo(f"regtrack sources offline: {message}", err=True)

    made = make.make(
        recipes.product(product),
        dest,
        work=work,
        archives=make.archive_folders(archives),
        force=force,
        bare=bare,
        progress=progress,
    )
    click.echo(made.dest)
    for ref in made.refs:
        click.echo(f"{ref.ref:<16} -> {ref.commit} -> {ref.version}")
