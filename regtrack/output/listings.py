"""What scripts read of the database's lists (`compare --list`, `baseline list`,
`history --format json`): JSON documents with a schema_version, as every result has."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from regtrack.analysis.records import SCHEMA_VERSION, plain


def document(kind: str, items: list[dict[str, Any]], **more: Any) -> str:
    """``{"schema_version": N, "kind": kind, kind: items, ...more}`` as indented JSON."""
    body = {"schema_version": SCHEMA_VERSION, "kind": kind, kind: items, **more}
    return json.dumps(plain(body), indent=2, default=str)


def history_items(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """One item per value of a history (run, version, value, the change point it starts
    if any): the columns `history` prints, as JSON types (NaN: null)."""
    keep = [
        c
        for c in (
            "workload", "point", "metric", "run_id", "created_at", "label", "series", "commit",
            "redis_version", "value", "change_pct", "comparability", "server",
        )
        if c in frame
    ]  # fmt: skip
    return json.loads(frame[keep].to_json(orient="records", date_format="iso"))
