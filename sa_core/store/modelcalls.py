"""Recorded model calls: what a replay serves answers from, kept on their ``llm_call`` logs.

The engine builds the recording of each model answer it uses and *stages* it under the id of
the call's ``llm_call`` log (:meth:`ModelCallsMixin.stage_recording`). Whoever then stores that
log (the step's commit, a compaction's marker, a rejected structured answer) stores the call in
the same row (``logs.recording``, see ``insert_log``): no statement, page or index entry of its
own, and a step that rolls back leaves neither. A thread's recorded calls are its logs that
carry one, in the order they were written (the first is ordinal 1).

**Stored once.** What rarely changes between calls (the digests of the system prompt, each
tool and the settings, and their words) is a :class:`~sa_core.store.rows.RequestParts` row of
``request_parts``, keyed by its digest and shared by every call and thread that sent the same:
a recording names it by ``request.parts``. Its row is written in the same transaction as the
first log that needs it in this process (``INSERT`` that ignores a row already there), and
never again once that commit is known. Reads put the parts back: a
:class:`~sa_core.store.rows.RecordedCall`'s ``request`` has ``model``, ``system``,
``messages``, ``count``, ``tools`` and ``settings``, and ``texts`` on a thread's first call
with those parts (the words are kept once per change).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import bindparam, insert, select
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from sa_core.store import tables as t
from sa_core.store.fast import Deferred, Prepared
from sa_core.store.interface import Backend, Transaction
from sa_core.store.recordkeys import MAX_STAGED, parts_key, request_hash
from sa_core.store.rows import RecordedCall, RequestParts
from sa_core.store.storebase import StoreBase

_L = t.logs.c
_P = t.request_parts.c
RECORDED_COLUMNS = (_L.id, _L.created_at, _L.data, _L.recording)
"""What a recorded call is read from: its log row's id, time, data (the usage) and recording."""
_LIST = Prepared(
    select(*RECORDED_COLUMNS)
    .where(_L.thread_id == bindparam("b_tid"), _L.recording.is_not(None))
    .order_by(_L.created_at, _L.seq),
    RECORDED_COLUMNS,
)
Staged = tuple[Any, RequestParts | None]
"""A staged call: its ``logs.recording`` value (either form, see :func:`unpacked`), and its
parts when their row may be missing."""


_LOGGED_USAGE = {
    "prompt_tokens": "input_tokens",
    "completion_tokens": "output_tokens",
    "reasoning_tokens": "reasoning_tokens",
    "cached_tokens": "cached_tokens",
    "cache_write_tokens": "cache_write_tokens",
}
"""The usage a call's ``llm_call`` log keeps (usage field: log data key)."""


def usage_kept(usage: Mapping[str, Any]) -> dict[str, Any] | None:
    """What of a call's usage its recording keeps: what its log does not (else ``None``)."""
    prompt, completion = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
    total, cost = usage.get("total_tokens") or 0, usage.get("cost")
    if cost is None and total == prompt + completion:
        return None
    return {"total_tokens": total, "cost": cost}


def full_usage(kept: Mapping[str, Any] | None, data: Mapping[str, Any]) -> dict[str, Any]:
    """A call's usage: the tokens its log keeps, the total and cost its recording keeps."""
    usage = {field: data.get(key) or 0 for field, key in _LOGGED_USAGE.items()}
    total = usage["prompt_tokens"] + usage["completion_tokens"]
    usage["total_tokens"] = total if kept is None else kept.get("total_tokens", total)
    usage["cost"] = None if kept is None else kept.get("cost")
    return usage


def _response(recording: Mapping[str, Any], data: Mapping[str, Any] | None) -> dict[str, Any]:
    """The recorded answer with its whole usage (see :func:`usage_kept`)."""
    response = dict(recording.get("response") or {})
    kept = response.get("usage")
    if kept is None or "prompt_tokens" not in kept:
        response["usage"] = full_usage(kept, data or {})
    return response


_ANSWER_EXTRAS = ("usage", "reasoning", "reasoning_details", "images", "response_id", "metadata")
"""What a compact recording's extras may hold of the answer besides text and tool calls."""


def unpacked(recording: Any, data: Mapping[str, Any]) -> dict[str, Any]:
    """A stored recording in its long form (``request``, ``response``, ``message_id``).

    The engine stores a call compactly (:meth:`~sa_core.engine.model.recording.Recorder.record`):
    ``["<messages>.<count>.<parts>", content, [[id, name, arguments(, extra_content)], ...]]``
    and, when there is any, a dict of what the log does not hold (the model, message and
    finish reason when they differ from the log's, the usage beyond its tokens, reasoning,
    images, the response id, metadata). An imported call keeps its long form.
    """
    if not isinstance(recording, list):
        return dict(recording)
    key, content, calls = recording[0], recording[1], recording[2]
    extra: Mapping[str, Any] = recording[3] if len(recording) > 3 else {}
    messages, count, parts = str(key).split(".")
    response: dict[str, Any] = {
        "content": content,
        "tool_calls": [
            {"id": c[0], "name": c[1], "arguments": c[2]}
            | ({"extra_content": c[3]} if len(c) > 3 else {})
            for c in calls
        ],
        "finish_reason": extra.get("finish_reason", data.get("finish_reason")),
    }
    response.update((name, extra[name]) for name in _ANSWER_EXTRAS if name in extra)
    form: dict[str, Any] = {
        "request": {
            "model": extra.get("model", data.get("model")),
            "messages": messages,
            "count": int(count),
            "parts": parts,
        },
        "response": response,
    }
    if "message_id" in extra:
        form["message_id"] = extra["message_id"]
    return form


def _parts_named(recording: Any) -> str | None:
    """The key of the ``request_parts`` a stored recording names (either form)."""
    if isinstance(recording, list):
        return str(recording[0]).rpartition(".")[2]
    parts = (recording.get("request") or {}).get("parts")
    return None if parts is None else str(parts)


def expanded_calls(
    thread_id: str, rows: Iterable[Mapping[str, Any]], parts: Mapping[str, dict[str, Any]]
) -> list[RecordedCall]:
    """The calls log rows (:data:`RECORDED_COLUMNS`) carry, their parts and usage put back."""
    calls = []
    previous: str | None = None
    for row in rows:
        data = row["data"] or {}
        recording = unpacked(row["recording"], data)
        request = dict(recording.get("request") or {})
        hashed = recording.get("request_hash")
        key = request.pop("parts", None)
        if key is not None:
            found = parts.get(key) or {}
            request = {
                "model": request.get("model"),
                "system": found.get("system"),
                "messages": request.get("messages"),
                "count": request.get("count", 0),
                "tools": dict(found.get("tools") or {}),
                "settings": found.get("settings"),
            }
            if key != previous and found.get("texts") is not None:
                request["texts"] = found["texts"]
            previous = key
            hashed = hashed or request_hash(
                str(request["model"]), str(request["messages"]), int(request["count"]), key
            )
        calls.append(
            RecordedCall(
                thread_id=thread_id,
                log_id=row["id"],
                message_id=recording.get("message_id", data.get("message_id")),
                request_hash=str(hashed),
                request=request,
                response=_response(recording, data),
                created_at=row["created_at"],
            )
        )
    return calls


def read_parts(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The ``request_parts`` the recordings of ``rows`` name, by key."""
    keys = {key for row in rows if (key := _parts_named(row["recording"])) is not None}
    if not keys:
        return {}
    query = select(_P.key, _P.parts).where(_P.key.in_(sorted(keys)))
    return {key: dict(value or {}) for key, value in conn.execute(query).all()}


def stored_form(call: RecordedCall) -> Staged:
    """A call as it is staged: its recording naming its parts, and the parts (an import's)."""
    request = call.request
    response = dict(call.response)
    if "usage" in response:  # the log keeps the tokens
        kept = usage_kept(response.pop("usage") or {})
        if kept is not None:
            response["usage"] = kept
    recording: dict[str, Any] = {
        "message_id": call.message_id,
        "request_hash": call.request_hash,
        "response": response,
    }
    if "system" not in request or "parts" in request:  # not a call's expanded form
        recording["request"] = request
        return recording, None
    tools = dict(request.get("tools") or {})
    body: dict[str, Any] = {
        "system": request["system"],
        "tools": tools,
        "settings": request.get("settings"),
    }
    if request.get("texts") is not None:
        body["texts"] = request["texts"]
    key = parts_key(str(request["system"]), tools, str(request.get("settings")))
    recording["request"] = {
        "model": request.get("model"),
        "messages": request.get("messages"),
        "count": request.get("count", 0),
        "parts": key,
    }
    return recording, RequestParts(key, body)


@functools.cache
def _parts_insert(dialect: str) -> Prepared:
    """The ``request_parts`` insert of ``dialect`` that leaves a row already there alone."""
    values = {
        "key": bindparam("p_key"),
        "parts": bindparam("p_parts", type_=t.request_parts.c.parts.type),
        "created_at": bindparam("p_created_at"),
    }
    if dialect == "sqlite":
        return Prepared(sqlite_insert(t.request_parts).values(values).on_conflict_do_nothing())
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return Prepared(pg_insert(t.request_parts).values(values).on_conflict_do_nothing())
    return Prepared(insert(t.request_parts).values(values))


def parts_write(dialect: str, parts: RequestParts, created_at: int) -> Deferred:
    """The write of ``parts``' row (nothing when it is there already)."""
    params = {"p_key": parts.key, "p_parts": parts.parts, "p_created_at": created_at}
    return Deferred(_parts_insert(dialect), params)


class ModelCallsMixin(StoreBase):
    """The recorded model calls of threads."""

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self.staged_calls: dict[str, Staged] = {}
        """Calls waiting for their log to be stored, by log id (see the module docstring)."""

    def stage_recording(
        self, log_id: str, recording: Any, parts: RequestParts | None
    ) -> None:
        """Hold a call's recording until its ``llm_call`` log (``log_id``) is stored, with it.

        ``parts``: the parts the recording names, when their row may not be stored yet.
        """
        staged = self.staged_calls
        staged[log_id] = (recording, parts)
        if len(staged) > MAX_STAGED:
            del staged[next(iter(staged))]

    def stage_model_call(self, call: RecordedCall) -> None:
        """Hold ``call`` (an imported one) until its log (``call.log_id``) is stored, with it."""
        recording, parts = stored_form(call)
        self.stage_recording(call.log_id, recording, parts)

    def parts_write(self, parts: RequestParts, created_at: int, tx: Transaction | None) -> Deferred:
        """The write of ``parts``' row in ``tx``; they count as stored once it commits."""
        if tx is not None:
            tx.after_commit(parts.mark_stored)
        return parts_write(self._backend.dialect, parts, created_at)

    async def list_model_calls(
        self, thread_id: str, *, tx: Transaction | None = None
    ) -> list[RecordedCall]:
        """A thread's recorded calls in the order they were made (the first is ordinal 1)."""
        params = {"b_tid": thread_id}

        def op(conn: Connection) -> list[RecordedCall]:
            rows = _LIST.rows(conn, params)
            return expanded_calls(thread_id, rows, read_parts(conn, rows))

        return await self._read_one(op, tx)
