"""Recorded model calls: what a replay serves answers from, kept on their ``llm_call`` logs.

The engine builds a :class:`RecordedCall` for each model answer it uses and *stages* it under
the id of the call's ``llm_call`` log (:meth:`ModelCallsMixin.stage_model_call`). Whoever then
stores that log (the step's commit, a compaction's marker, a rejected structured answer) stores
the call in the same row (``logs.recording``, :func:`staged_recording`): no statement, page or
index entry of its own, and a step that rolls back leaves neither. A thread's recorded calls
are its logs that carry one, in the order they were written (the first is ordinal 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.engine import Connection

from sa_core.store import tables as t
from sa_core.store.fast import Prepared
from sa_core.store.interface import Backend, Transaction
from sa_core.store.rows import RecordedCall
from sa_core.store.storebase import StoreBase

_L = t.logs.c
_LIST = Prepared(
    select(_L.id, _L.created_at, _L.recording)
    .where(_L.thread_id == bindparam("b_tid"), _L.recording.is_not(None))
    .order_by(_L.created_at, _L.seq),
    [_L.id, _L.created_at, _L.recording],
)
MAX_STAGED = 4096
"""Staged calls kept at most: a call whose log is never stored (its step was cancelled between
the answer and the commit) is dropped, oldest first, instead of being held forever."""


def recorded_call(thread_id: str, row: Mapping[str, Any]) -> RecordedCall:
    """The call a log row (``id``, ``created_at``, ``recording``) carries, as ``thread_id``'s."""
    recording = row["recording"]
    return RecordedCall(
        thread_id=thread_id,
        log_id=row["id"],
        message_id=recording.get("message_id"),
        request_hash=recording["request_hash"],
        request=recording.get("request") or {},
        response=recording.get("response") or {},
        created_at=row["created_at"],
    )


def staged_recording(store: ModelCallsMixin, log_id: str) -> dict[str, Any] | None:
    """The ``logs.recording`` value of the call staged under ``log_id``, taken off the stage."""
    staged = store.staged_calls
    if not staged:
        return None
    call = staged.pop(log_id, None)
    if call is None:
        return None
    return {
        "message_id": call.message_id,
        "request_hash": call.request_hash,
        "request": call.request,
        "response": call.response,
    }


class ModelCallsMixin(StoreBase):
    """The recorded model calls of threads."""

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self.staged_calls: dict[str, RecordedCall] = {}
        """Calls waiting for their log to be stored, by log id (see the module docstring)."""

    def stage_model_call(self, call: RecordedCall) -> None:
        """Hold ``call`` until its ``llm_call`` log (``call.log_id``) is stored, with it."""
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
            return [recorded_call(thread_id, row) for row in _LIST.rows(conn, params)]

        return await self._read_one(op, tx)
