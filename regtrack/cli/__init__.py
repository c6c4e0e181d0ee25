"""Command line: each command parses options, calls bench or analysis, presents, exits.

One module per command group (run.py, ci.py, results.py, admin.py); main maps every
expected failure to one line and a documented exit code.
"""

from __future__ import annotations

import sys

import click

from regtrack.cli import admin, bisect, ci, merge, results, run  # noqa: F401  (registers the commands)
from regtrack.cli.group import cli
from regtrack.core import interrupts
from regtrack.core.errors import (
    EXIT_BAD_INPUT,
    EXIT_CANNOT_MEASURE,
    EXIT_INTERRUPTED,
    Interrupted,
    RegtrackError,
)
from regtrack.output.console import err

__all__ = ["cli", "main"]


def main(argv: list[str] | None = None) -> None:
    """Entry point: one line and a documented exit code for every expected failure."""
    interrupts.install()
    try:
        cli.main(args=argv, prog_name="regtrack", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_BAD_INPUT)
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:
        how = f" by {exc}" if isinstance(exc, Interrupted) else ""
        err.print(f"regtrack: interrupted{how}; results measured so far are kept")
        sys.exit(EXIT_INTERRUPTED)
    except RegtrackError as exc:
        err.print(f"regtrack: error: {exc}")
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(0)
    except Exception as exc:  # a bug: one line for the user, the traceback kept in a file
        log = _save_traceback()
        err.print(
            f"regtrack: internal error: {type(exc).__name__}: {exc} "
            f"(traceback in {log}; please report it)"
        )
        sys.exit(EXIT_CANNOT_MEASURE)
    sys.exit(0)


def _save_traceback() -> str:
    import tempfile
    import traceback

    with tempfile.NamedTemporaryFile(
        "w", prefix="regtrack-crash-", suffix=".log", delete=False
    ) as f:
        traceback.print_exc(file=f)
        return f.name


if __name__ == "__main__":
    main(sys.argv[1:])
