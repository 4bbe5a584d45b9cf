"""``POST /v1/responses`` and ``GET /v1/responses/{id}``: the Responses API over threads."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from litestar import Request, Response, get, post
from litestar.params import FromPath
from litestar.response import Stream

from sa_core.engine.model.usage import UsageTotals
from sa_core.runtime import Runtime
from sa_core.server.context import RuntimeDep
from sa_core.server.protocols.openai import conversations, respids, toolturns
from sa_core.server.protocols.openai.chat import SSE_HEADERS, answered_result, no_answer
from sa_core.server.protocols.openai.errors import error_specs
from sa_core.server.protocols.openai.models import Model, resolve_model
from sa_core.server.protocols.openai.requests import require_object
from sa_core.server.protocols.openai.respparse import ResponsesRequest, responses_request
from sa_core.server.protocols.openai.respthreads import open_response_turn
from sa_core.server.protocols.openai.respwire import EventWriter, response_object
from sa_core.server.protocols.openai.settings import policy_for
from sa_core.server.protocols.openai.threads import (
    THREAD_HEADER,
    any_thread,
    authenticate,
    read_json,
)
from sa_core.server.protocols.openai.turns import Turn, TurnResult, joined
from sa_core.spec import Message
from sa_core.store import ApiKeyRow


@post(
    "/responses", status_code=200, summary="Create a response", responses=error_specs(403, 404, 502)
)
async def create_response(request: Request[Any, Any, Any], runtime: RuntimeDep) -> Response[Any]:
    """Run the model's agent for one turn (OpenAI Responses).

    ``previous_response_id`` or ``conversation`` continue that response's thread; without
    them, an ``input`` that carries a conversation this server answered continues its thread
    (as chat completions do), and anything else starts a new thread. The thread's id is in the
    ``x-sa-thread-id`` header; settings accepted and not applied are named in
    ``x-sa-ignored-fields``.
    """
    key = await authenticate(runtime, request)
    body = require_object(await read_json(request))
    model = resolve_model(runtime, body.get("model"), key=key)
    data = responses_request(body, policy_for(model, request), model)
    await toolturns.check(runtime, model, data.client, chat=False)
    thread, turn, before = await open_response_turn(runtime, key.id, model, data)
    headers = {THREAD_HEADER: thread.thread_id, **data.settings.headers()}
    created = int(time.time())
    if data.stream:
        events = stream_events(runtime, key.id, model, data, turn, before, created)
        return Stream(events, media_type="text/event-stream", headers={**headers, **SSE_HEADERS})
    result = await answered_result(runtime, thread, turn, before)
    await remember(runtime, key.id, model, data, result)
    message_id, anchor = response_ids(turn, result.request)
    body = response_object(
        result.thread_id, message_id, model.name, created, "completed", result.text,
        result.usage, data.previous_response_id, calls=result.calls, anchor=anchor,
    )  # fmt: skip
    return Response(content=body, headers=headers, media_type="application/json")


def response_ids(turn: Turn, request: Message) -> tuple[str, str | None]:
    """The message ids a response's id holds.

    The turn's user message, and for a turn that went on with client tool results, the
    assistant message whose calls they answered.
    """
    if turn.started is not None:
        return turn.started, request.id
    return request.id, None


async def remember(
    runtime: Runtime, key_id: str, model: Model, data: ResponsesRequest, result: TurnResult
) -> None:
    """Index the conversation a client that keeps its own history now holds."""
    if data.carries_history:
        await conversations.remember_answer(
            runtime, key_id, model, data.user, data.items, result.text, result.thread_id,
            result.calls,
        )  # fmt: skip


async def stream_events(
    runtime: Runtime,
    key_id: str,
    model: Model,
    data: ResponsesRequest,
    turn: Turn,
    before: UsageTotals | None,
    created: int,
) -> AsyncIterator[str]:
    """The Responses event sequence of one turn, numbered."""
    writer: EventWriter | None = None
    async for item in turn.deltas(before):
        if isinstance(item, Message):
            message_id, anchor = response_ids(turn, item)
            writer = EventWriter(
                turn.thread.thread_id, message_id, model.name, created,
                data.previous_response_id, anchor,
            )  # fmt: skip
            for line in writer.start():
                yield line
        elif isinstance(item, str):
            assert writer is not None
            for line in writer.delta(item):
                yield line
        else:
            assert writer is not None
            if not item.answered:
                yield writer.failed((await no_answer(runtime, turn.thread)).message)
                return
            await remember(runtime, key_id, model, data, item)
            for line in writer.finish(item.text, item.usage, item.calls):
                yield line


@get("/responses/{response_id:str}", summary="Retrieve a response", responses=error_specs(404))
async def get_response(
    request: Request[Any, Any, Any], runtime: RuntimeDep, response_id: FromPath[str]
) -> dict[str, Any]:
    """A response as stored on its thread (usage is given only when it is created)."""
    key = await authenticate(runtime, request)
    return await stored_response(runtime, response_id, key)


async def stored_response(runtime: Runtime, value: str, key: ApiKeyRow) -> dict[str, Any]:
    """Rebuild a response from its thread's messages (404 for a package ``key`` does not open).

    A response of a turn that paused on client tool calls ends with them; the response to
    their results begins after the message that made them.
    """
    parts = respids.decode(value, respids.RESPONSE, (2, 3), "response_id")
    thread_id, message_id = parts[0], parts[1]
    anchor = parts[2] if len(parts) == 3 else None
    thread = await any_thread(runtime, thread_id, key)
    started = None if thread is None else await thread.get_message(message_id)
    if thread is None or started is None or started.role != "user":
        raise respids.not_found(value, "response_id")
    replies, calls = await toolturns.turn_part(thread, anchor or message_id)
    text = runtime.redact_secrets(thread, joined(replies))
    if text or calls:
        status = "completed"
    elif await runtime.turn_settled(thread_id):
        status = "failed"
    else:
        status = "in_progress"
    return response_object(
        thread_id, message_id, f"{thread.package}/{thread.agent_id}",
        started.created_at // 1_000_000, status, text, None, None, calls=calls, anchor=anchor,
    )  # fmt: skip
