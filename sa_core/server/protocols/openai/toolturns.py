"""Client tools on a thread: the checks and moves of a turn that pauses on them.

:func:`check` checks a request's declared tools against the model's agent before a thread is
touched; :func:`continuing` checks results against the calls the thread's turn awaits and finds
the message that made them; :func:`close_paused` ends a paused turn with results that a new
message follows; :func:`refuse_paused` refuses a message while calls await their results; and
:func:`turn_part` rebuilds one response's part of a paused turn. The request and answer shapes
are in :mod:`~sa_core.server.protocols.openai.toolcalls`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sa_core.engine.tools import approvals
from sa_core.engine.turn import clienttools
from sa_core.errors import ClientToolsError
from sa_core.runtime import Runtime
from sa_core.server.protocols.openai.errors import OpenAIError
from sa_core.server.protocols.openai.models import Model
from sa_core.server.protocols.openai.toolcalls import ClientTools, Turn, call_of, split_result
from sa_core.spec import Message
from sa_core.state import ThreadState

READ_PAGE = 50


# -- checking -------------------------------------------------------------------------------


async def check(runtime: Runtime, model: Model, asked: ClientTools, *, chat: bool) -> None:
    """Check the declared tools against the model's agent before a thread is touched.

    Raises:
        OpenAIError: a 400 naming every field at fault (:func:`tools_error`).
    """
    if not asked.declared:
        return
    agent, scope = model.scope.agent(model.agent)
    try:
        await clienttools.check_for(runtime.kernel, scope, agent, asked.tools, asked.choice)
    except ClientToolsError as exc:
        raise tools_error(exc, chat=chat) from None


def tools_error(exc: ClientToolsError, *, chat: bool) -> OpenAIError:
    """The 400 of client tools the agent cannot take, naming each field at fault."""
    params = [request_param(field, chat=chat) for field, _ in exc.problems]
    details = [f"'{request_param(f, chat=chat)}': {m}" for f, m in exc.problems]
    code = "client_tools_refused" if any(p == "tools" for p in params) else "invalid_value"
    return OpenAIError(
        400,
        "Client tools cannot be offered: " + " ".join(details),
        param=",".join(dict.fromkeys(params)),
        code=code,
    )


def request_param(field: str, *, chat: bool) -> str:
    """The request field an engine problem's field names.

    ``client_tools[0].name`` is ``tools[0].function.name`` in chat completions and
    ``tools[0].name`` in Responses.
    """
    if not field.startswith(clienttools.TOOLS):
        return field
    rest = field[len(clienttools.TOOLS) :]
    index, dot, key = rest.partition("].")
    if chat and dot:
        return f"tools{index}].function.{key}"
    return "tools" + rest


# -- continuing a paused turn ---------------------------------------------------------------


async def continuing(thread: ThreadState, results: Mapping[str, str], param: str) -> Message:
    """Check results against the calls the thread's turn awaits; the message that made them.

    Raises:
        OpenAIError: a 400 naming ``param`` when a result answers no awaited call.
    """
    waiting = {p["tool_call_id"] for p in await thread.pending_client_calls()}
    unknown = [call_id for call_id in results if call_id not in waiting]
    if unknown or not waiting:
        listed = ", ".join(sorted(waiting)) or "none"
        raise OpenAIError(
            400,
            f"Invalid '{param}': the results for {', '.join(unknown) or 'these calls'} answer "
            f"no tool call the conversation's turn awaits (it awaits: {listed}).",
            param=param,
            code="invalid_tool_results",
        )
    anchor = await calls_message(thread, waiting)
    assert anchor is not None  # a pending call was stored with its assistant message
    return anchor


async def calls_message(thread: ThreadState, call_ids: set[str]) -> Message | None:
    """The newest top-level assistant message that made one of ``call_ids``."""
    offset = 0
    while True:
        page = await thread.get_messages(limit=READ_PAGE, offset=offset, order="desc")
        for message in page.messages:
            if message.role == "assistant" and any(
                call.id in call_ids for call in message.tool_calls or []
            ):
                return message
        if not page.has_more:
            return None
        offset += READ_PAGE


async def turn_part(thread: ThreadState, start: str) -> tuple[list[Message], list[dict[str, str]]]:
    """One response's part of a turn, and the client tool calls it ends with.

    The assistant messages after ``start`` up to the one that made client tool calls
    (included), or to the next user message.
    """
    after: list[Message] = []
    offset = 0
    while not any(m.id == start for m in after):
        page = await thread.get_messages(limit=READ_PAGE, offset=offset, order="desc")
        after += page.messages
        if not page.has_more:
            break
        offset += READ_PAGE
    ids = [m.id for m in after]
    newer = list(reversed(after[: ids.index(start)])) if start in ids else []
    answered = {
        m.tool_call_id for m in newer
        if m.role == "tool" and (m.metadata or {}).get(approvals.CLIENT_RESULT)
    }  # fmt: skip
    waiting = {p["tool_call_id"] for p in await thread.pending_client_calls()}
    replies: list[Message] = []
    for message in newer:
        if message.role == "user":
            break
        if message.role != "assistant":
            continue
        replies.append(message)
        made = [c for c in message.tool_calls or [] if c.id in answered or c.id in waiting]
        if made:
            return replies, [call_of(c.id, c.name, c.function.arguments) for c in made]
    return replies, []


async def close_paused(thread: ThreadState, history: Sequence[Turn]) -> list[Turn]:
    """End the thread's paused turn with the results ``history`` brings for its calls.

    Returns:
        The rest of ``history``, to store as it is.
    """
    results = dict(split_result(text) for role, text in history if role == "tool")
    if not results:
        return list(history)
    waiting = {p["tool_call_id"] for p in await thread.pending_client_calls()}
    closing = {call_id: output for call_id, output in results.items() if call_id in waiting}
    if not closing:
        return list(history)
    await thread.submit_tool_results(closing, resume=False)
    return [t for t in history if t[0] != "tool" or split_result(t[1])[0] not in closing]


def paused(thread: ThreadState) -> bool:
    """Whether the thread's row says its turn awaits client tool results (no read)."""
    return bool(thread.row.execution.get("status") == approvals.CLIENT_STATUS)


async def refuse_paused(thread: ThreadState, param: str) -> None:
    """A 400 when the thread's turn awaits client tool results and the request sends none."""
    pending = await thread.pending_client_calls()
    if pending:
        listed = ", ".join(p["tool_call_id"] for p in pending)
        raise OpenAIError(
            400,
            f"Invalid '{param}': the conversation's turn awaits the results of its client tool "
            f"calls ({listed}); send them before a new message.",
            param=param,
            code="tool_results_awaited",
        )
