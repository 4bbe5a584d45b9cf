"""Columns added to existing tables since the first release, added in place on open.

``create_all`` creates missing tables but never alters existing ones, so a database made by an
earlier release would lack these columns. Until the store has versioned migrations, each
addition is listed here with the DDL that adds it; every one has a default, so old rows stay
valid.
"""

from __future__ import annotations

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("effects", "attempts", "INTEGER NOT NULL DEFAULT 0"),
)
"""``(table, column, column DDL)`` for every column added after the table first shipped."""


def add_missing_columns(conn: Connection) -> list[str]:
    """Add the columns of :data:`ADDED_COLUMNS` a database lacks; returns ``table.column`` added."""
    inspector = inspect(conn)
    added = []
    for table, column, ddl in ADDED_COLUMNS:
        if not inspector.has_table(table):
            continue
        if column in {c["name"] for c in inspector.get_columns(table)}:
            continue
        conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {ddl}"))
        added.append(f"{table}.{column}")
    return added
