"""Errors that end a command with one clear line and a documented exit code.

Exit codes (also in docs/usage.md, "Exit codes"):
  0  success / no regression
  1  regression found (``regtrack ci``); a capture's replay off its real traffic
     (``regtrack mix capture --check``)
  2  bad usage or input: the user can fix the command line, a spec or a file
  3  could not measure: the environment, a tool or a server failed
  4  internal error: a bug in regtrack (never "could not measure")
  5  a shard measured, nothing decided (``regtrack ci`` on one shard of a plan)
  130 interrupted (Ctrl-C / SIGTERM / SIGHUP); results measured so far are kept
"""

EXIT_REGRESSION = 1
EXIT_CHECK_OFF = 1  # mix capture --check: a command off its real share, or a value size
EXIT_BAD_INPUT = 2
EXIT_CANNOT_MEASURE = 3
EXIT_INTERNAL = 4
EXIT_SHARD_ONLY = 5
EXIT_INTERRUPTED = 130


class RegtrackError(Exception):
    """An expected failure; its message is shown to the user as is."""

    exit_code = EXIT_CANNOT_MEASURE


class BadInput(RegtrackError):
    """The user gave something we cannot use (spec, CPU list, file, option)."""

    exit_code = EXIT_BAD_INPUT


class CannotMeasure(RegtrackError):
    """The environment, a tool or a server stopped us from measuring."""

    exit_code = EXIT_CANNOT_MEASURE


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; raised so that every cleanup block runs.

    A KeyboardInterrupt, not an Exception, so that no ``except Exception`` on the way
    (a retry loop, a best-effort cleanup) can swallow the user's request to stop.
    """

    exit_code = EXIT_INTERRUPTED
