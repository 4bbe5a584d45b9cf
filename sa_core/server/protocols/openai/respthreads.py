"""Which thread a responses request runs on: the one its ids name, or the one it continues.

A request with ``previous_response_id`` or ``conversation`` runs on the thread they name; one
whose ``input`` carries a conversation this server answered continues its thread, as chat
completions do (:mod:`~sa_core.server.protocols.openai.conversations`); any other starts one.
An ``input`` of ``function_call_output`` items (after the conversation, when it carries it)
continues the turn that paused on those calls (:func:`open_results_turn`).
"""

from __future__ import annotations

from dataclasses import replace

from sa_core.engine.model.usage import UsageTotals
from sa_core.runtime import Runtime
from sa_core.server.protocols.openai import conversations, respids, toolcalls, toolturns
from sa_core.server.protocols.openai.errors import invalid
from sa_core.server.protocols.openai.models import Model
from sa_core.server.protocols.openai.requests import Turn as Item
from sa_core.server.protocols.openai.respparse import ResponsesRequest
from sa_core.server.protocols.openai.threads import (
    add_history,
    check_active,
    keep_metadata,
    model_thread,
    start_thread,
)
from sa_core.server.protocols.openai.turns import READ_PAGE, Turn, usage_before
from sa_core.spec import Message
from sa_core.state import ThreadState


async def open_response_turn(
    runtime: Runtime, key_id: str, model: Model, data: ResponsesRequest
) -> tuple[ThreadState, Turn, UsageTotals | None]:
    """The thread (found or started, its history added) and the turn for the last input.

    Returns:
        The thread, the turn, and the thread's usage before it (``None`` for a new thread).
    """
    results = input_results(data)
    if results is not None:
        return await open_results_turn(runtime, key_id, model, data, results)
    thread, fresh = await response_thread(runtime, key_id, model, data)
    if not fresh and not data.carries_history and toolturns.paused(thread):
        await toolturns.refuse_paused(thread, "input")  # a paused turn takes its results only
    await keep_metadata(runtime, thread, data.metadata)
    before = None if fresh else await usage_before(thread)
    last = data.items[-1][1]
    client = data.client if data.client.declared else None
    turn = Turn(runtime, thread, last, data.output_schema, data.settings.applied, client=client)
    return thread, turn, before


def input_results(data: ResponsesRequest) -> tuple[int, dict[str, str]] | None:
    """The results an input ends with (``function_call_output`` items), if it does.

    Returns:
        Where the conversation before them ends and the results, else ``None``.

    Raises:
        OpenAIError: a 400 when results continue a thread named by id and come with messages.
    """
    trailing = toolcalls.trailing_results(data.items)
    if data.carries_history or data.items[-1][0] != "tool":
        return trailing  # results before a message end their turn (``add_history``)
    if any(role not in ("tool", "system") for role, _ in data.items):
        raise invalid("input", "to continue a turn paused on client tool calls, send their "
                      "function_call_output items alone.")  # fmt: skip
    results = dict(toolcalls.split_result(text) for role, text in data.items if role == "tool")
    return len(data.items), results


async def open_results_turn(
    runtime: Runtime,
    key_id: str,
    model: Model,
    data: ResponsesRequest,
    trailing: tuple[int, dict[str, str]],
) -> tuple[ThreadState, Turn, UsageTotals | None]:
    """The turn that goes on with client tool results, on the thread that paused on them."""
    known, results = trailing
    started: str | None = None
    if data.carries_history:
        thread = await conversations.paused_conversation(
            runtime, key_id, model, data.user, data.items[:known], "input"
        )
    elif data.previous_response_id is not None:
        param = "previous_response_id"
        thread, history = await after_response(runtime, model, data.previous_response_id)
        if history is not None:
            raise invalid(param, "it is not the latest response of its conversation; only "
                          "the latest one's tool calls can be answered.")  # fmt: skip
        started = respids.decode(data.previous_response_id, respids.RESPONSE, (2, 3), param)[1]
    else:
        thread = await conversation_thread(runtime, model, data)
    anchor = await toolturns.continuing(thread, results, "input")
    await keep_metadata(runtime, thread, data.metadata)
    before = await usage_before(thread)
    turn = Turn(
        runtime, thread, "", data.output_schema, data.settings.applied,
        client=replace(data.client, results=results), anchor=anchor,
        started=started or await latest_user_message(thread),
    )  # fmt: skip
    return thread, turn, before


async def conversation_thread(
    runtime: Runtime, model: Model, data: ResponsesRequest
) -> ThreadState:
    """The thread ``conversation`` names (a 404 when it names none of the model's)."""
    assert data.conversation is not None
    thread_id = respids.decode(data.conversation, respids.CONVERSATION, 1, "conversation")[0]
    found = await model_thread(runtime, model, thread_id)
    if found is None:
        raise respids.not_found(data.conversation, "conversation")
    check_active(found, "conversation")
    return found


async def response_thread(
    runtime: Runtime, key_id: str, model: Model, data: ResponsesRequest
) -> tuple[ThreadState, bool]:
    """The thread the request continues (the input before its last item added), or a new one.

    Returns:
        The thread, and whether it is new.
    """
    if data.carries_history:
        return await conversations.open_conversation(runtime, key_id, model, data.user, data.items)
    earlier = data.items[:-1]
    if data.previous_response_id is not None:
        thread, history = await after_response(runtime, model, data.previous_response_id)
        if history is not None:  # an earlier response of its thread: branch from there
            return await start_thread(runtime, model, [*history, *earlier]), True
    else:
        thread = await conversation_thread(runtime, model, data)
    await add_history(thread, earlier)
    return thread, False


async def after_response(
    runtime: Runtime, model: Model, value: str
) -> tuple[ThreadState, list[Item] | None]:
    """The thread of ``previous_response_id``, and the history up to it if it is not the last.

    Raises:
        OpenAIError: 404 when the id names no response of this model's threads.
    """
    param = "previous_response_id"
    thread_id, message_id = respids.decode(value, respids.RESPONSE, (2, 3), param)[:2]
    thread = await model_thread(runtime, model, thread_id)
    started = None if thread is None else await thread.get_message(message_id)
    if thread is None or started is None or started.role != "user":
        raise respids.not_found(value, param)
    check_active(thread, param)
    if await latest_user_message(thread) == message_id:
        return thread, None
    return thread, history_through(await top_level(thread), message_id)


async def latest_user_message(thread: ThreadState) -> str | None:
    """The id of the thread's newest top-level user message."""
    offset = 0
    while True:
        page = await thread.get_messages(limit=READ_PAGE, offset=offset, order="desc")
        for message in page.messages:
            if message.role == "user":
                return message.id
        if not page.has_more:
            return None
        offset += READ_PAGE


async def top_level(thread: ThreadState) -> list[Message]:
    """Every top-level message of the thread, oldest first."""
    found: list[Message] = []
    while True:
        page = await thread.get_messages(limit=READ_PAGE, offset=len(found))
        found.extend(page.messages)
        if not page.has_more:
            return found


def history_through(messages: list[Message], message_id: str) -> list[Item]:
    """The conversation up to the answer to ``message_id`` (tool rows left out)."""
    history: list[Item] = []
    reached = False
    for message in messages:
        if reached and message.role == "user":
            break
        reached = reached or message.id == message_id
        if message.role in ("system", "user"):
            history.append((message.role, message.content or ""))
        elif message.role == "assistant" and message.content and message.status != "failed":
            history.append(("assistant", message.content))
    return history
