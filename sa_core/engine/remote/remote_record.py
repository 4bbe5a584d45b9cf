"""The durable record of a remote child's A2A conversation (thread value ``sa:a2a``).

One JSON value per remote child thread:

* ``context_id``: the remote conversation (A2A ``contextId``) this child keeps: a resumable
  instance sends every exchange into it;
* ``task_id`` and ``state``: the remote task of the exchange in flight (``sending`` until the
  remote acknowledged it), or the task waiting for our next message (``input-required``,
  ``auth-required``); cleared when a task ends;
* ``message_ids``: the child's messages that exchange sent (the A2A ``messageId`` is the first
  one's id, so a remote that deduplicates sees a resend as the same message);
* ``started_at``: when the exchange began (µs), so a restart keeps its ``timeout``;
* ``push_hash``: the SHA-256 of the exchange's push-notification token, when one was made
  (:mod:`sa_core.engine.remote.remote_push`).

It is written before the message is sent (``sending``) and again as soon as the remote names
its task, each in a commit of its own: after a crash the restarted runtime follows that task
(resubscribes or polls) instead of sending again. The one window left is a crash between the
send and the remote's first answer: the message is then sent again, with the same
``messageId``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sa_core.engine.remote.remote_task import WAITING

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel

KEY = "sa:a2a"
"""The thread value holding the record."""
SENDING = "sending"
FOLLOWED = frozenset({"submitted", "working", "unknown"})
"""States of a task the remote acknowledged and has not finished: a restart follows it."""


@dataclass(frozen=True, slots=True)
class Record:
    """See the module docstring."""

    context_id: str | None = None
    task_id: str | None = None
    state: str = "idle"
    message_ids: tuple[str, ...] = ()
    started_at: int = 0
    push_hash: str | None = None

    @classmethod
    def from_json(cls, value: Any) -> Record:
        """Read a stored record (``None``: a child that never exchanged anything)."""
        if not isinstance(value, dict):
            return cls()
        return cls(
            context_id=value.get("context_id") or None,
            task_id=value.get("task_id") or None,
            state=str(value.get("state") or "idle"),
            message_ids=tuple(value.get("message_ids") or ()),
            started_at=int(value.get("started_at") or 0),
            push_hash=value.get("push_hash") or None,
        )

    def to_json(self) -> dict[str, Any]:
        """The stored form."""
        return {
            "context_id": self.context_id,
            "task_id": self.task_id,
            "state": self.state,
            "message_ids": list(self.message_ids),
            "started_at": self.started_at,
            "push_hash": self.push_hash,
        }

    def follows(self, message_ids: list[str]) -> bool:
        """Whether these messages went out in a task the remote is still working on."""
        return (
            self.task_id is not None
            and self.state in FOLLOWED
            and list(self.message_ids) == message_ids
        )

    def resends(self, message_ids: list[str]) -> bool:
        """Whether these messages were being sent when a restart came (same exchange)."""
        return self.state == SENDING and list(self.message_ids) == message_ids

    @property
    def waiting_task(self) -> str | None:
        """The task waiting for our next message (``input-required``/``auth-required``)."""
        return self.task_id if self.state in WAITING else None

    def replace(self, **changes: Any) -> Record:
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)


async def load(kernel: Kernel, thread_id: str) -> Record:
    """The child's record (empty when it has none)."""
    return Record.from_json(await kernel.store.get_value(thread_id, KEY))


async def save(kernel: Kernel, thread_id: str, record: Record) -> None:
    """Write the record (inside an open transaction it joins it)."""
    await kernel.store.set_value(thread_id, KEY, record.to_json())


__all__ = ["FOLLOWED", "KEY", "SENDING", "Record", "load", "save"]
