"""What `regtrack merge` did, plan by plan, and what is still missing.

Sources and hosts come from shard databases, which are hostile input: shown printable.
"""

from __future__ import annotations

from pathlib import Path

from regtrack.core.text import printable
from regtrack.results.shard_union import PlanMerge


def render(results: list[PlanMerge], out: Path) -> str:
    lines = []
    shown = printable(out, None)
    for r in results:
        have = r.planned - sum(m.trials for m in r.missing)
        lines.append(
            f"plan {printable(r.plan_id)} -> run {r.run_id} of {shown}: {r.added} trials added, "
            f"{r.already} already merged; {have} of {r.planned} planned trials measured"
        )
        lines += [f"  {printable(source, None)}" for source in r.sources]
        if r.apart:
            lines.append(
                "  instructions per op are not one population across these hosts ("
                + "; ".join(map(printable, r.apart))
                + "): each block is compared on its own host and hosts are a level of the "
                "model; compare counts across hosts only where these agree"
            )
        for m in r.missing:
            lines.append(
                f"  shard {m.index}/{m.count} missing: {m.blocks} blocks ({m.trials} trials) "
                "not measured"
            )
    return "\n".join(lines)


def missing_line(results: list[PlanMerge], out: Path) -> str:
    """The one error line of an incomplete merge: which shards, and the commands."""
    parts = []
    for r in results:
        for m in r.missing:
            parts.append(f"shard {m.index}/{m.count} missing: {m.blocks} blocks not measured")
    runs = " and ".join(f"run {r.run_id}" for r in results if r.missing)
    return (
        f"{'; '.join(parts)} ({runs} of {printable(out, None)} is incomplete): run the same "
        "command with "
        "--shard K/N on any host (or `regtrack run --resume RUN --db SHARD.db` where that "
        "shard was interrupted), then merge its database again"
    )
