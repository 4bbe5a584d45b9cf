"""Which stored messages make up a thread's history: its timeline.

A thread's history is usually all its own messages. A fork's history is its source's up to the
cut, then its own; a rewound thread's is its own up to the cut, then those written after the
rewind. Both are a :class:`Timeline`: segments, each the messages of one thread created within
a time range, in time order and never overlapping. Nothing is copied: a fork costs the same
whatever the length of the history it shares.

A thread whose history is all its own has no timeline (``threads.timeline`` is ``NULL``), and
every message query of it is the one it always was.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

START = -1
"""``after`` of a segment that starts with the thread's first message."""


@dataclass(frozen=True, slots=True)
class Segment:
    """The messages of ``thread_id`` created after ``after`` and up to ``upto`` (µs).

    ``upto`` ``None``: no end (the thread's own messages from ``after`` on, new ones included).
    """

    thread_id: str
    after: int = START
    upto: int | None = None

    def holds(self, thread_id: str, created_at: int) -> bool:
        """Whether a message of ``thread_id`` created at ``created_at`` is in the segment."""
        return (
            thread_id == self.thread_id
            and created_at > self.after
            and (self.upto is None or created_at <= self.upto)
        )

    def cut(self, at: int) -> Segment | None:
        """The part up to ``at`` (inclusive), or ``None`` when the segment starts later."""
        if self.after >= at:
            return None
        if self.upto is not None and self.upto <= at:
            return self
        return Segment(self.thread_id, self.after, at)

    def since(self, since: int) -> Segment | None:
        """The part created after ``since``, or ``None`` when nothing of it is."""
        if self.upto is not None and self.upto <= since:
            return None
        return self if self.after >= since else Segment(self.thread_id, since, self.upto)

    def to_json(self) -> list[Any]:
        """``[thread_id, after, upto]``."""
        return [self.thread_id, self.after, self.upto]


def _segments(items: Iterable[Any]) -> tuple[Segment, ...]:
    return tuple(
        Segment(str(item[0]), int(item[1]), None if item[2] is None else int(item[2]))
        for item in items
    )


@dataclass(frozen=True, slots=True)
class Timeline:
    """A thread's history as segments (see the module docstring).

    Attributes:
        segments: The history now, in time order; the last is the thread's own, open.
        seen: Every range the history ever showed (rewound messages included), merged.
    """

    segments: tuple[Segment, ...]
    seen: tuple[Segment, ...]

    @classmethod
    def own(cls, thread_id: str) -> Timeline:
        """The timeline of a thread whose history is all its own messages."""
        whole = (Segment(thread_id),)
        return cls(whole, whole)

    @classmethod
    def of(cls, thread_id: str, stored: Mapping[str, Any] | None) -> Timeline:
        """The timeline of a thread from its ``threads.timeline`` value."""
        if not stored:
            return cls.own(thread_id)
        segments = _segments(stored["segments"])
        return cls(segments, _segments(stored.get("seen") or stored["segments"]))

    def to_json(self) -> dict[str, Any]:
        """The ``threads.timeline`` value."""
        return {
            "segments": [segment.to_json() for segment in self.segments],
            "seen": [segment.to_json() for segment in self.seen],
        }

    @property
    def is_own(self) -> bool:
        """Whether the history is all the thread's own messages (no timeline to store)."""
        return (
            len(self.segments) == 1
            and self.segments[0].after == START
            and (self.segments[0].upto is None)
            and self.seen == self.segments
        )

    def holds(self, thread_id: str, created_at: int) -> bool:
        """Whether a message of ``thread_id`` created at ``created_at`` is in the history."""
        return any(segment.holds(thread_id, created_at) for segment in self.segments)

    def has_seen(self, thread_id: str, created_at: int) -> bool:
        """Whether the message was ever in the history (now, or before a rewind)."""
        return any(segment.holds(thread_id, created_at) for segment in self.seen)

    def covers(self, at: int) -> bool:
        """Whether the moment ``at`` (µs) lies in one of the history's ranges (of any thread).

        A registry entry created at ``at`` belongs to this history; one created in a range a
        rewind took back does not.
        """
        return any(
            segment.after < at and (segment.upto is None or at <= segment.upto)
            for segment in self.segments
        )

    def owner_at(self, at: int) -> str:
        """The thread whose files, values and registry at ``at`` are this history's then.

        The thread of the last segment that starts before ``at`` (a fork's own segment starts
        at its cut, so before it the source's state is the fork's).
        """
        for segment in reversed(self.segments):
            if segment.after < at:
                return segment.thread_id
        return self.segments[0].thread_id

    def up_to(self, at: int) -> tuple[Segment, ...]:
        """The segments of the history up to ``at`` (µs, inclusive)."""
        cut = (segment.cut(at) for segment in self.segments)
        return tuple(segment for segment in cut if segment is not None)

    def since(self, since: int | None) -> tuple[Segment, ...]:
        """The segments of the history created after ``since`` (all without one)."""
        if since is None:
            return self.segments
        parts = (segment.since(since) for segment in self.segments)
        return tuple(segment for segment in parts if segment is not None)

    def continued(self, at: int, thread_id: str, start: int) -> Timeline:
        """The history up to ``at``, then ``thread_id``'s messages created after ``start``.

        What it showed before stays seen (a rewind keeps the ranges it takes out).
        """
        segments = (*self.up_to(at), Segment(thread_id, start))
        return Timeline(segments, merged((*self.seen, *segments)))

    def forked(self, at: int, thread_id: str) -> Timeline:
        """A fork's: this history up to ``at``, then the fork's own messages (after ``at``)."""
        segments = (*self.up_to(at), Segment(thread_id, at))
        return Timeline(segments, merged(segments))


def merged(segments: Iterable[Segment]) -> tuple[Segment, ...]:
    """Overlapping or touching ranges of the same thread joined, by thread then time."""
    by_thread: dict[str, list[Segment]] = {}
    for segment in segments:
        by_thread.setdefault(segment.thread_id, []).append(segment)
    out: list[Segment] = []
    for thread_id, parts in by_thread.items():
        parts.sort(key=lambda part: part.after)
        current = parts[0]
        for part in parts[1:]:
            if current.upto is None or part.after <= current.upto:
                upto = (
                    None
                    if current.upto is None or part.upto is None
                    else max(current.upto, part.upto)
                )
                current = Segment(thread_id, current.after, upto)
            else:
                out.append(current)
                current = part
        out.append(current)
    return tuple(out)


class Missing:
    """:data:`MISSING`'s type."""


MISSING = Missing()
"""What :meth:`TimelineCache.get` returns for a thread it does not know."""
KEPT_TIMELINES = 4096
"""Threads whose timeline (or lack of one) a store remembers, at most."""
KEPT_PREFIX_MESSAGES = 50_000
"""Messages of forks' shared histories a PostgreSQL store keeps, at most (see
:meth:`TimelineCache.keep_prefix`)."""


class TimelineCache:
    """The timelines of recently used threads (``None``: the thread's history is its own).

    Trusted like the store's other caches: while no other connection has committed (SQLite's
    ``data_version``). A backend that cannot tell (PostgreSQL, ``None``) keeps what the last
    read of the thread's row found: every turn reads the row as it starts.
    """

    def __init__(self, size: int = KEPT_TIMELINES, prefixes: int = KEPT_PREFIX_MESSAGES) -> None:
        self._entries: OrderedDict[str, Timeline | None] = OrderedDict()
        self._size = size
        self.version: int | None = None
        self._prefixes: OrderedDict[tuple[Segment, ...], list[Any]] = OrderedDict()
        self._prefix_messages = 0
        self._max_prefix_messages = prefixes

    def prefix(self, segments: tuple[Segment, ...]) -> list[Any] | None:
        """The history of closed segments of other threads, kept (see :meth:`keep_prefix`)."""
        found = self._prefixes.get(segments)
        if found is not None:
            self._prefixes.move_to_end(segments)
        return found

    def shared_history(self, thread_id: str, stored: Mapping[str, Any]) -> list[Any] | None:
        """A fork's kept shared history (the messages before its own), else ``None``.

        ``None`` too for a timeline whose earlier segments hold the thread's own messages (a
        rewound thread): its history is read whole.
        """
        key = fork_prefix(Timeline.of(thread_id, stored), thread_id)
        return None if key is None else self.prefix(key)

    def keep_prefix(self, segments: tuple[Segment, ...], messages: list[Any]) -> None:
        """Keep the history of closed segments of other threads than the reader's.

        Such a history never changes: a fork's source cannot change what its forks share.
        Bounded by messages over every kept prefix (the least recently used go first).
        """
        if len(messages) > self._max_prefix_messages or segments in self._prefixes:
            return
        self._prefixes[segments] = messages
        self._prefix_messages += len(messages)
        while self._prefix_messages > self._max_prefix_messages:
            _, dropped = self._prefixes.popitem(last=False)
            self._prefix_messages -= len(dropped)

    def _check(self, version: int | None) -> None:
        if version is not None and version != self.version:
            self._entries.clear()
            self.version = version

    def get(self, thread_id: str, version: int | None) -> Timeline | None | Missing:
        """The thread's timeline, ``None`` (its own history) or :data:`MISSING`."""
        self._check(version)
        return self._entries.get(thread_id, MISSING)

    def put(self, thread_id: str, stored: Mapping[str, Any] | None, version: int | None) -> None:
        """Remember what the thread's row holds, read while the external version was ``version``."""
        if version != self.version and version is not None:
            return  # read before another connection committed: not trusted
        timeline = None if not stored else Timeline.of(thread_id, stored)
        self._entries[thread_id] = timeline
        self._entries.move_to_end(thread_id)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def created(self, thread_id: str, stored: Mapping[str, Any] | None) -> None:
        """A thread was just created with ``stored`` as its timeline (a fresh id: no race)."""
        self._entries[thread_id] = None if not stored else Timeline.of(thread_id, stored)
        self._entries.move_to_end(thread_id)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def drop(self, thread_id: str) -> None:
        """Forget a thread's timeline (it changes)."""
        self._entries.pop(thread_id, None)


def fork_prefix(timeline: Timeline, thread_id: str) -> tuple[Segment, ...] | None:
    """The segments a fork shares (before its own, open one), or ``None`` for another timeline.

    ``None`` when the last segment is not the thread's own and open, or when an earlier one
    holds the thread's own messages (a rewound thread).
    """
    *shared, own = timeline.segments
    if own.thread_id != thread_id or own.upto is not None:
        return None
    if any(segment.thread_id == thread_id for segment in shared):
        return None
    return tuple(shared)


def intersection(first: Iterable[Segment], second: Iterable[Segment]) -> tuple[Segment, ...]:
    """The ranges of the same thread both hold (what two histories share)."""
    out = []
    others = list(second)
    for a in first:
        for b in others:
            if a.thread_id != b.thread_id:
                continue
            after = max(a.after, b.after)
            ends = [end for end in (a.upto, b.upto) if end is not None]
            upto = min(ends) if ends else None
            if upto is None or after < upto:
                out.append(Segment(a.thread_id, after, upto))
    return tuple(out)
