"""`regtrack mix capture --check`: the real traffic against the replay, command by command.

Command names are the live server's (text another party chose): shown printable.
"""

from __future__ import annotations

import math

from regtrack.analysis.capture_check import (
    CPU_BOUND,
    GATED_SHARE,
    NARROW,
    SHARE_BOUND,
    SIZE_BOUND,
    Check,
    Replayed,
    SizeRow,
    relative,
)
from regtrack.core.errors import EXIT_CHECK_OFF
from regtrack.core.text import printable


def _pct(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "new"
    return f"{100 * value:+.1f}%"


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _mark(judged: bool, within: bool) -> str:
    if not judged:
        return ""
    return "ok" if within else "OFF"


def _rate(calls: int, seconds: float) -> str:
    return f"{calls:,} calls in {seconds:.1f} s ({calls / seconds if seconds else 0:,.0f}/s)"


def render(done: Replayed) -> str:
    """The two sides, the table of shares, the value sizes, CPU per task, the verdict."""
    c = done.check
    lines = [
        f"real:   {printable(done.url)} (Redis {printable(c.real.version)}): "
        f"{_rate(c.real.total, c.real.seconds)}",
        f"replay: a fresh redis-server {printable(c.replay.version)} on CPU "
        f"{done.server_cpus}, {done.loadgen} on CPU {done.client_cpus}, pipeline "
        f"{done.pipeline}: {_rate(c.replay.total, c.replay.seconds)}",
        "",
        *_shares(c),
        "",
        *_sizes(c, done.paced),
        _cpu(c, done.paced),
    ]
    if c.replay_errors:
        named = ", ".join(f"{printable(k)} x{n}" for k, n in sorted(c.replay_errors.items()))
        lines.append(f"the replay got error replies: {named}")
    return "\n".join([*lines, verdict(c)])


def _shares(c: Check) -> list[str]:
    names = [printable(r.command) for r in c.rows]
    width = max([len("command"), *map(len, names)])
    head = (
        f"{'command':<{width}}  {'real %':>7}  {'replay %':>8}  {'off':>7}  "
        f"{'µs/call real':>12}  {'replay':>7}"
    )
    lines = [head]
    for row, name in zip(c.rows, names, strict=True):
        lines.append(
            f"{name:<{width}}  {100 * row.real_share:>7.2f}  {100 * row.replay_share:>8.2f}  "
            f"{_pct(row.off):>7}  {_us(row.real_us):>12}  {_us(row.replay_us):>7}  "
            f"{_mark(row.gated, row.within)}".rstrip()
        )
    lines.append(
        f"(off: replay share / real share - 1; judged where either share is at least "
        f"{100 * GATED_SHARE:g}%, bound {100 * SHARE_BOUND:g}%; µs/call: commandstats usec)"
    )
    return lines


def _sizes(c: Check, paced: bool) -> list[str]:
    if not c.sizes and paced:
        return ["value sizes: none recorded in the file (a lifecycle captured before its "
                "header listed them, or written by hand)"]  # fmt: skip
    if not c.sizes:
        return ["value sizes: none recorded in the file (a capture without --sample, or by hand)"]
    lines = ["value sizes (median bytes per argument, real / replay: the capture's MONITOR "
             "sample, the replay's; p10 and p90 too where the file draws them):"]  # fmt: skip
    for s in c.sizes:
        sent = "-" if s.replay is None else str(s.replay.median)
        mark = _mark(s.gated, s.within)
        spread = "".join(
            f"  {name} {real} / {'-' if replay is None else replay}  {_size_off(real, replay)}"
            for name, real, replay in s.pairs() if name != "p50"
        )  # fmt: skip
        lines.append(
            f"  {printable(s.command)} argument {s.position}: {s.real_median} / {sent}  "
            f"{_size_off(s.real_median, None if s.replay is None else s.replay.median)}"
            + spread
            + (f"  {mark}" if mark else "")
            + _why_not(s)
        )
    lines.append(f"(judged for commands with at least {100 * GATED_SHARE:g}% of the real "
                 f"calls: the median where the real sizes are about one value (max <= "
                 f"{NARROW:g} x min), p10/p50/p90 where the file draws the size from its "
                 f"distribution; bound {100 * SIZE_BOUND:g}% or 1 byte)")  # fmt: skip
    return lines


def _why_not(s: SizeRow) -> str:
    """Why a row is shown but not judged."""
    if s.engine:
        return "  (an id or time the engine writes: its size, not the traffic's)"
    if s.shared:
        return "  (sent by several of the file's commands: mixed)"
    return "" if s.narrow or s.spread else f"  (real {s.real_low}-{s.real_high}: mixed)"


def _size_off(real: int | None, replay: int | None) -> str:
    """Relative, or in bytes where the real size is 0 (no ratio to show)."""
    if real == 0 and replay is not None:
        return f"{replay:+d} B"
    return _pct(relative(None if replay is None else float(replay), real))


def _cpu(c: Check, paced: bool) -> str:
    unit = f"task (one {printable(c.cpu.task)} call)" if c.cpu.task else "command (no --task)"
    mark = "within" if c.cpu.within else "outside"
    why = (
        "the replay at the live task rate, on another server process"
        if paced
        else "the replay runs flat out, the real server at its own load"
    )
    return (
        f"server CPU per {unit}: real {_us(c.cpu.real_us)} µs, replay {_us(c.cpu.replay_us)} "
        f"µs, {_pct(c.cpu.off)}: {mark} {100 * CPU_BOUND:g}% (shown, not judged: {why})"
    )


def _off_size(s: SizeRow) -> str:
    """The argument and its quantile furthest off (the median for a narrow one)."""
    name, real, sent = max(
        s.pairs(),
        key=lambda p: math.inf if p[2] is None else abs(p[2] - (p[1] or 0)) / max(p[1] or 0, 1),
    )
    where = "" if name == "p50" and not s.spread else f" {name}"
    return f"{printable(s.command)} argument {s.position}{where} size {_size_off(real, sent)}"


def verdict(c: Check) -> str:
    """The last line: faithful, or which commands and sizes are off (and the exit code)."""
    if c.faithful:
        return (
            f"faithful: every command with at least {100 * GATED_SHARE:g}% of the calls is "
            f"within {100 * SHARE_BOUND:g}% of its real share"
            + (f", value sizes within {100 * SIZE_BOUND:g}%" if c.sizes else "")
        )
    off = [f"{printable(r.command)} {_pct(r.off)}" for r in c.off_rows]
    off += [_off_size(s) for s in c.off_sizes]
    return f"OFF (exit {EXIT_CHECK_OFF}): " + ", ".join(off)
