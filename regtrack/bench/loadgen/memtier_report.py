"""memtier_benchmark's output read: its JSON report and its stderr, put into figures.

Its quirks, as seen in real outputs (tests/fixtures/memtier):

- the JSON Totals "Average Latency" is cut to whole milliseconds, so averages come from
  "Accumulated Latency" / "Count";
- with ``--command-stats-breakdown=line`` two commands of the same name give the same JSON
  key twice;
- error replies appear nowhere in the report, only as one stderr line each (which can add
  up to many megabytes);
- its run duration, and so every rate, is often off by exactly one second (see
  true_duration), which memtier.run_once puts right.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import re
from collections import deque
from dataclasses import dataclass
from typing import IO, Any

SECTION = "ALL STATS"  # the one run's figures; absent when --run-count > 1
ERROR_REPLY_MARK = "handle error response"
CONNECTION_ERROR_MARK = "Connection error:"
STDERR_HEAD_LINES = 20
STDERR_TAIL_LINES = 20
# stderr lines that say nothing about a failure: progress and the JSON file's bookkeeping.
STDERR_CHATTER = ("[RUN #", "Json file ", "Saving JSON output file", "Writing results to")
GET_SET_ROWS = ("Sets", "Gets", "Waits")  # always all three in GET/SET mode, used or not


@dataclass(frozen=True)
class MemtierReport:
    """The figures of a report's "ALL STATS" section. A row is {"ops_per_sec", "count",
    "avg", "p50", "p99", "p999"} (latencies in ms) without the fields the report leaves out
    or fills with "---": the load generator's row as a trial keeps it (per_command)."""

    totals: dict[str, float]
    commands: dict[str, dict[str, float]]  # by row name: "Sets", "Sets#2", "Gets", ...
    duration_s: float
    requests: int
    connection_errors: int
    last_busy_second: int | None  # the last second of the time series with requests

    def over(self, duration: float) -> MemtierReport:
        """The report with every rate recomputed over ``duration`` (see true_duration)."""
        reported = reported_duration(self)

        def rescaled(row: dict[str, float]) -> dict[str, float]:
            return {k: v * reported / duration if k == "ops_per_sec" else v for k, v in row.items()}

        commands = {name: rescaled(row) for name, row in self.commands.items()}
        return dataclasses.replace(
            self, totals=rescaled(self.totals), commands=commands, duration_s=duration
        )


def parse_json(text: str) -> MemtierReport:
    """The figures of a ``--json-out-file`` report's "ALL STATS" section, as reported.

    Rows named twice (two commands with one name) are kept as "Sets", "Sets#2", ...;
    GET/SET rows of a command never sent are dropped. Rates and duration are memtier's
    own: see true_duration. Raises ValueError if unusable.
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
    return MemtierReport(
        totals=totals,
        commands=commands,
        duration_s=_duration_s(stats.get("Runtime")),
        requests=int(totals.get("count", 0)),
        connection_errors=int(_number(stats["Totals"].get("Connection Errors")) or 0),
        last_busy_second=_last_busy_second(stats["Totals"]),
    )


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
    parsed: MemtierReport, *, test_time: float | None = None, wall_s: float | None = None
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
    reported = reported_duration(parsed)
    if test_time is not None:
        low, high = test_time - 0.5, test_time + 0.5
    else:
        # Requests completed in second ``last`` of the time series (counted from each
        # client's start), and none later: the run lasted ``last`` to ``last + 1`` s.
        last = parsed.last_busy_second
        low = last - 0.05 if last is not None else 0.0
        high = last + 1.05 if last is not None else math.inf
        if wall_s is not None:
            high = min(high, wall_s + 0.05)
    for shift in sorted(range(-3, 4), key=abs):
        candidate = reported + shift
        if candidate > 0 and low <= candidate <= high:
            return candidate
    return None


def reported_duration(parsed: MemtierReport) -> float:
    """Count / Ops/sec: the duration memtier divided by, to the microsecond."""
    count, ops = parsed.totals.get("count"), parsed.totals.get("ops_per_sec")
    return count / ops if count and ops else parsed.duration_s


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


# --- stderr ---------------------------------------------------------------------------


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


def digest_stderr(stream: IO[bytes]) -> _StderrDigest:
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
