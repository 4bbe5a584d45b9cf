"""Forks, rewinds and lineage of a thread (``docs/time-travel.md``).

``POST threads/{id}/fork {"at"}`` answers 201 with the new thread; ``POST threads/{id}/rewind
{"to"}`` the rewind's record (409 ``thread_busy`` while a turn runs); ``GET threads/{id}/lineage``
the forks, rewinds and replays naming the thread. A cut that is not a quiescent message of the
history answers 422 ``invalid_cut``. (The files after a message: ``GET threads/{id}/files?at=``.)
"""

from __future__ import annotations

from typing import Any

from litestar import Controller, get, post
from litestar.params import JSONBody

from sa_core.server.context import PackDep, RuntimeDep, ThreadDep, thread_row
from sa_core.server.errors import errors
from sa_core.server.routes.threads import thread_out
from sa_core.server.schemas import Base, ThreadOut
from sa_core.spec.lineage import LineageEntry


class ForkIn(Base, kw_only=True):
    """``POST threads/{id}/fork``: the message to cut after (``null``: the latest)."""

    at: str | None = None


class RewindIn(Base, kw_only=True):
    """``POST threads/{id}/rewind``: the message to go back to."""

    to: str


class LineageEntryOut(Base, kw_only=True):
    """A fork, rewind or replay naming the thread."""

    id: str
    kind: str
    thread_id: str
    source_id: str | None = None
    message_id: str | None = None
    created_at: int
    data: dict[str, Any]


class LineageOut(Base, kw_only=True):
    """``GET threads/{id}/lineage``: oldest first."""

    entries: list[LineageEntryOut]


def lineage_out(entry: LineageEntry) -> LineageEntryOut:
    """Describe a lineage entry."""
    return LineageEntryOut(**entry.model_dump(mode="json"))


class ForksController(Controller):
    """Forks, rewinds and lineage of one package's threads."""

    path = "/threads/{thread_id:str}"

    @post("/fork", status_code=201, responses=errors(404, 422), summary="Fork a thread")
    async def fork(
        self, thread: ThreadDep, pack: PackDep, runtime: RuntimeDep, data: JSONBody[ForkIn]
    ) -> ThreadOut:
        """A new thread whose history is this one's up to message ``at`` (default: the latest).

        It has the files, values and subagent registry the thread had there; nothing of the
        history is copied, and writes on either side never show on the other.
        """
        fork = await thread.fork(at=data.at)
        return thread_out(runtime, pack, thread_row(fork))

    @post("/rewind", status_code=200, responses=errors(404, 409, 422), summary="Rewind a thread")
    async def rewind(self, thread: ThreadDep, data: JSONBody[RewindIn]) -> LineageEntryOut:
        """Roll the thread back to message ``to`` in place; answers the rewind's record.

        Later messages leave the history (``GET messages?include_rewound=true`` still lists
        them), files and values return to their state after ``to``, later children are stopped
        and hidden. 409 ``thread_busy`` while a turn runs.
        """
        return lineage_out(await thread.rewind(to=data.to))

    @get("/lineage", responses=errors(404), summary="Lineage of a thread")
    async def lineage(self, thread: ThreadDep) -> LineageOut:
        """The fork the thread is, the forks made from it, its rewinds and replays."""
        return LineageOut(entries=[lineage_out(entry) for entry in await thread.lineage()])
