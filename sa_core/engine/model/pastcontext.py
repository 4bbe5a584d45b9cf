"""The stored history a top-level flow starts from, filtered incrementally per thread.

Every flow of a thread whose prompt includes the chat starts from the thread's history without
the rows that never reached a model and, unless the prompt includes past tools, without earlier
turns' tool traffic. Both filters look at one message at a time, so when a turn's history is the
previous turn's plus new rows (the usual case: the store's history cache shares its messages),
only the new rows are filtered. The stripped copies of assistant messages are made once, which
also lets the conversion cache recognise them by identity on the next turn.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sa_core.cachepolicy import cached_messages

if TYPE_CHECKING:
    from sa_core.spec import Message

UNSENT = ("pending", "failed")
"""Statuses of assistant rows that never got a model answer; they stay out of contexts."""

KEPT_THREADS = 256
"""Threads whose filtered history is kept at most (least recently used go first)."""
KEPT_MESSAGES = cached_messages()
"""History messages the kept threads hold at most, all together (least recently used go
first; the thread being filtered always stays; ``STANDARD_AGENTS_CACHED_MESSAGES``). Without
it, threads that keep growing held every message they ever had, past the bounds of the
store's history cache."""


@dataclass(slots=True)
class _Filtered:
    source: list[Message] = field(default_factory=list)
    sent: list[Message] = field(default_factory=list)
    stripped: list[Message] = field(default_factory=list)


class _Kept:
    """The threads' filtered histories, least recently used first, with their total size."""

    def __init__(self) -> None:
        self.threads: OrderedDict[str, _Filtered] = OrderedDict()
        self.messages = 0
        """``len(source)`` summed over the kept threads."""

    def get(self, thread_id: str) -> _Filtered:
        kept = self.threads.get(thread_id)
        if kept is None:
            kept = self.threads[thread_id] = _Filtered()
        else:
            self.threads.move_to_end(thread_id)
        return kept

    def resized(self, kept: _Filtered, before: int) -> None:
        """``kept`` (the most recent thread) now holds ``len(kept.source)`` messages."""
        self.messages += len(kept.source) - before
        threads = self.threads
        while len(threads) > 1 and (len(threads) > KEPT_THREADS or self.messages > KEPT_MESSAGES):
            _, dropped = threads.popitem(last=False)
            self.messages -= len(dropped.source)

    def forget(self, thread_id: str | None) -> None:
        if thread_id is None:
            self.threads.clear()
            self.messages = 0
            return
        dropped = self.threads.pop(thread_id, None)
        if dropped is not None:
            self.messages -= len(dropped.source)


_kept = _Kept()


def strip_past_tools(message: Message) -> Message | None:
    """One message without earlier turns' tool traffic: ``None`` to drop it."""
    if message.role == "tool":
        return None
    if message.tool_calls:
        if (message.content or "").strip():
            return message.model_copy(update={"tool_calls": None})
        return None
    return message


def filtered_history(
    thread_id: str, history: list[Message], *, keep: bool = True
) -> tuple[list[Message], list[Message]]:
    """The history's messages that reached a model, and the same without past tool traffic.

    Reuses the previous call's result for the thread when ``history`` starts with the previous
    history (the same or equal messages). The lists returned are shared: do not change them.
    With ``keep=False`` (the store does not keep the thread's history, see
    :func:`~sa_core.engine.model.context.converter_for`) the thread's kept result is forgotten and
    the history filtered on its own.
    """
    if not keep:
        _kept.forget(thread_id)
        return _filtered(history, [], [])
    kept = _kept.get(thread_id)
    before = known = len(kept.source)
    if known > len(history) or history[:known] != kept.source:
        kept.source, kept.sent, kept.stripped, known = [], [], [], 0
    _filtered(history[known:], kept.sent, kept.stripped)
    kept.source = list(history)
    _kept.resized(kept, before)
    return kept.sent, kept.stripped


def _filtered(
    messages: list[Message], sent: list[Message], stripped: list[Message]
) -> tuple[list[Message], list[Message]]:
    """Append ``messages``' sent ones to ``sent``, and without past tool traffic to ``stripped``."""
    for message in messages:
        if message.status in UNSENT:
            continue
        sent.append(message)
        without = strip_past_tools(message)
        if without is not None:
            stripped.append(without)
    return sent, stripped


def excluding(messages: list[Message], ids: set[str], since: int | None) -> list[Message]:
    """A copy of ``messages`` without the given ids, which are all created at ``since`` or later.

    ``messages`` is ordered by creation time, so only its tail from ``since`` on is searched.
    """
    if not ids:
        return list(messages)
    cut = len(messages)
    if since is None:
        cut = 0
    else:
        while cut and messages[cut - 1].created_at >= since:
            cut -= 1
    return messages[:cut] + [m for m in messages[cut:] if m.id not in ids]


def forget_filtered(thread_id: str | None = None) -> None:
    """Drop a thread's kept filtered history (every thread's without an id)."""
    _kept.forget(thread_id)


def without_past_tools(messages: list[Message]) -> list[Message]:
    """Drop the tool traffic of earlier turns (calls are stripped, results removed)."""
    return [m for m in map(strip_past_tools, messages) if m is not None]
