"""Where a run's throughput trials spent their calls: per command, its share of the calls,
its server time per call, its failed calls and the load generator's p99 for it (the run
page's per-command breakdown of a mixed workload)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

# What load generators and regtrack send around the workload itself (redis-benchmark asks
# CONFIG GET save/appendonly per run): left out of the per-command breakdown.
TOOLING_COMMANDS = frozenset(
    {"config|get", "config", "info", "ping", "hello", "select", "client|setname",
     "client|list", "command", "command|docs", "command|count"}
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class CommandShare:
    """One command at one point of one version, summed over its throughput trials."""

    workload: str
    point: str
    point_order: int
    target: str
    command: str
    calls: float
    share_pct: float | None
    usec_per_call: float | None
    failed_calls: float
    trusted: bool  # every trial it was counted in is valid
    client_p99_ms: float | None


def breakdown(frame: pd.DataFrame) -> list[CommandShare]:
    """Per-command rows from a run's command statistics (results.loaded.command_stats).

    Valid trials only, except in a cell with none (the built-in driver's throughput is never
    valid): the server's counts are still right there, and the row says it is untrusted.
    A sweep with one command per cell has nothing to break down: [].
    """
    if frame.empty:
        return []
    frame = frame[frame["mode"] == "throughput"].copy()
    cell = ["workload", "point", "target"]
    frame["cell_has_valid"] = frame.groupby(cell)["valid"].transform("any")
    frame = frame[frame["valid"] | ~frame["cell_has_valid"]]
    server = frame[(frame["source"] == "server") & ~frame["command"].isin(TOOLING_COMMANDS)]
    per_cell = server.groupby(cell)["command"].nunique()
    if server.empty or per_cell.max() < 2:
        return []
    loadgen = frame[frame["source"] == "loadgen"].set_index([*cell, "command"])
    totals = server.groupby(cell)["calls"].sum()
    rows = []
    keys = ["workload", "point", "point_order", "target", "command"]
    for (workload, point, order, target, command), group in server.groupby(keys, sort=True):
        calls = float(group["calls"].sum())
        usec = float(group["usec"].sum())
        total = float(totals[(workload, point, target)])
        where = (workload, point, target, command)
        client = loadgen.loc[[where]] if where in loadgen.index else None
        p99 = client["p99_ms"] if client is not None else None
        rows.append(
            CommandShare(
                workload=workload,
                point=point,
                point_order=int(order),
                target=target,
                command=command,
                calls=calls,
                share_pct=100.0 * calls / total if total else None,
                usec_per_call=usec / calls if calls else None,
                failed_calls=float(group["failed_calls"].fillna(0).sum()),
                trusted=bool(group["valid"].all()),
                client_p99_ms=float(p99.median())
                if p99 is not None and p99.notna().any()
                else None,
            )
        )
    return sorted(rows, key=lambda r: (r.workload, r.point_order, r.target, -r.calls))
