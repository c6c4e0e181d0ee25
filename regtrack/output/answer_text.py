"""How one answer reads in every output: a value, a change with its interval and verdict,
the servers' caption, a forced comparison's label. Tables, the ci summary, the pull-request
comment, the report and bisect's text all say it in these words."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from regtrack.analysis.records import Answer, PointComparison, PooledComparison, ServerFacts
from regtrack.core.text import printable
from regtrack.workloads import server_config

if TYPE_CHECKING:
    from regtrack.analysis.run_shift import RunShift

UNTRUSTED = "!"


def format_value(value: float | None, unit: str, server_busy_pct: float | None = None) -> str:
    """A cell's value; a throughput with the server's busy share beside it, because it is
    the server's capacity only when the server was the busy side."""
    if value is None:
        return "-"
    if unit == "ops/s":
        busy = "" if server_busy_pct is None else f" (server {server_busy_pct:.0f}%)"
        return f"{value:,.0f}{busy}"
    if unit in ("Ir/op", "cycles/op"):
        return f"{value:,.1f}"
    return f"{value:.3f}"


def change_text(rec: Answer) -> str:
    """ "-3.2% [-5.1, -1.2] regression": the estimate, its interval and the verdict; "n/a
    (1 complete block, 2 needed)" where there is nothing to estimate from."""
    n = rec.n
    if n is not None and n < 2:
        return f"n/a ({n} complete block{'' if n == 1 else 's'}, 2 needed)"
    if rec.change_pct is None:
        return "-"
    text = f"{rec.change_pct:+.1f}%"
    bounds = interval_text(rec.ci_low_pct, rec.ci_high_pct)
    if bounds:
        text += f" {bounds}"
    text += f" {printable(rec.verdict)}"  # read back from JSON or a database, it is text
    if rec.blocks_for_no_change:
        text += f" (no change needs {rec.blocks_for_no_change} seeds, {n} so far)"
    elif rec.verdict == "inconclusive" and rec.mde_pct is not None:
        if bounds != TOO_WIDE:
            text += f" (detectable: {mde_text(rec.mde_pct)})"
    elif rec.extra_repetitions:
        text += f" (~{rec.extra_repetitions} more reps)"
    return text


# An interval wider than ±100% (or unbounded, at a look that spends nothing) tells the
# reader only that more blocks are needed; its figures would be noise.
READABLE_WIDTH_PCT = 200.0
TOO_WIDE = "[too wide to read]"


def interval_text(low: float | None, high: float | None, digits: int = 1) -> str:
    """ "[-5.1, -1.2]", "[too wide to read]", or "" without an interval."""
    if low is None or high is None:
        return ""
    if not (math.isfinite(low) and math.isfinite(high)) or high - low > READABLE_WIDTH_PCT:
        return TOO_WIDE
    return f"[{low:+.{digits}f}, {high:+.{digits}f}]"


def mde_text(pct: float) -> str:
    """The minimum detectable effect as printed: "±4.3%", "over ±100%", "unbounded"."""
    if pct == float("inf"):
        return "unbounded"
    return "over ±100%" if pct > 100.0 else f"±{pct:.1f}%"


def shift_text(
    baseline_run: int, shift: RunShift, quote: Callable[[object], str] = printable
) -> str:
    """What an interval across runs carries: "across runs (baseline from run 3): each
    run's shift, sd 5.0% (default ...), is in the interval"."""
    return (
        f"across runs (baseline from run {baseline_run}): each run's shift as a whole, sd "
        f"{shift.sd_pct:.2f}% ({quote(shift.source)}), is in the interval"
    )


def server_caption(facts: ServerFacts, quote: Callable[[object], str] = printable) -> str:
    """The line every output carries about the servers (workloads/server_config.caption),
    its stored names and values shown by ``quote``."""
    return server_config.caption(
        facts.server_config, facts.server_data, facts.server_without, quote
    )


def forced_line(
    differences: Sequence[str] | None, quote: Callable[[object], str] = printable
) -> str | None:
    """The label of a comparison made with --force between runs measured differently."""
    if not differences:
        return None
    return f"FORCED comparison, not like with like: {'; '.join(map(quote, differences))}"


# What moved beneath simulated cycles: the misses per op, in the words a reader knows.
MISS_TITLE = {
    "l1_misses_per_op": "L1 misses",
    "ll_misses_per_op": "LL misses",
    "branch_misses_per_op": "mispredicted branches",
}


def misses_moved(records: Sequence[PointComparison], answer: PooledComparison) -> str:
    """Why a cycles-per-op answer moved: per op, the candidate's misses minus the
    baseline's, averaged over the answer's points ("" without the simulation's records):
    "per op: LL misses +1.00, L1 misses +1.02, mispredicted branches +0.01"."""
    parts = []
    for metric, title in MISS_TITLE.items():
        diffs = [
            r.candidate_value - r.baseline_value
            for r in records
            if r.metric == metric and r.candidate == answer.candidate
            and r.workload == answer.workload and r.point in answer.points
            and r.candidate_value is not None and r.baseline_value is not None
        ]  # fmt: skip
        if diffs:
            parts.append(f"{title} {sum(diffs) / len(diffs):+,.2f}")
    return f"per op: {', '.join(parts)}" if parts else ""
