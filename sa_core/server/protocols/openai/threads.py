"""Threads behind the OpenAI-compatible API: authenticate, start, load and continue them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from litestar import Request

from sa_core.errors import MissingVariablesError, ThreadNotFoundError
from sa_core.runtime import Runtime
from sa_core.server.auth import READ_METHODS, bearer_token, read_only_detail
from sa_core.server.protocols.openai.errors import OpenAIError
from sa_core.server.protocols.openai.models import Model
from sa_core.server.protocols.openai.requests import Turn
from sa_core.server.protocols.openai.toolcalls import history_messages
from sa_core.server.protocols.openai.toolturns import close_paused
from sa_core.state import ThreadState
from sa_core.store import ApiKeyRow

TAG = "openai"
"""Every thread this API starts carries this tag (filter the console's list with it)."""
THREAD_HEADER = "x-sa-thread-id"
METADATA_KEY = "sa:openai:metadata"
"""The thread value holding the ``metadata`` of the latest request that sent any."""


async def authenticate(runtime: Runtime, request: Request[Any, Any, Any]) -> ApiKeyRow:
    """The active API key of ``Authorization: Bearer <key>``; else a 401 in OpenAI's shape.

    A read-only key may list and read (``GET``) but not run a turn: a 403 (``read_only_key``,
    ``openai.PermissionDeniedError``) says what it may do. Which models a key limited to some
    packages may use is :func:`~sa_core.server.protocols.openai.models.resolve_model`'s check.
    """
    token = bearer_token(request, allow_query=False)
    if token is None:
        raise OpenAIError(
            401,
            "Send 'Authorization: Bearer <key>' (the client's api_key); create a key with "
            "'sa keys create'.",
            code="invalid_api_key",
        )
    key = await runtime.store.verify_api_key(token)
    if key is None:
        raise OpenAIError(401, "Unknown or revoked API key.", code="invalid_api_key")
    if key.read_only and request.method not in READ_METHODS:
        attempted = f"{request.method} {request.scope['path']}"
        raise OpenAIError(403, read_only_detail(key, attempted), code="read_only_key")
    return key


async def read_json(request: Request[Any, Any, Any]) -> Any:
    """The request's JSON body; a 400 when it is not JSON."""
    try:
        return await request.json()
    except Exception:  # noqa: BLE001 - any decoding failure is the client's
        raise OpenAIError(400, "The request body is not valid JSON.") from None


async def start_thread(runtime: Runtime, model: Model, history: Sequence[Turn]) -> ThreadState:
    """A new thread of the model's agent holding ``history`` (no turn runs for it)."""
    try:
        thread = await runtime.create_thread(model.agent, package=model.package, tags=[TAG])
    except MissingVariablesError as exc:
        raise OpenAIError(
            400,
            f"The model '{model.name}' needs variables this server does not have: {exc}",
            param="model",
            code="missing_variables",
        ) from None
    await add_history(thread, history)
    return thread


async def add_history(thread: ThreadState, history: Sequence[Turn]) -> None:
    """Store messages on a thread without running a turn for them (tool calls as they were).

    Results of client tool calls the thread's turn awaits end that turn with them, with no
    model step (``submit_tool_results(..., resume=False)``): the client went on with a new
    message, as after a forced tool's call that was its answer.
    """
    history = await close_paused(thread, history)
    for message in history_messages(history):
        await thread.inject_message(message)


async def model_thread(runtime: Runtime, model: Model, thread_id: str) -> ThreadState | None:
    """The top-level thread ``thread_id`` if it belongs to the model's package and agent."""
    try:
        thread = await runtime.thread_for_message(thread_id)
    except ThreadNotFoundError:
        return None
    if thread.package != model.package or thread.parent_id is not None:
        return None
    if thread.agent_id != model.agent:
        return None
    return thread


async def any_thread(runtime: Runtime, thread_id: str, key: ApiKeyRow) -> ThreadState | None:
    """A top-level thread by id, of any package ``key`` opens."""
    try:
        thread = await runtime.get_thread(thread_id)
    except ThreadNotFoundError:
        return None
    return thread if thread.parent_id is None and key.allows(thread.package) else None


def check_active(thread: ThreadState, param: str) -> None:
    """A 400 naming ``param`` when the thread was terminated (it takes no more messages)."""
    if thread.terminated is not None:
        raise OpenAIError(
            400,
            f"The thread behind '{param}' ({thread.thread_id}) was terminated; start a new "
            "conversation.",
            param=param,
            code="thread_terminated",
        )


async def keep_metadata(
    runtime: Runtime, thread: ThreadState, metadata: dict[str, str] | None
) -> None:
    """Store a request's ``metadata`` on its thread (thread value ``sa:openai:metadata``)."""
    if metadata:
        await runtime.store.set_value(thread.thread_id, METADATA_KEY, metadata)
