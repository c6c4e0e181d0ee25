"""memtier_benchmark: argv in, measurement out.

memtier runs either a duration (``--test-time``) or a request count per client
(``--requests``), sends GET/SET traffic or a rotation of arbitrary commands (``--command``),
and writes its report as JSON. This is the adapter the loadgen registry uses: it finds and
fingerprints the binary, runs it and puts the result together, including the correction of
memtier's whole-second duration error. memtier_argv builds the command line and
memtier_report reads what the run wrote (and lists memtier's quirks).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from regtrack.bench.loadgen import base
from regtrack.bench.loadgen.base import (
    Aim,
    LoadgenBinary,
    LoadgenResult,
    result_of,
    run_tool,
    tool_version,
)
from regtrack.bench.loadgen.memtier_argv import argv, whole_seconds
from regtrack.bench.loadgen.memtier_report import (
    MemtierReport,
    digest_stderr,
    parse_json,
    reported_duration,
    true_duration,
)
from regtrack.core.digests import sha256_of
from regtrack.core.errors import BadInput, CannotMeasure
from regtrack.core.records import LoadSpec

NAME = "memtier_benchmark"
ERRORS_ROW = "__errors__"


def installed() -> str | None:
    """The memtier_benchmark on PATH, else the one scripts/install.sh built beside regtrack."""
    return base.installed(NAME)


def locate(path: str | None = None) -> LoadgenBinary:
    """Choose the one memtier_benchmark for the whole run and fingerprint it.

    An explicit path wins; else the installed one (the same from run to run, so runs stay
    comparable).
    """
    if path:
        if not Path(path).is_file():
            raise BadInput(f"load generator {path} does not exist")
        found = str(Path(path).absolute())
    else:
        on_path = installed()
        if not on_path:
            raise CannotMeasure(
                "memtier_benchmark is not installed: scripts/install.sh builds it (set "
                "REGTRACK_MEMTIER_ARCHIVE to its release archive where GitHub cannot be "
                "reached), or put one on PATH, or pass --loadgen-bin PATH"
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
        done = run_tool(NAME, command, timeout, aim, digest_stderr)
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
        if parsed.requests and problem is None:
            parsed, problem = _fix_duration(parsed, result, test_time)
        totals = parsed.totals
        result.requests = parsed.requests
        result.ops_per_sec = totals.get("ops_per_sec")
        result.latency_ms = {k: v for k, v in totals.items() if k not in ("ops_per_sec", "count")}
        result.per_command = dict(parsed.commands)
        lost = max(parsed.connection_errors, stderr.connection_errors)
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
    parsed: MemtierReport, result: LoadgenResult, test_time: float | None
) -> tuple[MemtierReport, str | None]:
    """``parsed`` with memtier's whole-second duration error put right (see true_duration),
    or why it cannot be."""
    reported = reported_duration(parsed)
    asked = None if test_time is None else whole_seconds(test_time)
    duration = true_duration(parsed, test_time=asked, wall_s=result.wall_s)
    if duration is None:
        return parsed, (
            f"{NAME} reported a run of {reported:.3f} s, which cannot be right "
            f"(it ran {result.wall_s:.2f} s in all)"
        )
    if abs(duration - reported) <= 0.5:
        return parsed, None
    result.raw_output += (
        f"\n[regtrack] {NAME} reported a run of {reported:.3f} s (its whole-second "
        f"timestamp averaging error); rates recomputed over {duration:.3f} s"
    )
    return parsed.over(duration), None


def _last(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"
