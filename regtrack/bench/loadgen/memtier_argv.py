"""memtier_benchmark's command line: a LoadSpec and an Aim in, argv out.

Kept apart from running and parsing because memtier's rules for its arguments are their
own: it splits ``--command`` on spaces with its own quoting, names report rows after the
command and counts ``--requests`` per client. What it would reject or misreport is
refused here as BadInput, before anything runs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

from regtrack.bench.loadgen.base import Aim
from regtrack.bench.runtimes.native import taskset_path
from regtrack.core.cpus import format_cpu_list
from regtrack.core.errors import BadInput
from regtrack.core.records import LoadSpec, MixCommand

KEY_PATTERNS = "RGZSP"
# A command name memtier can name its report row after: it takes the text before the
# first space as the name and writes it into the JSON unescaped.
COMMAND_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.:|-]{0,89}")
KEY_PLACEHOLDER = "__key__"
DATA_PLACEHOLDER = "__data__"
# Whole arguments memtier gives a meaning of its own instead of sending them as they are.
SPECIAL_ARGS = ("__scan_cursor__",)
# Bytes that can stand unquoted in a --command token: printable ASCII except the quotes
# (a quote anywhere starts a quoted section) and the space.
_PLAIN_BYTES = frozenset(range(0x21, 0x7F)) - {ord('"'), ord("'")}


def argv(
    aim: Aim,
    spec: LoadSpec,
    *,
    json_out: Path,
    test_time: float | None = None,
    requests: int | None = None,
) -> list[str]:
    """The exact command line of one run, pinned to the client CPUs.

    Give exactly one of ``test_time`` (seconds, rounded to whole seconds, at least 1) or
    ``requests`` (the total over all connections: memtier counts per client, so each
    client gets the ceiling of its share and the run sends at least ``requests``).
    """
    _check_spec(spec)
    args = [
        taskset_path(),
        "-c",
        format_cpu_list(aim.cpus),
        aim.binary.path,
        "-s",
        aim.host,
        "-p",
        str(aim.port),
        "-t",
        str(spec.threads),
        "-c",
        str(spec.clients),
        "--pipeline",
        str(spec.pipeline),
        "-d",
        str(spec.data_size),
        "--hide-histogram",
        "--json-out-file",
        str(json_out),
        f"--key-minimum={spec.key_min}",
        f"--key-maximum={spec.key_max}",
        f"--key-prefix={spec.key_prefix}",
        _length_arg(spec, test_time, requests),
    ]
    if not spec.commands:
        return [*args, "--ratio=0:1", "--key-pattern=R:R"]
    for command in spec.commands:
        args += [
            f"--command={command_text(command.args)}",
            f"--command-ratio={command.ratio}",
            f"--command-key-pattern={command.key_pattern}",
        ]
    names = [command.args[0].upper() for command in spec.commands]
    if len(set(names)) < len(names):
        # By default memtier merges same-named commands into one row; keep them apart.
        args.append("--command-stats-breakdown=line")
    return args


def _length_arg(spec: LoadSpec, test_time: float | None, requests: int | None) -> str:
    if (test_time is None) == (requests is None):
        raise ValueError("give exactly one of test_time or requests")
    if test_time is not None:
        if test_time <= 0:
            raise ValueError(f"test_time must be positive, not {test_time}")
        return f"--test-time={whole_seconds(test_time)}"
    assert requests is not None
    if requests <= 0:
        raise ValueError(f"requests must be positive, not {requests}")
    per_client = math.ceil(requests / (spec.clients * spec.threads))
    return f"--requests={max(1, per_client)}"


def whole_seconds(test_time: float) -> int:
    """memtier runs whole seconds, at least one."""
    return max(1, math.floor(test_time + 0.5))


def _check_spec(spec: LoadSpec) -> None:
    """What memtier would reject (or misreport) is refused here, with the reason."""
    for field_name in ("clients", "threads", "pipeline", "data_size", "key_min"):
        if getattr(spec, field_name) < 1:
            raise BadInput(
                f"memtier_benchmark needs {field_name} >= 1, not {getattr(spec, field_name)}"
            )
    if spec.key_max < spec.key_min:
        raise BadInput(f"key range {spec.key_min}..{spec.key_max} is empty")
    if any(c in spec.key_prefix for c in '"\\') or not spec.key_prefix.isprintable():
        # memtier copies the prefix into its JSON report unescaped.
        raise BadInput(
            f"key prefix {spec.key_prefix!r} cannot be used with memtier_benchmark: "
            "no quotes, backslashes or control characters"
        )
    for command in spec.commands:
        _check_command(command)
    parallel = [c for c in spec.commands if c.key_pattern == "P"]
    if parallel and len(parallel) != len(spec.commands):
        raise BadInput("memtier_benchmark needs key pattern P on every command of a mix or on none")


def _check_command(command: MixCommand) -> None:
    if not command.args:
        raise BadInput("a mix command has no arguments")
    if not isinstance(command.ratio, int) or command.ratio < 1:
        raise BadInput(f"command ratio must be a whole number >= 1, not {command.ratio!r}")
    if len(command.key_pattern) != 1 or command.key_pattern not in KEY_PATTERNS:
        raise BadInput(
            f"key pattern {command.key_pattern!r} is not one of memtier's {', '.join(KEY_PATTERNS)}"
        )


def command_text(args: Sequence[str]) -> str:
    """One ``--command`` value that memtier splits back into exactly ``args``.

    memtier splits on spaces; a double-quoted token may hold spaces and the escapes
    ``\\xHH``, ``\\"`` and ``\\\\``. Plain tokens are left as they are; any other is quoted,
    with every byte outside printable ASCII written as ``\\xHH`` (UTF-8).
    Raises BadInput for what memtier cannot send as given.
    """
    if not args:
        raise BadInput("a mix command has no arguments")
    name = args[0]
    if not COMMAND_NAME_RE.fullmatch(name):
        raise BadInput(
            f"command name {name!r} cannot be sent by memtier_benchmark: it must be a "
            "plain word of letters, digits and . _ : | - (memtier names its report rows "
            "after it)"
        )
    for arg in args[1:]:
        _check_argument(arg, args)
    return " ".join([name, *(_quote(arg, args) for arg in args[1:])])


def _check_argument(arg: str, args: Sequence[str]) -> None:
    where = f"in {' '.join(args)!r}"
    if arg.count(KEY_PLACEHOLDER) > 1:
        raise BadInput(
            f"argument {arg!r} {where} holds __key__ twice: memtier replaces only the first"
        )
    if DATA_PLACEHOLDER in arg and arg != DATA_PLACEHOLDER:
        raise BadInput(
            f"__data__ must be a whole argument, not part of {arg!r} {where} "
            "(memtier sends the payload as one argument)"
        )
    if arg in SPECIAL_ARGS:
        raise BadInput(f"argument {arg!r} {where} has a special meaning to memtier_benchmark")


def _quote(arg: str, args: Sequence[str]) -> str:
    try:
        data = arg.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise BadInput(
            f"argument {arg!r} in {' '.join(args)!r} is not valid text (lone surrogate)"
        ) from None
    if data and all(b in _PLAIN_BYTES for b in data):
        return arg
    out = []
    for b in data:
        if b in (ord('"'), ord("\\")):
            out.append("\\" + chr(b))
        elif 0x20 <= b < 0x7F:
            out.append(chr(b))
        else:
            out.append(f"\\x{b:02x}")
    return '"' + "".join(out) + '"'
