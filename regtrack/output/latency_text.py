"""`regtrack latency`: each version's open-loop latency per point (the merged histogram of
its valid trials), as a table or JSON, and as .hgrm files for HdrHistogram's tools."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Sequence
from pathlib import Path

from rich.table import Table

from regtrack.analysis.histograms import Distribution, hgrm
from regtrack.analysis.interval import Change
from regtrack.analysis.slo import SloCapacity
from regtrack.core import writes
from regtrack.core.text import printable
from regtrack.output.console import ShownConsole, table_width
from regtrack.plan.latency_plan import Slo

SHOWN = (50.0, 90.0, 99.0, 99.9, 99.99)


def _name(p: float) -> str:
    return f"p{p:g}"


def table(found: Sequence[Distribution]) -> str:
    """Percentiles of each version at each point, from its merged histogram."""
    grid = Table()
    for column in ("version", "point", "offered/s", "trials", "requests",
                   *[f"{_name(p)} ms" for p in SHOWN], "max ms"):  # fmt: skip
        grid.add_column(column, justify="left" if column in ("version", "point") else "right")
    for d in found:
        by = dict(d.percentiles_ms)
        grid.add_row(
            printable(d.target), printable(d.point), f"{d.offered_rate:,.0f}", str(d.trials),
            f"{d.count:,}", *[f"{by[p]:.3f}" for p in SHOWN], f"{d.max_ms:.3f}",
        )  # fmt: skip
    console = ShownConsole(
        file=io.StringIO(), width=table_width(), force_terminal=False, color_system=None
    )
    console.print(grid)
    return console.file.getvalue()  # type: ignore[attr-defined]


def document(found: Sequence[Distribution]) -> str:
    return json.dumps(
        {
            "distributions": [
                {
                    "version": d.target, "point": d.point, "offered_rate": d.offered_rate,
                    "trials": d.trials, "requests": d.count, "max_ms": d.max_ms,
                    "percentiles_ms": {f"{p:g}": v for p, v in d.percentiles_ms},
                }
                for d in found
            ]
        },
        indent=2,
    )  # fmt: skip


def write_hgrm(found: Sequence[Distribution], out: str) -> list[Path]:
    """One .hgrm per version and point in ``out`` (made if missing, no link followed);
    names from the labels, reduced to letters, digits, '.', '_' and '-'."""
    folder = writes.make_dirs(out, "histogram folder")
    written = []
    for i, d in enumerate(found, start=1):
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{d.target}-{d.point}")[:80].strip("._")
        written.append(writes.replace_text(folder / f"{i:02d}-{stem}.hgrm", hgrm(d), "histogram"))
    return written


def slo_lines(slo: Slo, found: Sequence[SloCapacity]) -> str:
    """Each version's capacity at the latency target, and its change from the baseline's."""
    lines = [
        f"capacity at {slo.text} (open loop: the highest offered rate whose {slo.percentile} "
        "stays within it, median over repetitions; change paired by repetition):"
    ]
    for c in found:
        rate = f"{c.median_rate:,.0f}/s" if c.median_rate is not None else "not reached"
        change = f"  {answer(c.change, c.verdict)}" if c.verdict else "  (baseline)"
        lines.append(f"  {printable(c.target)}: {rate}{change}")
        for x in c.crossings:
            rep = f"    rep {x.repetition + 1}"
            if x.bound == "at least":
                lines.append(f"{rep}: within the target at every rate offered, so at least "
                             f"{x.rate:,.0f}/s: offer higher loads")  # fmt: skip
            elif x.bound == "below":
                lines.append(f"{rep}: beyond the target already at {x.rate:,.0f}/s: offer "
                             "lower loads")  # fmt: skip
    return "\n".join(lines)


def answer(change: Change | None, verdict: str) -> str:
    if change is None:
        return f"{verdict} (too few repetitions crossed the target in both versions)"
    return f"{change.estimate_pct:+.1f}% [{change.low_pct:+.1f}, {change.high_pct:+.1f}] {verdict}"
