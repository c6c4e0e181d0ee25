"""A database's schema objects against those regtrack creates: any other is refused.

A database regtrack opens may be crafted: CI runs regtrack as root in a pull request's
checkout, and the database may be the pull request's. A trigger would rewrite results as
regtrack stores or caches them, a view or trigger could run a query that never ends, and
an extra index or a changed column steers what is read. So before any statement touches
its data, every object its schema lists must be one that regtrack's migrations create for
the schema version the file claims, each table as regtrack defines it (columns with their
types, constraints and defaults, foreign keys, indexes). What is expected is built once per
version, by running the migrations up to it in a database in memory.
"""

from __future__ import annotations

import functools
import re
import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from regtrack.core.errors import BadInput
from regtrack.results.migrations import MIGRATIONS, SCHEMA_VERSION, apply

REMEDY = "use a database regtrack wrote, or a copy from before it was changed"

# Tables SQLite alone creates (no statement may create a name starting with sqlite_):
# ANALYZE's statistics, which steer query plans and never a value, and AUTOINCREMENT's
# counters. Automatic indexes (UNIQUE constraints) are SQLite's too, and compared.
SQLITES_OWN = frozenset(
    {("table", "sqlite_stat1"), ("table", "sqlite_stat4"), ("table", "sqlite_sequence")}
)
# What an object's SQL creates, which is what SQLite builds from it, whatever its row's
# ``type`` says (a crafted file may disguise a trigger as an index).
_CREATES = re.compile(
    r"\s*CREATE\s+(?:UNIQUE\s+)?(VIRTUAL\s+TABLE|TABLE|INDEX|VIEW|TRIGGER)\b", re.IGNORECASE
)
# The most dangerous first: the one named is what runs code or changes values.
_ORDER = ("trigger", "view", "virtual table", "table", "index")


class Table(NamedTuple):
    """A table as SQLite parsed it (how its SQL is written, spacing or case, does not
    matter): its columns (name, type, NOT NULL, default, key, generated), its foreign
    keys and its indexes (name, unique, origin, partial)."""

    columns: tuple[tuple, ...]
    foreign_keys: tuple[tuple, ...]
    indexes: tuple[tuple, ...]


@dataclass(frozen=True)
class Schema:
    """Every object by (kind, name), and how the tables and indexes are defined."""

    objects: Counter[tuple[str, str]]
    tables: dict[str, Table]
    indexes: dict[str, tuple]


def require_regtracks(conn: sqlite3.Connection, db: Path, version: int) -> None:
    """Refuse (one line, BadInput) a database whose schema holds any object, or any
    definition, other than those of regtrack's schema ``version``."""
    expected = expected_schema(version)
    found = _objects(conn)
    problem = _problem(conn, found, expected)
    if problem:
        raise BadInput(f"database {db} {problem} (schema {version}): {REMEDY}")


@functools.cache
def expected_schema(version: int) -> Schema:
    """The schema regtrack's migrations create up to ``version``."""
    conn = sqlite3.connect(":memory:")
    try:
        for step in MIGRATIONS[:version]:
            apply(conn, step)
        objects = _objects(conn)
        return Schema(
            objects,
            {name: _table(conn, name) for kind, name in objects if kind == "table"},
            {name: _index(conn, name) for kind, name in objects if kind == "index"},
        )
    finally:
        conn.close()


def columns(table: str) -> dict[str, tuple[str, bool]]:
    """A table's columns as regtrack's current schema declares them: name -> (type, NOT
    NULL); what results/stored_values.py checks each value read against."""
    definition = expected_schema(SCHEMA_VERSION).tables[table]
    return {str(c[0]): (str(c[1]).upper(), bool(c[2])) for c in definition.columns}


def _problem(conn: sqlite3.Connection, found: Counter, expected: Schema) -> str:
    """What is not regtrack's, the most dangerous first ("" if nothing)."""
    for (kind, name), count in found.items():
        if count > 1:
            return f"holds {count} objects named {_shown(name)} ({_a(kind)})"
    extra = sorted(set(found) - set(expected.objects) - SQLITES_OWN, key=_danger)
    if extra:
        kind, name = extra[0]
        return f"holds {_a(kind)} {_shown(name)} that regtrack did not create"
    missing = sorted(set(expected.objects) - set(found), key=_danger)
    if missing:
        kind, name = missing[0]
        return f"lacks the {kind} {_shown(name)} that regtrack creates"
    for name, definition in expected.tables.items():
        if _table(conn, name) != definition:
            return f"has a table {_shown(name)} other than regtrack's (its columns or keys)"
    for name, definition in expected.indexes.items():
        if _index(conn, name) != definition:
            return f"has an index {_shown(name)} other than regtrack's"
    return ""


def _objects(conn: sqlite3.Connection) -> Counter[tuple[str, str]]:
    rows = conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
    return Counter((_kind(str(r[0]), r[2]), str(r[1])) for r in rows)


def _kind(declared: str, sql: object) -> str:
    if sql is None:  # an automatic index: nothing of it runs
        return declared
    match = _CREATES.match(str(sql))
    return " ".join(match.group(1).lower().split()) if match else f"object ({declared})"


def _a(kind: str) -> str:
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def _danger(item: tuple[str, str]) -> tuple[int, str]:
    kind, name = item
    return (_ORDER.index(kind) if kind in _ORDER else -1, name)


def _table(conn: sqlite3.Connection, name: str) -> Table:
    queries = (
        'SELECT name, type, "notnull", dflt_value, pk, hidden FROM pragma_table_xinfo(?)',
        'SELECT "table", "from", "to", on_update, on_delete, match FROM pragma_foreign_key_list(?)',
        'SELECT name, "unique", origin, partial FROM pragma_index_list(?) ORDER BY name',
    )
    return Table(*(tuple(tuple(row) for row in conn.execute(q, (name,))) for q in queries))


def _index(conn: sqlite3.Connection, name: str) -> tuple:
    """An index's columns (or expressions), order and collation; its table lists it."""
    query = 'SELECT seqno, cid, name, "desc", coll, key FROM pragma_index_xinfo(?)'
    return tuple(tuple(row) for row in conn.execute(query, (name,)))


def _shown(name: str) -> str:
    """A name as a message shows it: quoted, escaped, cut short (a crafted name may be
    long or hold control characters)."""
    return repr(name[:60] + ("..." if len(name) > 60 else ""))
