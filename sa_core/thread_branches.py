"""Time travel on a thread: ``fork``, ``rewind``, ``lineage`` and ``files_at``.

A part of :class:`~sa_core.state.ThreadState`, kept in its own module: each method is one
call to :mod:`sa_core.engine.timeline.fork`, :mod:`sa_core.engine.timeline.rewind` or the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sa_core.engine.timeline import fork as forks
from sa_core.engine.timeline import rewind as rewinds
from sa_core.errors import FileSystemError
from sa_core.spec import FileRecord
from sa_core.spec.lineage import LineageEntry

if TYPE_CHECKING:
    from sa_core.engine.kernel import Kernel
    from sa_core.engine.threads import ThreadRef
    from sa_core.state import ThreadState


class ThreadBranches:
    """Forks, rewinds and the files of a thread as they were after a message."""

    __slots__ = ()
    _kernel: Kernel
    _ref: ThreadRef

    async def fork(self, at: str | None = None) -> ThreadState:
        """A new thread of the same agent whose history is this one's up to message ``at``.

        ``None``: up to the latest message. The fork has the files, values and subagent
        registry this thread had after that message (its children forked too: those that
        had settled keep their status, those running or resumable then are ``interrupted``
        and can be resumed in the fork). Nothing of the history is copied, and later writes
        on either side never show on the other.

        Raises:
            CutPointError: ``at`` is no message of the history, or not a quiescent point
                (after a user message, an answer without tool calls, or a tool round's last
                result).
        """
        ref = await forks.fork(self._kernel, self._ref, at)
        state: ThreadState = self._kernel.user_state(ref)
        return state

    async def rewind(self, to: str) -> LineageEntry:
        """Roll this thread back to message ``to``, in place; returns the rewind's record.

        Later messages leave the history the model sees (``get_messages(include_rewound=True)``
        still lists them); files and values return to their state after ``to``; children
        created after it are stopped and hidden; queue entries and pending effects from after
        it are cancelled. Rewinding to a later message of a rewound range undoes the rewind.

        Raises:
            ThreadBusyError: A turn runs on the thread.
            CutPointError: ``to`` is no quiescent message of the history.
        """
        return await rewinds.rewind(self._kernel, self._ref, to)

    async def lineage(self) -> list[LineageEntry]:
        """The forks made from this thread, the fork it is, its rewinds and replays, by time."""
        return await self._kernel.store.list_lineage(self._ref.thread_id)

    async def files_at(self, message_id: str) -> list[FileRecord]:
        """The files and directories as they were after a message of the history, by path.

        Raises:
            FileSystemError: The history has no such message.
        """
        owner, at = await self._moment(message_id)
        return await self._kernel.store.files_at(owner, at)

    async def _moment(self, message_id: str) -> tuple[str, int]:
        """The thread whose state after ``message_id`` is this history's, and when."""
        message = await self._kernel.store.get_message(self._ref.thread_id, message_id)
        if message is None:
            raise FileSystemError(
                f"Thread {self._ref.thread_id} has no message {message_id} in its history; "
                "pass the id of one of its messages (get_messages)."
            )
        return message.thread_id or self._ref.thread_id, message.created_at
