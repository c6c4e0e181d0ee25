"""memtier_benchmark: argv in, measurement out.

memtier runs either a duration (``--test-time``) or a request count per client
(``--requests``), sends GET/SET traffic or a rotation of arbitrary commands (``--command``),
and writes its report as JSON. Its quirks, as seen in real outputs (tests/fixtures/memtier):

- the JSON Totals "Average Latency" is cut to whole milliseconds, so averages come from
  "Accumulated Latency" / "Count";
- with ``--command-stats-breakdown=line`` two commands of the same name give the same JSON
  key twice;
- error replies appear nowhere in the report, only as one stderr line each (which can add
  up to many megabytes);
- its run duration, and so every rate, is often off by exactly one second (see
  true_duration), which run_once puts right.
"""

from __future__ import annotations

import io
import json
import math
import re
import shutil
import tempfile
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from regtrack.cpus import format_cpu_list
from regtrack.errors import BadInput, CannotMeasure
from regtrack.loadgen.base import (
    Aim,
    LoadgenBinary,
    LoadgenResult,
    LoadSpec,
    MixCommand,
    result_of,
    run_tool,
    sha256_of,
    tool_version,
)
from regtrack.runtimes.native import taskset_path

NAME = "memtier_benchmark"
SECTION = "ALL STATS"  # the one run's figures; absent when --run-count > 1
ERROR_REPLY_MARK = "handle error response"
ERRORS_ROW = "__errors__"
CONNECTION_ERROR_MARK = "Connection error:"
STDERR_HEAD_LINES = 20
STDERR_TAIL_LINES = 20
# stderr lines that say nothing about a failure: progress and the JSON file's bookkeeping.
STDERR_CHATTER = ("[RUN #", "Json file ", "Saving JSON output file", "Writing results to")
KEY_PATTERNS = "RGZSP"
GET_SET_ROWS = ("Sets", "Gets", "Waits")  # always all three in GET/SET mode, used or not
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


def locate(path: str | None = None) -> LoadgenBinary:
    """Choose the one memtier_benchmark for the whole run and fingerprint it.

    An explicit path wins; else the one on PATH (the same from run to run, so runs stay
    comparable).
    """
    if path:
        if not Path(path).is_file():
            raise BadInput(f"load generator {path} does not exist")
        found = str(Path(path).absolute())
    else:
        on_path = shutil.which(NAME)
        if not on_path:
            raise CannotMeasure(
                "memtier_benchmark is not installed: build it from "
                "https://github.com/RedisLabs/memtier_benchmark (see its README) and put it "
                "on PATH, or pass --loadgen-bin PATH"
            )
        found = str(Path(on_path).absolute())
    return LoadgenBinary(
        name=NAME, path=found, version=_version(found), sha256=sha256_of(Path(found).resolve())
    )


def _version(path: str) -> str:
    """The first line of ``--version``, e.g. "memtier_benchmark v=2.3.0 sha=1655c39a:0 ..."."""
    version = tool_version(path, NAME)
    if version is None:
        # Every memtier_benchmark answers --version; anything else would fail later, worse.
        raise BadInput(f"load generator {path} is not memtier_benchmark (see its --version)")
    return version


# --- command line ---------------------------------------------------------------------


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
        return f"--test-time={_whole_seconds(test_time)}"
    assert requests is not None
    if requests <= 0:
        raise ValueError(f"requests must be positive, not {requests}")
    per_client = math.ceil(requests / (spec.clients * spec.threads))
    return f"--requests={max(1, per_client)}"


def _whole_seconds(test_time: float) -> int:
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


# --- report ---------------------------------------------------------------------------


def parse_json(text: str) -> dict[str, Any]:
    """The figures of a ``--json-out-file`` report's "ALL STATS" section, as reported.

    Returns {"totals": row, "commands": {row name: row}, "duration_s": s, "requests": n,
    "connection_errors": n, "last_busy_second": n or None}. A row is {"ops_per_sec",
    "count", "avg", "p50", "p99", "p999"} (latencies in ms) without the fields the report
    leaves out or fills with "---". Rows named twice (two commands with one name) are kept
    as "Sets", "Sets#2", ...; GET/SET rows of a command never sent are dropped. Rates and
    duration are memtier's own: see true_duration. Raises ValueError if unusable.
    """
    try:
        doc = json.loads(text, object_pairs_hook=_number_duplicates)
    except json.JSONDecodeError as exc:
        raise ValueError(f"memtier_benchmark's JSON report is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get(SECTION), dict):
        found = ", ".join(repr(k) for k in doc) if isinstance(doc, dict) else "no sections"
        raise ValueError(
            f'memtier_benchmark\'s JSON report has no "{SECTION}" section (found {found}; '
            "a run with --run-count > 1 reports best/worst/average runs instead)"
        )
    stats = doc[SECTION]
    if not isinstance(stats.get("Totals"), dict):
        raise ValueError(f'memtier_benchmark\'s JSON report has no "{SECTION}" Totals row')
    rows = {
        name: raw
        for name, raw in stats.items()
        if name not in ("Runtime", "Totals") and isinstance(raw, dict)
    }
    get_set_mode = tuple(rows) == GET_SET_ROWS
    commands = {
        name: _row(raw) for name, raw in rows.items() if not (get_set_mode and _unused(raw))
    }
    totals = _row(stats["Totals"])
    return {
        "totals": totals,
        "commands": commands,
        "duration_s": _duration_s(stats.get("Runtime")),
        "requests": int(totals.get("count", 0)),
        "connection_errors": int(_number(stats["Totals"].get("Connection Errors")) or 0),
        "last_busy_second": _last_busy_second(stats["Totals"]),
    }


def _number_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Keep every value of a repeated key: the second "Sets" becomes "Sets#2"."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        name, n = key, 1
        while name in out:
            n += 1
            name = f"{key}#{n}"
        out[name] = value
    return out


def _number(value: Any) -> float | int | None:
    """A figure, or None for "---", null and anything else that is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if math.isfinite(value) else None


def _unused(raw: dict[str, Any]) -> bool:
    """A GET/SET-mode row of a command that was never sent ("---" or zero count)."""
    count = _number(raw.get("Count"))
    return not count


def _row(raw: dict[str, Any]) -> dict[str, float]:
    """One report row in regtrack's names; latencies only for a row with requests.

    A row without requests carries a placeholder histogram (every percentile 0.007 ms),
    which the text report shows as "---".
    """
    row: dict[str, float] = {}
    ops = _number(raw.get("Ops/sec"))
    if ops is not None:
        row["ops_per_sec"] = ops
    count = _number(raw.get("Count"))
    if count is not None:
        row["count"] = count
    if not count:
        return row
    avg = _average_ms(raw, count)
    if avg is not None:
        row["avg"] = avg
    percentiles = raw.get("Percentile Latencies")
    if isinstance(percentiles, dict):
        for key, value in percentiles.items():
            name = _percentile_name(key)
            figure = _number(value)
            if name and figure is not None:
                row[name] = figure
    return row


def _average_ms(raw: dict[str, Any], count: float) -> float | None:
    """Accumulated Latency (exact sum, whole ms) / Count; "Average Latency" is rounded.

    A sum that rounds down to 0 ms (a handful of requests) says nothing: then the
    reported average is better.
    """
    accumulated = _number(raw.get("Accumulated Latency"))
    if accumulated:
        return accumulated / count
    return _number(raw.get("Average Latency"))


def _percentile_name(key: str) -> str | None:
    """ "p50.00" -> "p50", "p99.00" -> "p99", "p99.90" -> "p999"."""
    match = re.fullmatch(r"p(\d+(?:\.\d+)?)", key)
    if not match:
        return None
    return "p" + f"{float(match.group(1)):g}".replace(".", "")


def _last_busy_second(totals: dict[str, Any]) -> int | None:
    """The last second of the run's time series in which requests completed."""
    series = totals.get("Time-Serie")
    if not isinstance(series, dict):
        return None
    busy = [
        int(second)
        for second, figures in series.items()
        if second.isdigit() and isinstance(figures, dict) and _number(figures.get("Count"))
    ]
    return max(busy, default=None)


def true_duration(
    parsed: dict[str, Any], *, test_time: float | None = None, wall_s: float | None = None
) -> float | None:
    """The run's real measuring time, or None if the report's cannot be put right.

    memtier averages its clients' start and end times field by field, truncating the
    seconds to an integer at every step, so its duration (and every rate) is often off by
    a whole second: 0.009 s or 2.005 s for a 1 s run with 10 clients. The fraction is
    right, so the duration is moved by the fewest whole seconds into what the run allows:
    the asked ``test_time`` give or take 0.5 s; else the second of the time series in
    which the last requests completed, and at most the process's ``wall_s``. Without a
    test time a duration within 0.05 s of a whole second may stay a second off.
    """
    reported = _reported_duration(parsed)
    if test_time is not None:
        low, high = test_time - 0.5, test_time + 0.5
    else:
        # Requests completed in second ``last`` of the time series (counted from each
        # client's start), and none later: the run lasted ``last`` to ``last + 1`` s.
        last = parsed.get("last_busy_second")
        low = last - 0.05 if last is not None else 0.0
        high = last + 1.05 if last is not None else math.inf
        if wall_s is not None:
            high = min(high, wall_s + 0.05)
    for shift in sorted(range(-3, 4), key=abs):
        candidate = reported + shift
        if candidate > 0 and low <= candidate <= high:
            return candidate
    return None


def _reported_duration(parsed: dict[str, Any]) -> float:
    """Count / Ops/sec: the duration memtier divided by, to the microsecond."""
    count, ops = parsed["totals"].get("count"), parsed["totals"].get("ops_per_sec")
    return count / ops if count and ops else parsed["duration_s"]


def _duration_s(runtime: Any) -> float:
    if not isinstance(runtime, dict):
        return 0.0
    scale = {"SECONDS": 1.0, "MILLISECONDS": 1e-3, "MICROSECONDS": 1e-6}.get(
        str(runtime.get("Time unit", "MILLISECONDS")), 1e-3
    )
    total = _number(runtime.get("Total duration"))
    if total is None:
        start = _number(runtime.get("Start time"))
        finish = _number(runtime.get("Finish time"))
        total = finish - start if start is not None and finish is not None else 0
    return float(total) * scale


# --- one run --------------------------------------------------------------------------


def run_once(
    aim: Aim,
    spec: LoadSpec,
    *,
    test_time: float | None = None,
    requests: int | None = None,
    timeout: float,
) -> LoadgenResult:
    """Run memtier_benchmark once; its output goes to files so a chatty run cannot block.

    Stopped early (and reported) if the server dies. Error replies are counted from stderr
    into ``per_command["__errors__"]``: memtier's report has no trace of them.
    """
    with tempfile.TemporaryDirectory(prefix="regtrack-memtier-") as tmp:
        json_out = Path(tmp) / "report.json"
        command = argv(aim, spec, json_out=json_out, test_time=test_time, requests=requests)
        done = run_tool(NAME, command, timeout, aim, _digest_stderr)
        report = json_out.read_text(errors="replace") if json_out.is_file() else ""
    stdout, stderr, exit_code, problem = done.stdout, done.stderr, done.exit_code, done.problem
    result = result_of(done, command, 0, stderr.text)
    if problem is None and exit_code != 0:
        problem = f"{NAME} exited with code {exit_code}: {stderr.message or _last(stdout)}"
    parsed = None
    if report.strip():
        try:
            parsed = parse_json(report)
        except ValueError as exc:
            problem = problem or str(exc)
    elif problem is None:
        problem = f"{NAME} wrote no JSON report: {stderr.message or _last(stdout)}"
    if parsed is not None:
        if parsed["requests"]:
            problem = problem or _fix_duration(parsed, result, test_time)
        totals = parsed["totals"]
        result.requests = parsed["requests"]
        result.ops_per_sec = totals.get("ops_per_sec")
        result.latency_ms = {k: v for k, v in totals.items() if k not in ("ops_per_sec", "count")}
        result.per_command = dict(parsed["commands"])
        lost = max(parsed["connection_errors"], stderr.connection_errors)
        if problem is None and lost:
            # memtier restarts the thread and carries on (exit code 0): the figures mix in
            # the outage. The JSON count misses failed connects, so stderr is counted too.
            problem = f"{NAME} had {lost} connection error(s): {stderr.message or 'no message'}"
        if problem is None and not result.requests:
            problem = f"{NAME} completed no requests: {stderr.message or _last(stdout)}"
    result.per_command[ERRORS_ROW] = {"count": stderr.error_replies}
    result.problem = problem
    return result


def _fix_duration(
    parsed: dict[str, Any], result: LoadgenResult, test_time: float | None
) -> str | None:
    """Put memtier's whole-second duration error right in ``parsed`` (see true_duration)."""
    reported = _reported_duration(parsed)
    asked = None if test_time is None else _whole_seconds(test_time)
    duration = true_duration(parsed, test_time=asked, wall_s=result.wall_s)
    if duration is None:
        return (
            f"{NAME} reported a run of {reported:.3f} s, which cannot be right "
            f"(it ran {result.wall_s:.2f} s in all)"
        )
    if abs(duration - reported) > 0.5:
        for row in [parsed["totals"], *parsed["commands"].values()]:
            if "ops_per_sec" in row:
                row["ops_per_sec"] = row["ops_per_sec"] * reported / duration
        parsed["duration_s"] = duration
        result.raw_output += (
            f"\n[regtrack] {NAME} reported a run of {reported:.3f} s (its whole-second "
            f"timestamp averaging error); rates recomputed over {duration:.3f} s"
        )
    return None


class _StderrDigest:
    """What is kept of a stderr that may run to millions of lines."""

    def __init__(self) -> None:
        self.head: list[str] = []
        self.tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self.lines = 0
        self.error_replies = 0
        self.connection_errors = 0  # "Connection error: ..." lines
        self.last_error = ""  # the last "error: ..." line of memtier's own
        self.last_other = ""  # the last line that is not progress nor bookkeeping

    @property
    def text(self) -> str:
        dropped = self.lines - len(self.head) - len(self.tail)
        middle = [f"[... {dropped} stderr lines dropped ...]"] if dropped > 0 else []
        return "\n".join([*self.head, *middle, *self.tail])

    @property
    def message(self) -> str:
        return self.last_error or self.last_other

    def add(self, line: str) -> None:
        self.lines += 1
        if ERROR_REPLY_MARK in line:
            self.error_replies += 1
        elif "error:" in line.lower():
            if line.startswith(CONNECTION_ERROR_MARK):
                self.connection_errors += 1
            self.last_error = line.strip()[:200]
        elif line.strip() and not line.startswith(STDERR_CHATTER):
            self.last_other = line.strip()[:200]
        if len(self.head) < STDERR_HEAD_LINES:
            self.head.append(line)
        else:
            self.tail.append(line)


def _digest_stderr(stream: IO[bytes]) -> _StderrDigest:
    """Count error replies and keep the first and last lines, reading line by line.

    Progress lines end in "\\r", the rest in "\\n": both end a line here.
    """
    digest = _StderrDigest()
    text = io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline=None)
    try:
        for line in text:
            digest.add(line.rstrip("\n"))
    finally:
        text.detach()  # the caller closes the file
    return digest


def _last(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"
