"""Command line: each command parses options, calls a flow or analysis, presents, exits.

One module per command or group of them, each imported below so that it registers its
commands on the group (options.py); main maps every expected failure to one line and a
documented exit code.
"""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING

import click

from regtrack.cli import admin, bisect, ci, github, merge, results, run, sources  # noqa: F401  (registers the commands)
from regtrack.cli.options import cli
from regtrack.core import interrupts, redact
from regtrack.core.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    Interrupted,
    RegtrackError,
)
from regtrack.output.console import err

if TYPE_CHECKING:
    from regtrack.bench.measuring import Measuring

__all__ = ["cli", "main"]


def main(argv: list[str] | None = None, measuring: Measuring | None = None) -> None:
    """Entry point: one line and a documented exit code for every expected failure.
    ``measuring``: how the measuring commands measure (click's context ``obj``, read by
    cli/steps.measuring); None, on this host's real servers (bench/real.py)."""
    interrupts.install()
    try:
        cli.main(args=argv, prog_name="regtrack", standalone_mode=False, obj=measuring)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        # One line, as for every other bad input: what is wrong, and where the help is.
        where = ""
        if isinstance(exc, click.UsageError) and exc.ctx is not None:
            where = f" (see {exc.ctx.command_path} --help)"
        err.print(f"regtrack: error: {exc.format_message()}{where}", highlight=False)
        sys.exit(EXIT_BAD_INPUT)
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:
        # click turns a KeyboardInterrupt into Abort: the signal is the one it came from.
        cause = exc.__context__ if isinstance(exc, click.exceptions.Abort) else exc
        how = f" by {cause}" if isinstance(cause, Interrupted) and str(cause) else ""
        with contextlib.suppress(OSError):  # after SIGHUP the terminal may be gone
            err.print(f"regtrack: interrupted{how}; results measured so far are kept")
        sys.exit(EXIT_INTERRUPTED)
    except RegtrackError as exc:
        err.print(f"regtrack: error: {redact.scrub(str(exc))}")
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(0)
    except Exception as exc:  # a bug: one line for the user, the traceback kept in a file
        log = _save_traceback()
        err.print(
            f"regtrack: internal error (a bug in regtrack, not in what it measured): "
            f"{type(exc).__name__}: {redact.scrub(str(exc))}; traceback in {log}; please "
            "report it"
        )
        sys.exit(EXIT_INTERNAL)
    sys.exit(0)


def _save_traceback() -> str:
    """The traceback in a new file only this user can read (mkstemp: 0600, a fresh
    name), with any URL's credentials scrubbed."""
    import tempfile
    import traceback

    fd, path = tempfile.mkstemp(prefix="regtrack-crash-", suffix=".log")
    with open(fd, "w") as f:
        f.write(redact.scrub(traceback.format_exc()))
    return path


if __name__ == "__main__":
    main(sys.argv[1:])
