"""The crash test's ledger: an append-only SQLite file outside the runtime's database.

Every tool execution, queued note, scheduled effect and effect run appends a row, committed
before the call returns, so a ``kill -9`` of the server keeps everything recorded before it.
The path comes from the ``CRASH_LEDGER`` environment variable.
"""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass

SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    event TEXT NOT NULL,      -- tool_start, tool_end, note_queued, effect_scheduled,
                              -- effect_start, effect_end
    name TEXT NOT NULL,       -- tool or effect name
    op TEXT NOT NULL,         -- the operation key the model put in the arguments
    thread_id TEXT NOT NULL,
    call_id TEXT,             -- the tool call id (tools) or effect id (effects)
    attempt INTEGER NOT NULL, -- 1 for the first execution of this call id, 2 for a rerun...
    at_us INTEGER NOT NULL
)
"""


@dataclass(frozen=True)
class Entry:
    """One ledger row."""

    event: str
    name: str
    op: str
    thread_id: str
    call_id: str | None
    attempt: int
    at_us: int


def connect(path: str | None = None) -> sqlite3.Connection:
    """Open (creating if needed) the ledger at ``path`` or ``$CRASH_LEDGER``."""
    target = path or os.environ["CRASH_LEDGER"]
    connection = sqlite3.connect(target, timeout=30, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    connection.execute(SCHEMA)
    return connection


def append(event: str, name: str, op: str, thread_id: str, call_id: str | None) -> int:
    """Append one row (committed on return); returns its attempt number."""
    connection = connect()
    try:
        connection.execute("BEGIN IMMEDIATE")
        start_event = "effect_start" if event.startswith("effect_") else "tool_start"
        (previous,) = connection.execute(
            "SELECT COUNT(*) FROM ledger WHERE event = ? AND thread_id = ? AND call_id IS ?",
            (start_event, thread_id, call_id),
        ).fetchone()
        attempt = previous + 1 if event == start_event else max(previous, 1)
        connection.execute(
            "INSERT INTO ledger (event, name, op, thread_id, call_id, attempt, at_us) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (event, name, op, thread_id, call_id, attempt, time.time_ns() // 1000),
        )
        connection.execute("COMMIT")
        return int(attempt)
    finally:
        connection.close()


def recorded(event: str, thread_id: str, call_id: str) -> bool:
    """Whether ``event`` was already recorded for this tool call (the idempotency check)."""
    connection = connect()
    try:
        row = connection.execute(
            "SELECT 1 FROM ledger WHERE event = ? AND thread_id = ? AND call_id = ? LIMIT 1",
            (event, thread_id, call_id),
        ).fetchone()
    finally:
        connection.close()
    return row is not None


def recorded_op(event: str, thread_id: str, op: str) -> bool:
    """Whether ``event`` was already recorded for operation ``op`` of this thread."""
    connection = connect()
    try:
        row = connection.execute(
            "SELECT 1 FROM ledger WHERE event = ? AND thread_id = ? AND op = ? LIMIT 1",
            (event, thread_id, op),
        ).fetchone()
    finally:
        connection.close()
    return row is not None


def read(path: str) -> list[Entry]:
    """Every row, in append order."""
    connection = connect(path)
    try:
        rows = connection.execute(
            "SELECT event, name, op, thread_id, call_id, attempt, at_us FROM ledger ORDER BY seq"
        ).fetchall()
    finally:
        connection.close()
    return [Entry(*row) for row in rows]
