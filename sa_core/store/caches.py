"""Bounded in-process read caches of the store: histories, verified API keys, empty queues.

All are pure read caches: every write still goes to the database first, and nothing here is
ever the only copy of anything. An entry is trusted only while

- this store made no write that touches it (writes mark entries dirty or drop them), and
- no other connection committed to the database (the backend's :meth:`external_version`, which
  is SQLite's ``PRAGMA data_version`` on the writer connection); a backend that cannot tell
  (``None``) disables them;
- and it is filled only while no write transaction is open on the store, so an uncommitted
  transaction's view never gets in (reads outside a transaction see committed rows only).
  The empty queues are the exception: they are read inside a write transaction (no other
  write of the store can run) and remembered only once it commits (see :class:`EmptyQueues`).

A thread's history is refreshed incrementally: a write to a thread's messages records the
oldest ``created_at`` it touched, and the next read keeps the cached messages created before it
and loads only the rows from there on.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from sa_core.cachepolicy import THREAD_USE, BoundedLRU, cached_messages
from sa_core.store.timeline import TimelineCache

if TYPE_CHECKING:
    from sa_core.spec.records import Message
    from sa_core.store.rows import ApiKeyRow

HISTORY_THREADS = 512
"""Threads whose history is kept at most."""
HISTORY_MESSAGES = cached_messages()
"""Messages kept at most over every cached history (least recently used threads go first)."""
API_KEYS = 64
"""Verified API keys kept at most."""
ROW_MESSAGES = HISTORY_MESSAGES
"""Messages kept at most with the rows they were built from (see :class:`RowMessages`)."""
EMPTY_QUEUES = 4096
"""Threads whose queue is remembered as empty, at most."""

V = TypeVar("V")


class _HasMessages(Protocol):
    @property
    def messages(self) -> list[Message]: ...


H = TypeVar("H", bound=_HasMessages)

EVERYTHING = -1
"""``dirty_from`` of an entry that must be reloaded whole."""


@dataclass(slots=True)
class _History:
    messages: list[Message]
    dirty_from: int | None = None
    """``None``: current; else reload rows created at or after this time (µs)."""
    writes: int = 0
    """Writes that touched the entry (a committed insert applies its rows only if it was the
    one write since the entry was current)."""


WriteToken = tuple[_History, int]
"""An entry and its write count, taken before an insert (see :meth:`HistoryCache.appended`)."""


def _message_count(entry: _HasMessages) -> int:
    return len(entry.messages)


class _KeptHistories(Generic[H]):
    """Histories of threads, least recently used first, bounded by threads and by messages.

    What both backends' history caches share: a thread already kept is replaced; one not kept
    yet is taken in at the bounds as :class:`~sa_core.cachepolicy.ThreadUse` says; a history
    longer than the whole bound is not kept; beyond the bounds the least recently used go.
    """

    def __init__(self, threads: int = HISTORY_THREADS, messages: int = HISTORY_MESSAGES) -> None:
        self._kept: BoundedLRU[str, H] = BoundedLRU(threads, messages, _message_count)
        self._entries = self._kept.entries

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size(self) -> int:
        """Messages held over every entry."""
        return self._kept.weight

    def holds(self, thread_id: str) -> bool:
        """Whether the thread's history is kept (current or not)."""
        return thread_id in self._entries

    def drop(self, thread_id: str) -> None:
        """Forget a thread's history."""
        self._kept.pop(thread_id)

    def _keep(self, thread_id: str, entry: H) -> None:
        """Keep ``entry`` as the thread's history, the most recently used."""
        count = len(entry.messages)
        kept = self._kept
        if thread_id in kept.entries:
            kept.pop(thread_id)
        elif not THREAD_USE.takes(
            thread_id,
            kept.entries,
            full=len(kept.entries) >= kept.max_entries or kept.weight + count > kept.max_weight,
        ):
            return
        if count > kept.max_weight:
            return
        kept.put(thread_id, entry, count)


class HistoryCache(_KeptHistories[_History]):
    """Histories of recently used threads (see the module docstring for when they are used)."""

    def __init__(self, threads: int = HISTORY_THREADS, messages: int = HISTORY_MESSAGES) -> None:
        super().__init__(threads, messages)
        self.version: int | None = None

    def check(self, version: int | None) -> bool:
        """Drop everything when the database changed elsewhere; whether the cache is usable."""
        if version is None:
            self.clear()
            return False
        if version != self.version:
            self.clear()
            self.version = version
        return True

    def clear(self) -> None:
        """Forget every history."""
        self._kept.clear()

    def lookup(self, thread_id: str) -> tuple[list[Message], int | None] | None:
        """The cached messages and the time to reload from (``None``: current), or ``None``."""
        entry = self._entries.get(thread_id)
        if entry is None:
            return None
        self._entries.move_to_end(thread_id)
        if entry.dirty_from == EVERYTHING:
            return None
        return entry.messages, entry.dirty_from

    def store(self, thread_id: str, messages: list[Message]) -> None:
        """Keep a thread's current history (evicting the least recently used beyond the bounds)."""
        self._keep(thread_id, _History(messages))

    def touched(self, thread_id: str, created_at: int | None) -> None:
        """A write changed the thread's messages from ``created_at`` on (``None``: any of them)."""
        entry = self._entries.get(thread_id)
        if entry is None:
            return
        entry.writes += 1
        if created_at is None or created_at <= 0:
            entry.dirty_from = EVERYTHING
        elif entry.dirty_from is None or (
            entry.dirty_from != EVERYTHING and created_at < entry.dirty_from
        ):
            entry.dirty_from = created_at

    def before_insert(self, thread_id: str) -> WriteToken | None:
        """Call before an insert touches the thread: a token if its entry is current."""
        entry = self._entries.get(thread_id)
        if entry is None or entry.dirty_from is not None:
            return None
        return entry, entry.writes

    def appended(self, thread_id: str, token: WriteToken, messages: list[Message]) -> None:
        """An insert committed ``messages`` (its history rows, in stored order): keep them.

        Applied only when the insert was the one write since the entry was current and its
        rows sort after every cached one; otherwise the entry stays dirty and is reloaded.
        The caller passes messages built from the rows it wrote (equal to a reload).
        """
        entry, writes = token
        if self._entries.get(thread_id) is not entry or entry.writes != writes + 1:
            return
        kept = entry.messages
        if messages and kept and messages[0].created_at < kept[-1].created_at:
            return
        kept.extend(messages)
        entry.dirty_from = None
        self._kept.grew(len(messages))  # evicts beyond the bounds

    def forget(self, thread_ids: list[str]) -> None:
        """Drop the histories of deleted threads."""
        for thread_id in thread_ids:
            self.drop(thread_id)


class _Versioned(Generic[V]):
    """Bounded LRU entries trusted while no other connection committed (``version``)."""

    def __init__(self, size: int) -> None:
        self._entries: OrderedDict[str, V] = OrderedDict()
        self._max = size
        self.version: int | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def check(self, version: int | None) -> bool:
        """Drop everything when the database changed elsewhere; whether the cache is usable."""
        if version is None or version != self.version:
            self._entries.clear()
            self.version = version
        return version is not None

    def _keep(self, key: str, value: V) -> None:
        """Keep an entry as the most recently used (the least recently used go beyond the bound)."""
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)


class KeyCache(_Versioned["ApiKeyRow"]):
    """Recently verified API keys by token digest; revoked or changed keys are never served."""

    def __init__(self, size: int = API_KEYS) -> None:
        super().__init__(size)

    def get(self, digest: str) -> ApiKeyRow | None:
        """The key verified with this digest, or ``None``."""
        found = self._entries.get(digest)
        if found is not None:
            self._entries.move_to_end(digest)
        return found

    def put(self, digest: str, row: ApiKeyRow) -> None:
        """Remember a verified key."""
        self._keep(digest, row)

    def clear(self) -> None:
        """Forget every key (after a revocation)."""
        self._entries.clear()


class EmptyQueues(_Versioned[None]):
    """Threads whose queue is known to be empty, so that reading it again can be skipped.

    A thread goes in when it is created, and when a write transaction that read its queue
    empty commits with no entry queued by this store since the read; it leaves when this store
    queues an entry for it. Trusted only while no other connection committed (see the module
    docstring). Bounded LRU.
    """

    def __init__(self, size: int = EMPTY_QUEUES) -> None:
        super().__init__(size)
        self.queued = 0
        """Entries this store queued so far (a read's finding holds only while it is unchanged)."""

    def known(self, thread_id: str) -> bool:
        """Whether the thread's queue is known to be empty."""
        return thread_id in self._entries

    def add(self, thread_id: str, queued: int | None = None) -> None:
        """Remember that the thread's queue is empty.

        Args:
            thread_id: The thread.
            queued: :attr:`queued` when the queue was read: nothing is remembered if an entry
                was queued since.
        """
        if queued is None or queued == self.queued:
            self._keep(thread_id, None)

    def entry_queued(self, thread_id: str) -> None:
        """Forget the thread's queue as empty: the store queued an entry (once the write ran)."""
        self.queued += 1
        self._entries.pop(thread_id, None)


class StoreCaches:
    """The caches of one store."""

    __slots__ = ("history", "keys", "rows", "read_histories", "empty_queues", "timelines")

    def __init__(self) -> None:
        self.timelines = TimelineCache()
        self.history = HistoryCache()
        self.keys = KeyCache()
        self.rows = RowMessages()
        self.read_histories = ReadHistories()
        self.empty_queues = EmptyQueues()


class RowMessages:
    """Messages built from ``messages`` rows, each kept with the row it was built from.

    For a backend whose histories cannot be cached (PostgreSQL: another worker may have
    written), every history is read whole. A row equal to the one a kept message was built
    from gives that same message back: no validation, and the engine's caches keyed by message
    identity (past-context filtering, context conversion) keep working across reads. Nothing
    is trusted without the read: a row that differs in any column builds a new message.
    """

    def __init__(self, size: int = ROW_MESSAGES) -> None:
        self._kept: OrderedDict[str, tuple[dict[str, Any], Message]] = OrderedDict()
        self._size = size

    def message(self, row: dict[str, Any], build: Callable[[dict[str, Any]], Message]) -> Message:
        """The message of ``row`` (not changed), built by ``build`` (given a copy) when new."""
        key = row["id"]
        kept = self._kept.get(key)
        if kept is not None and kept[0] == row:
            return kept[1]
        message = build(dict(row))
        self._kept[key] = (row, message)
        self._kept.move_to_end(key)
        if len(self._kept) > self._size:
            self._kept.popitem(last=False)
        return message


@dataclass(slots=True)
class ReadHistory:
    """A thread's history as a read found it (see :class:`ReadHistories`)."""

    seq: int
    """The highest ``seq`` among its rows (-1: none)."""
    digest: tuple[int, int]
    """The database's digest of its rows: how many, and the sum of their hashes of ``seq``
    and row version (:func:`sa_core.store.pghistory.history_since_known`)."""
    messages: list[Message]


class ReadHistories(_KeptHistories[ReadHistory]):
    """The history each thread's last read found, with the database's digest of it.

    For a backend that cannot tell whether another process wrote (PostgreSQL). The next read
    asks only for rows newer than :attr:`ReadHistory.seq`, with the digest of the rows at or
    below it: when that equals the kept digest, none of them changed (no edit, status change
    or deletion), and the history is the kept one plus the new rows. When it differs, the
    entry is dropped and the history read whole.
    """

    def get(self, thread_id: str) -> ReadHistory | None:
        """The thread's kept history, if any."""
        return self._entries.get(thread_id)

    def put(self, thread_id: str, history: ReadHistory) -> None:
        """Keep a thread's history (the most recently used go last).

        A thread not kept yet is taken in at the bounds as :class:`~sa_core.cachepolicy.ThreadUse`
        says.
        """
        self._keep(thread_id, history)
