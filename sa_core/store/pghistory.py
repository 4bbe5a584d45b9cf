"""A thread's history read incrementally on PostgreSQL.

SQLite tells a store whether another process wrote (``PRAGMA data_version``), so its history
cache serves reads with no query at all. PostgreSQL cannot tell, so every read asks the
database, but only for the rows inserted since the history a worker kept
(:class:`~sa_core.store.caches.ReadHistories`), together with a digest of the rows it already
has (their ``seq`` and row versions): when the digest differs, one of them changed (an edit,
a status, a deletion, or a row that committed late with a lower ``seq``) and the history is
read whole.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Text,
    bindparam,
    cast,
    func,
    literal_column,
    or_,
    select,
    type_coerce,
)

from sa_core.store import tables as t
from sa_core.store.caches import ReadHistory
from sa_core.store.fast import Prepared
from sa_core.store.messagerows import MESSAGE_COLUMNS, message_from_row

if TYPE_CHECKING:
    from sa_core.spec.records import Message
    from sa_core.store.caches import StoreCaches

SUMMARY_KEY = "history_summary"
ROW_HASH = "row_hash"
"""The column of a history row read here holding the hash of its ``seq`` and row version."""


def history_since_known(thread_id: Any) -> Any:
    """``[rows newer than b_known, digest of the rest, highest seq]`` (JSON).

    The rows are the history's (depth 0, not pending), in order, each with its
    :data:`ROW_HASH`: a 64-bit hash of its ``seq`` and row version (PostgreSQL's ``xmin``, the
    transaction that wrote that version of the row). The digest of the rows at or below
    ``b_known`` is ``[how many, sum of their hashes]``: any write of one of them (an edit, a
    status, a deletion, a row committed late with a lower ``seq``) changes it. A sum needs no
    sort and adds up: the digest of every row read is the rest's plus the new rows' hashes,
    so the caller keeps it without the database computing it again. PostgreSQL only, built by
    cached functions on first use: SQLite stores never import the PostgreSQL dialect for it.
    """
    from sqlalchemy.dialects.postgresql import aggregate_order_by

    m = t.messages.c
    version = cast(m.seq, Text) + ":" + cast(literal_column("messages.xmin"), Text)
    found = (
        select(*MESSAGE_COLUMNS, m.seq, func.hashtextextended(version, 0).label(ROW_HASH))
        .where(
            m.thread_id == thread_id,
            m.depth == 0,
            or_(m.status.is_(None), m.status != "pending"),
        )
        .subquery()
    )
    known: Any = bindparam("b_known", type_=BigInteger)
    older = found.c.seq <= known
    newer = func.json_agg(aggregate_order_by(found.table_valued(), found.c.created_at, found.c.seq))
    digest = func.json_build_array(
        func.count().filter(older), func.coalesce(func.sum(found.c[ROW_HASH]).filter(older), 0)
    )
    summary = func.json_build_array(
        newer.filter(found.c.seq > known), digest, func.max(found.c.seq)
    )
    return select(summary).scalar_subquery()


def merged(older: list[Message], newer: list[Message]) -> list[Message]:
    """Messages in stored order: ``newer`` were all inserted after ``older``."""
    combined = older + newer
    if newer and older and newer[0].created_at < older[-1].created_at:
        combined.sort(key=lambda message: message.created_at)  # stable: insertion breaks ties
    return combined


@functools.cache
def history_read_pg() -> Prepared:
    """:func:`history_since_known` of the thread ``b_id`` alone, as a query."""
    column = type_coerce(history_since_known(bindparam("b_id")), JSON).label(SUMMARY_KEY)
    return Prepared(select(column), [column])


def history_params(thread_id: str, held: ReadHistory | None) -> dict[str, Any]:
    """The parameters of :func:`history_since_known` against a kept history (or none)."""
    return {"b_id": thread_id, "b_known": -1 if held is None else held.seq}


def apply_history_read(
    caches: StoreCaches, thread_id: str, held: ReadHistory | None, summary: list[Any]
) -> tuple[list[Message], list[Message]] | None:
    """The history a read of :func:`history_since_known` gives, kept for the next read.

    Args:
        caches: The store's caches.
        thread_id: The thread read.
        held: The kept history the read was asked against (its ``seq``), or ``None``.
        summary: What the read returned.

    Returns:
        The history (shared with the cache: copy before changing the list) and the messages
        of it this read fetched, or ``None`` when a row of ``held`` changed: the entry is
        dropped, and a read without it reads all.
    """
    entries, (count, total), highest = summary
    histories = caches.read_histories
    if held is not None and (count, total) != held.digest:
        histories.drop(thread_id)
        return None
    rows = caches.rows
    newer = []
    for entry in entries or []:
        count += 1
        total += entry[ROW_HASH]
        newer.append(rows.message(without_seq(entry), message_from_row))
    history = newer if held is None else merged(held.messages, newer)
    seq = -1 if highest is None else int(highest)
    histories.put(thread_id, ReadHistory(seq, (count, total), history))
    return history, newer


def without_seq(row: dict[str, Any]) -> dict[str, Any]:
    """The row (changed in place) without its ``seq`` column (and row hash)."""
    row.pop("seq", None)
    row.pop(ROW_HASH, None)
    return row
