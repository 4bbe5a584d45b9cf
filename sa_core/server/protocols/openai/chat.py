"""``POST /v1/chat/completions``: one turn of an agent per request, on a durable thread."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from litestar import Request, Response, post
from litestar.response import Stream

from sa_core.engine.model.usage import UsageTotals
from sa_core.runtime import Runtime
from sa_core.server.context import RuntimeDep
from sa_core.server.protocols.openai import conversations, toolcalls, toolturns
from sa_core.server.protocols.openai.errors import OpenAIError, error_body, error_specs
from sa_core.server.protocols.openai.models import Model, resolve_model
from sa_core.server.protocols.openai.requests import ChatRequest, chat_request, require_object
from sa_core.server.protocols.openai.settings import policy_for
from sa_core.server.protocols.openai.threads import (
    THREAD_HEADER,
    authenticate,
    keep_metadata,
    read_json,
)
from sa_core.server.protocols.openai.turns import Turn, TurnResult, usage_before
from sa_core.spec import Message
from sa_core.state import ThreadState

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def chat_usage(usage: UsageTotals) -> dict[str, Any]:
    """Usage in chat completions' shape."""
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


async def no_answer(runtime: Runtime, thread: ThreadState) -> OpenAIError:
    """The error of a turn that ended without text, with the last error its logs name.

    Marked ``x-should-retry: false``: the official clients retry a 5xx, and each retry would
    run another turn.
    """
    reason = ""
    for log in await thread.get_logs(limit=5):
        error = (log.data or {}).get("error")
        if error:
            reason = ": " + runtime.redact_secrets(thread, str(error))
            break
    failure = OpenAIError(
        502,
        f"The agent's turn on thread {thread.thread_id} ended without an answer{reason}",
        code="turn_failed",
    )
    failure.headers["x-should-retry"] = "false"
    return failure


async def answered_result(
    runtime: Runtime, thread: ThreadState, turn: Turn, before: UsageTotals | None
) -> TurnResult:
    """Run ``turn`` to its end and return its result; a turn with no answer raises its cause."""
    result: TurnResult | None = None
    async for item in turn.deltas(before):
        if isinstance(item, TurnResult):
            result = item
    assert result is not None
    if not result.answered:
        raise await no_answer(runtime, thread)
    return result


async def open_turn(
    runtime: Runtime, key_id: str, model: Model, data: ChatRequest
) -> tuple[ThreadState, Turn, bool]:
    """Find the thread the messages continue (or start one); the turn to run on it.

    Messages that end with the results of client tool calls continue the turn that paused on
    them, on its thread.

    Returns:
        The thread, the turn for the last message (or the results), and whether the thread
        is new.
    """
    client = data.client
    trailing = toolcalls.trailing_results(data.messages)
    if trailing is not None:
        known, results = trailing
        thread = await conversations.paused_conversation(
            runtime, key_id, model, data.user, data.messages[:known], "messages"
        )
        anchor = await toolturns.continuing(thread, results, "messages")
        await keep_metadata(runtime, thread, data.metadata)
        turn = Turn(
            runtime, thread, "", data.output_schema, data.settings.applied,
            client=replace(client, results=results), anchor=anchor,
        )  # fmt: skip
        return thread, turn, False
    thread, fresh = await conversations.open_conversation(
        runtime, key_id, model, data.user, data.messages
    )
    await keep_metadata(runtime, thread, data.metadata)
    turn = Turn(
        runtime, thread, data.messages[-1][1], data.output_schema, data.settings.applied,
        client=client if client.declared else None,
    )  # fmt: skip
    return thread, turn, fresh


@post(
    "/chat/completions",
    status_code=200,
    summary="Create a chat completion",
    responses=error_specs(403, 404, 502),
)
async def chat_completions(request: Request[Any, Any, Any], runtime: RuntimeDep) -> Response[Any]:
    """Run the model's agent for one turn on a durable thread (OpenAI Chat Completions).

    A request whose messages extend a conversation this server answered continues its thread;
    otherwise a new thread starts with the earlier messages as its history. The thread's id is
    in the ``x-sa-thread-id`` header; settings accepted and not applied (the model's
    ``client_settings`` is ``ignore``) are named in ``x-sa-ignored-fields``.
    """
    key = await authenticate(runtime, request)
    body = require_object(await read_json(request))
    model = resolve_model(runtime, body.get("model"), key=key)
    data = chat_request(body, policy_for(model, request), model)
    await toolturns.check(runtime, model, data.client, chat=True)
    thread, turn, fresh = await open_turn(runtime, key.id, model, data)
    before = None if fresh else await usage_before(thread)
    created = int(time.time())
    headers = {THREAD_HEADER: thread.thread_id, **data.settings.headers()}
    if data.stream:
        chunks = stream_chunks(runtime, key.id, model, data, turn, before, created)
        return Stream(chunks, media_type="text/event-stream", headers={**headers, **SSE_HEADERS})
    result = await answered_result(runtime, thread, turn, before)
    await remember(runtime, key.id, model, data, result)
    message: dict[str, Any] = {"role": "assistant", "content": result.text, "refusal": None}
    if result.calls:  # the turn paused on client tool calls: the client runs them
        message["content"] = result.text or None
        message["tool_calls"] = [toolcalls.chat_call(call) for call in result.calls]
    body = {
        "id": completion_id(result.request),
        "object": "chat.completion",
        "created": created,
        "model": model.name,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if result.calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": chat_usage(result.usage),
        "system_fingerprint": None,
    }
    return Response(content=body, headers=headers, media_type="application/json")


def completion_id(message: Message) -> str:
    """The completion's id: from the id of the message that started the turn.

    For a turn that went on with client tool results: of the message whose calls they answered.
    """
    return f"chatcmpl-{message.id}"


async def remember(
    runtime: Runtime, key_id: str, model: Model, data: ChatRequest, result: TurnResult
) -> None:
    """Index the conversation the client now holds, so its next request finds the thread."""
    await conversations.remember_answer(
        runtime, key_id, model, data.user, data.messages, result.text, result.thread_id,
        result.calls,
    )  # fmt: skip


async def stream_chunks(
    runtime: Runtime,
    key_id: str,
    model: Model,
    data: ChatRequest,
    turn: Turn,
    before: UsageTotals | None,
    created: int,
) -> AsyncIterator[str]:
    """The server-sent events of a streamed completion, ending with ``data: [DONE]``."""
    ident = ""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return event({
            "id": ident, "object": "chat.completion.chunk", "created": created,
            "model": model.name, "choices": [choice], "system_fingerprint": None,
        })  # fmt: skip

    async for item in turn.deltas(before):
        if isinstance(item, Message):
            ident = completion_id(item)
            yield chunk({"role": "assistant", "content": ""})
        elif isinstance(item, str):
            yield chunk({"content": item})
        else:
            if not item.answered:
                failure = await no_answer(runtime, turn.thread)
                yield event(error_body(failure.message, kind="server_error", code=failure.code))
                return
            await remember(runtime, key_id, model, data, item)
            if item.calls:  # paused on client tool calls: each whole, in one delta
                calls = [toolcalls.chat_call(c, index) for index, c in enumerate(item.calls)]
                yield chunk({"tool_calls": calls})
            yield chunk({}, "tool_calls" if item.calls else "stop")
            if data.include_usage:
                yield event({
                    "id": ident, "object": "chat.completion.chunk", "created": created,
                    "model": model.name, "choices": [], "usage": chat_usage(item.usage),
                })  # fmt: skip
    yield "data: [DONE]\n\n"


def event(payload: dict[str, Any]) -> str:
    """One server-sent event carrying ``payload`` as JSON."""
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"
