"""Recorded model calls: the ``model_calls`` rows a replay serves answers from.

The engine builds a :class:`RecordedCall` for each model answer it uses and *stages* it under
the id of the call's ``llm_call`` log (:meth:`ModelCallsMixin.stage_model_call`). Whoever then
stores that log (the step's commit, a compaction's marker, a rejected structured answer) stores
the call with it, in the same transaction and the same batch of writes
(:meth:`~sa_core.store.messages.MessagesMixin.insert_log` calls :func:`staged_write`): no
transaction of its own, and a step that rolls back leaves neither.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import bindparam, insert, select
from sqlalchemy.engine import Connection

from sa_core.store import tables as t
from sa_core.store.fast import Deferred, Prepared
from sa_core.store.interface import Backend, Transaction
from sa_core.store.storebase import StoreBase

_MC = t.model_calls.c
_COLUMNS = [c for c in t.model_calls.c if c.name != "seq"]
_INSERT = Prepared(
    insert(t.model_calls).values({c.name: bindparam(f"p_{c.name}") for c in _COLUMNS})
)
_LIST = Prepared(
    select(*_COLUMNS).where(_MC.thread_id == bindparam("b_tid")).order_by(_MC.seq), _COLUMNS
)
MAX_STAGED = 4096
"""Staged calls kept at most: a call whose log is never stored (its step was cancelled between
the answer and the commit) is dropped, oldest first, instead of being held forever."""


@dataclass(slots=True)
class RecordedCall:
    """One recorded model call (a row of ``model_calls``).

    Attributes:
        thread_id: The thread the call was made for.
        log_id: Its ``llm_call`` log row.
        message_id: The message the answer became (a compaction's marker for a summary).
        request_hash: The canonical request's hash (:func:`sa_core.engine.recording.digest`).
        request: The hashes of the request's parts, and their text where it changed.
        response: The provider's answer (:func:`sa_core.engine.recording.response_document`).
        created_at: When the answer arrived, microseconds since the epoch.
    """

    thread_id: str
    log_id: str
    message_id: str | None
    request_hash: str
    request: dict[str, Any]
    response: dict[str, Any]
    created_at: int

    def to_json(self) -> dict[str, Any]:
        """The call as a JSON object (the export format's ``model_calls`` items)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any], thread_id: str | None = None) -> RecordedCall:
        """A call from :meth:`to_json`'s object (``thread_id`` replaces the recorded one)."""
        return cls(
            thread_id=thread_id or data["thread_id"],
            log_id=data["log_id"],
            message_id=data.get("message_id"),
            request_hash=data["request_hash"],
            request=dict(data.get("request") or {}),
            response=dict(data.get("response") or {}),
            created_at=int(data.get("created_at") or 0),
        )


def _params(call: RecordedCall) -> dict[str, Any]:
    return {f"p_{key}": value for key, value in asdict(call).items()}


def staged_write(store: ModelCallsMixin, log_id: str) -> Deferred | None:
    """The insert of the call staged under ``log_id``, taken off the stage; ``None`` if none."""
    staged = store.staged_calls
    if not staged:
        return None
    call = staged.pop(log_id, None)
    return None if call is None else Deferred(_INSERT, _params(call))


class ModelCallsMixin(StoreBase):
    """The recorded model calls of threads."""

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self.staged_calls: dict[str, RecordedCall] = {}
        """Calls waiting for their log to be stored, by log id (see the module docstring)."""

    def stage_model_call(self, call: RecordedCall) -> None:
        """Hold ``call`` until its ``llm_call`` log (``call.log_id``) is stored, then store both."""
        staged = self.staged_calls
        staged[call.log_id] = call
        if len(staged) > MAX_STAGED:
            del staged[next(iter(staged))]

    async def list_model_calls(
        self, thread_id: str, *, tx: Transaction | None = None
    ) -> list[RecordedCall]:
        """A thread's recorded calls in the order they were made (the first is ordinal 1)."""
        params = {"b_tid": thread_id}

        def op(conn: Connection) -> list[RecordedCall]:
            return [RecordedCall(**row) for row in _LIST.rows(conn, params)]

        return await self._read_one(op, tx)

    async def insert_model_calls(
        self, calls: Iterable[RecordedCall], *, tx: Transaction | None = None
    ) -> None:
        """Store recorded calls as they are (an imported thread's)."""
        items = [Deferred(_INSERT, _params(call)) for call in calls]
        if items:
            await self._write_deferred(items, tx)
