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

from sa_core.store.caches import ReadHistory
from sa_core.store.fast import Prepared

if TYPE_CHECKING:
    from sa_core.spec.records import Message
    from sa_core.store.caches import StoreCaches

SUMMARY_KEY = "history_summary"
_VERSION = "row_version"


def history_since_known(thread_id: Any) -> Any:
    """``[rows newer than b_known, digest of the rest, digest of all, highest seq]`` (JSON).

    The rows are the history's (depth 0, not pending), in order. A digest is the MD5 of the
    rows' ``seq`` and row version (PostgreSQL's ``xmin``: the transaction that wrote that
    version of the row) in that order. Any write of a row at or below ``b_known`` (an edit, a
    status, a deletion, a row committed late with a lower ``seq``) changes the first digest;
    a row version is read without turning the row into text, so a digest costs little.
    """
    from sqlalchemy import BigInteger, Text, bindparam, cast, func, literal_column, or_, select
    from sqlalchemy.dialects.postgresql import aggregate_order_by

    from sa_core.store import tables as t

    m = t.messages.c
    found = (
        select(*t.messages.c, literal_column("messages.xmin").label(_VERSION))
        .where(
            m.thread_id == thread_id,
            m.depth == 0,
            or_(m.status.is_(None), m.status != "pending"),
        )
        .subquery()
    )
    known: Any = bindparam("b_known", type_=BigInteger)
    order = (found.c.created_at, found.c.seq)
    newer = func.json_agg(aggregate_order_by(found.table_valued(), *order))
    version = cast(found.c.seq, Text) + ":" + cast(found.c[_VERSION], Text)

    def digest(*only: Any) -> Any:
        versions = func.string_agg(version, aggregate_order_by(literal_column("','"), *order))
        return func.md5(versions.filter(*only) if only else versions)

    summary = func.json_build_array(
        newer.filter(found.c.seq > known),
        digest(found.c.seq <= known),
        digest(),
        func.max(found.c.seq),
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
    from sqlalchemy import JSON, bindparam, select, type_coerce

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
    from sa_core.store.messages import message_from_row

    entries, digest_known, digest_all, highest = summary
    histories = caches.read_histories
    if held is not None and digest_known != held.digest:
        histories.drop(thread_id)
        return None
    rows = caches.rows
    newer = [rows.message(without_seq(entry), message_from_row) for entry in entries or []]
    history = newer if held is None else merged(held.messages, newer)
    seq = -1 if highest is None else int(highest)
    histories.put(thread_id, ReadHistory(seq, digest_all, history))
    return history, newer


def without_seq(row: dict[str, Any]) -> dict[str, Any]:
    """The row (changed in place) without its ``seq`` column (and row version)."""
    row.pop("seq", None)
    row.pop(_VERSION, None)
    return row
