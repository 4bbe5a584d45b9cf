"""Which thread a request that carries its conversation continues: a durable index.

Chat completions clients send the whole conversation every time, and so do Responses clients
that keep their own history (``input`` holding the earlier messages, with no
``previous_response_id`` or ``conversation``). After each turn the server stores a digest of
the conversation as the client now sees it (its messages plus the answer it was given) as a
value of the thread (``thread_values``, key ``sa:openai:chat:<digest>``, an indexed column), and
the thread's latest digest (``sa:openai:chat_head``). A request whose messages up to its last
assistant message have a known digest, on a thread whose latest digest it is, continues that
thread; anything else starts a new thread. Being rows of the database, the index survives
restarts and is shared by every worker. Both APIs reduce a message to the same ``(role,
text)`` pair, so a conversation started on one continues on the other.

The digest covers the API key, the model and the request's ``user`` (else its
``safety_identifier``) too, so two keys (or two end users) sending the same words never share a
thread.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from sa_core.errors import ThreadNotFoundError
from sa_core.runtime import Runtime
from sa_core.server.protocols.openai.errors import OpenAIError
from sa_core.server.protocols.openai.models import Model
from sa_core.server.protocols.openai.requests import Turn
from sa_core.server.protocols.openai.threads import add_history, start_thread
from sa_core.server.protocols.openai.toolcalls import assistant_turn
from sa_core.state import ThreadState

KEY_PREFIX = "sa:openai:chat:"
HEAD_KEY = "sa:openai:chat_head"


def digest(key_id: str, model: Model, user: str, messages: Sequence[Turn]) -> str:
    """The digest of a conversation as one client sees it."""
    text = json.dumps([key_id, model.name, user, list(messages)], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def split_known(messages: Sequence[Turn]) -> int:
    """How many leading messages could be a stored conversation: up to the last assistant one."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index][0] == "assistant":
            return index + 1
    return 0


async def find_thread(runtime: Runtime, model: Model, found: str) -> ThreadState | None:
    """The thread whose latest conversation has digest ``found``, if it is the model's."""
    store = runtime.store
    for thread_id in await store.threads_with_value(KEY_PREFIX + found):
        if await store.get_value(thread_id, HEAD_KEY) != found:
            continue  # the thread has moved on (the client branched): start a new one
        try:
            thread = await runtime.thread_for_message(thread_id)
        except ThreadNotFoundError:
            continue
        if (
            thread.package == model.package
            and thread.agent_id == model.agent
            and thread.parent_id is None
            and thread.terminated is None
        ):
            return thread
    return None


async def remember(runtime: Runtime, thread_id: str, found: str) -> None:
    """Record the conversation the client now holds as the thread's latest."""
    await runtime.store.set_value(thread_id, KEY_PREFIX + found, True)
    await runtime.store.set_value(thread_id, HEAD_KEY, found)


async def open_conversation(
    runtime: Runtime, key_id: str, model: Model, user: str, messages: Sequence[Turn]
) -> tuple[ThreadState, bool]:
    """The thread the messages continue (the ones after its stored part added), or a new one.

    The last message is the turn's and is not added. A new thread holds the earlier messages
    as its history (no turn runs for them).

    Returns:
        The thread, and whether it is new.
    """
    known = split_known(messages)
    thread = None
    if known:
        thread = await find_thread(runtime, model, digest(key_id, model, user, messages[:known]))
    if thread is None:
        return await start_thread(runtime, model, messages[:-1]), True
    await add_history(thread, messages[known:-1])
    return thread, False


async def paused_conversation(
    runtime: Runtime, key_id: str, model: Model, user: str, known: Sequence[Turn], param: str
) -> ThreadState:
    """The thread of a conversation whose turn paused on client tool calls.

    ``known``: the conversation up to the assistant message that made the calls.

    Raises:
        OpenAIError: a 400 naming ``param`` when no thread holds that conversation.
    """
    thread = await find_thread(runtime, model, digest(key_id, model, user, known))
    if thread is None:
        raise OpenAIError(
            400,
            f"Invalid '{param}': the tool results answer calls of no conversation this server "
            "paused (send the conversation as it was returned, results last).",
            param=param,
            code="invalid_tool_results",
        )
    return thread


async def remember_answer(
    runtime: Runtime,
    key_id: str,
    model: Model,
    user: str,
    messages: Sequence[Turn],
    answer: str,
    thread_id: str,
    calls: Sequence[dict[str, str]] = (),
) -> None:
    """Index the conversation the client now holds (its messages and the answer).

    ``calls``: the client tool calls the answer returned, kept with it.
    """
    seen = [*messages, assistant_turn(answer, calls)]
    await remember(runtime, thread_id, digest(key_id, model, user, seen))
