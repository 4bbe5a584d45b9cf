"""What the in-process caches of messages share: their size, and which threads they take in.

The store's histories, the engine's conversions and filtered histories, and the test
providers' usage estimates each keep messages of recently used threads, up to one size set by
an environment variable. The store's caches and the test providers' take a thread in at their
bounds by the turn counts kept here; the engine's keep a thread while the store keeps its
history, so that both hold the same threads and share their messages. Kept apart from
:mod:`sa_core.store` so that the test kit can use it without loading the store.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

CACHED_MESSAGES_VARIABLE = "STANDARD_AGENTS_CACHED_MESSAGES"
"""The environment variable that sizes every in-process cache of messages (default 50,000)."""


def cached_messages(default: int = 50_000) -> int:
    """How many messages each in-process cache of messages keeps at most.

    The store's histories, the engine's conversions and its filtered histories, and the test
    providers' usage estimates each keep up to this many (read once, at import). A cached
    message costs about 3 KB over all of them (they share its objects); when more messages
    than this are in active threads at once, part of the threads reload and convert whole
    histories at every turn (see ``docs/serving.md``).

    Raises:
        ValueError: ``STANDARD_AGENTS_CACHED_MESSAGES`` is set to something other than a
            positive whole number.
    """
    raw = os.environ.get(CACHED_MESSAGES_VARIABLE, "").strip().replace("_", "")
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(
            f"{CACHED_MESSAGES_VARIABLE} must be a positive whole number of messages "
            f"(default {default}), got {os.environ[CACHED_MESSAGES_VARIABLE]!r}"
        )
    return int(raw)


USE_SAMPLE = 4096
"""Turns counted between two halvings of every count; a thread without a turn for as many no
longer keeps other threads out of a full cache (see :class:`ThreadUse`)."""


class ThreadUse:
    """How many turns each thread had lately: whether a full cache takes a thread in.

    A cache of whole histories evicts its least recently used thread to make room. Alone,
    that fails the workload a busy server has: many threads, each used in turn, that together
    outgrow the cache. Each thread is then evicted just before its next use, and every turn
    reloads and converts its whole history.

    So, as in TinyLFU, a full cache takes a thread that had turns lately in only when it had
    more of them than the one it would evict. Threads used in turn are used equally often: the
    threads held stay held and hit, the others miss, as they would anyway. A new conversation
    (no turn counted yet) is always taken in, since its next turns usually follow soon. A
    thread that becomes busy overtakes idle ones within a few turns, because every count is
    halved after :data:`USE_SAMPLE` turns (which also bounds the counts kept), and a thread
    without a turn for as many is evicted whatever its count. Turns are counted when they end
    (by the engine), so a turn's caches decide on it with the counts from before it.
    """

    def __init__(self, sample: int = USE_SAMPLE) -> None:
        self._counts: dict[str, int] = {}
        self._last: dict[str, int] = {}
        """The turn (of all threads) each counted thread last had."""
        self._sample = sample
        self._turns = 0
        """Turns counted since the start."""
        self._halved = 0
        """:attr:`_turns` at the last halving."""

    def used(self, thread_id: str) -> None:
        """Count a turn of the thread (once the turn is over: its caches decided without it)."""
        counts = self._counts
        counts[thread_id] = counts.get(thread_id, 0) + 1
        self._turns += 1
        self._last[thread_id] = self._turns
        if self._turns - self._halved >= self._sample:
            self._halved = self._turns
            self._counts = {key: count // 2 for key, count in counts.items() if count > 1}
            last = self._last
            self._last = {key: last[key] for key in self._counts}

    def __len__(self) -> int:
        return len(self._counts)

    def turns(self, thread_id: str) -> int:
        """The thread's turns counted lately (halved with every count)."""
        return self._counts.get(thread_id, 0)

    def admits(self, candidate: str, victim: str | None) -> bool:
        """Whether a full cache should evict ``victim`` to keep ``candidate``.

        Yes when the candidate had no turn counted lately (a new conversation: its next turns
        usually follow soon), when the victim had none, when the victim had none for
        :data:`USE_SAMPLE` turns (a thread busy long ago does not keep others out), or when
        the candidate had more turns lately. No otherwise: a tie keeps the thread held.
        """
        counts = self._counts
        if candidate not in counts or victim is None or victim not in counts:
            return True
        if self._turns - self._last[victim] >= self._sample:
            return True
        return counts[candidate] > counts[victim]

    def takes(self, candidate: str, held: Mapping[Any, object], *, full: bool) -> bool:
        """Whether a cache holding ``held`` (least recently used first) takes ``candidate`` in.

        Always while it is not ``full``; at its bounds, as :meth:`admits` says against its
        least recently used entry.
        """
        return not full or not held or self.admits(candidate, next(iter(held)))

    def clear(self) -> None:
        """Forget every count."""
        self._counts.clear()
        self._last.clear()
        self._turns = self._halved = 0


THREAD_USE = ThreadUse()
"""The process's turn counts (counted by the engine, asked by the caches at their bounds)."""


K = TypeVar("K")
V = TypeVar("V")


class BoundedLRU(Generic[K, V]):
    """Entries least recently used first, bounded by their number and their total weight.

    The one LRU of the in-process message caches (the store's histories, the engine's
    converted and filtered histories). An entry weighs what :attr:`weigh` says (the messages
    it holds); its owner reports growth with :meth:`grew`. Past a bound the least recently used
    go (:meth:`trim`), always but the ``keep`` most recent.
    """

    __slots__ = ("dropped", "entries", "max_entries", "max_weight", "weigh", "weight")

    def __init__(
        self,
        max_entries: int,
        max_weight: int,
        weigh: Callable[[V], int],
        dropped: Callable[[V], None] | None = None,
    ) -> None:
        self.entries: OrderedDict[K, V] = OrderedDict()
        """The entries, least recently used first (read it; change it through the methods)."""
        self.weight = 0
        """The weight of every entry together."""
        self.max_entries = max_entries
        self.max_weight = max_weight
        self.weigh = weigh
        self.dropped = dropped
        """Called with each entry evicted, popped or cleared."""

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, key: K) -> bool:
        return key in self.entries

    def get(self, key: K) -> V | None:
        """The entry, now the most recently used; ``None`` when not kept."""
        value = self.entries.get(key)
        if value is not None:
            self.entries.move_to_end(key)
        return value

    def put(self, key: K, value: V, weight: int, keep: int = 0) -> None:
        """Keep ``value`` (weighing ``weight``) as the most recently used entry, then the bounds.

        It replaces the key's old entry; see :meth:`trim` for ``keep``.
        """
        entries = self.entries
        if key in entries:
            self.pop(key)
        entries[key] = value
        self.weight += weight
        if self.weight > self.max_weight or len(entries) > self.max_entries:
            self.trim(keep)

    def pop(self, key: K) -> V | None:
        """Forget one entry; returns it, else ``None``."""
        value = self.entries.pop(key, None)
        if value is not None:
            self._gone(value)
        return value

    def clear(self) -> None:
        """Forget every entry."""
        values = list(self.entries.values())
        self.entries.clear()
        for value in values:
            self._gone(value)
        self.weight = 0

    def grew(self, delta: int, keep: int = 0) -> None:
        """An entry's weight changed by ``delta``: apply the bounds (see :meth:`trim`)."""
        self.weight += delta
        if self.weight > self.max_weight:
            self.trim(keep)

    def trim(self, keep: int = 0) -> None:
        """Drop the least recently used while a bound is passed (never the ``keep`` newest)."""
        entries = self.entries
        while len(entries) > keep and (
            len(entries) > self.max_entries or self.weight > self.max_weight
        ):
            self._gone(entries.popitem(last=False)[1])

    def _gone(self, value: V) -> None:
        self.weight -= self.weigh(value)
        if self.dropped is not None:
            self.dropped(value)
