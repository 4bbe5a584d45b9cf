"""How a script entry becomes a provider answer: usage estimates, scripted errors, streaming."""

from __future__ import annotations

import asyncio
import copy
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from sa_core.cachepolicy import THREAD_USE, cached_messages
from sa_core.errors import ProviderError
from sa_core.jsontext import dumps
from sa_core.providers import (
    FinishReason,
    ProviderMessage,
    ProviderRequest,
    ProviderResponse,
    ProviderTool,
    StreamChunk,
    Usage,
)
from sa_core.testing.script import (
    ScriptedResponse,
    default_error_code,
    fresh_copy,
    to_tool_call,
)


def _estimate_tokens(text: str) -> int:
    """About four characters a token, rounded up."""
    return (len(text) + 3) // 4


# Turning a script entry into an answer
# --------------------------------------------------------------------------------------------


def _message_chars(message: ProviderMessage) -> int:
    chars = len(message.content or "") + len(message.reasoning or "")
    for call in message.tool_calls:
        chars += len(call.name) + len(dumps(call.arguments))
    return chars


class PromptSizes:
    """Each thread's last request with the size of every message, for the usage estimate.

    A thread's next request repeats most of the previous one's message objects, so their sizes
    are reused and only new messages are measured: the estimate no longer walks a long
    thread's whole history in Python at every step. Usually the next request starts with the
    previous one's messages (one list comparison, in C, tells); otherwise sizes are reused by
    identity and position. Bounded LRU by threads and messages, taking a thread in at the
    bounds as the store's caches do (:class:`~sa_core.cachepolicy.ThreadUse`).
    """

    THREADS = 256
    MESSAGES = cached_messages()
    TOOLS = 256

    def __init__(self) -> None:
        self._last: OrderedDict[str | None, tuple[list[ProviderMessage], list[int]]] = OrderedDict()
        self._held = 0
        """Messages kept over every thread."""
        self._tools: OrderedDict[int, tuple[ProviderTool, int]] = OrderedDict()

    def chars(self, request: ProviderRequest) -> int:
        """Characters of the request's messages."""
        messages, thread = request.messages, request.user
        last = self._last
        found = last.pop(thread, None)
        old, old_sizes = found if found is not None else ([], [])
        self._held -= len(old)
        known = len(old)
        if known and known <= len(messages) and messages[:known] == old:
            sizes = old_sizes + [_message_chars(message) for message in messages[known:]]
        else:
            sizes = [
                old_sizes[index]
                if index < known and old[index] is message
                else _message_chars(message)
                for index, message in enumerate(messages)
            ]
        full = len(last) >= self.THREADS or self._held + len(messages) > self.MESSAGES
        if found is not None or thread is None or THREAD_USE.takes(thread, last, full=full):
            last[thread] = (list(messages), sizes)
            self._held += len(messages)
            while len(last) > 1 and (len(last) > self.THREADS or self._held > self.MESSAGES):
                self._held -= len(last.popitem(last=False)[1][0])
        return sum(sizes)

    def tool_chars(self, tool: ProviderTool) -> int:
        """Characters of a tool's definition (measured once per tool object)."""
        found = self._tools.get(id(tool))
        if found is not None and found[0] is tool:
            return found[1]
        size = _tool_chars(tool)
        self._tools[id(tool)] = (tool, size)
        while len(self._tools) > self.TOOLS:
            self._tools.popitem(last=False)
        return size


def _tool_chars(tool: ProviderTool) -> int:
    return len(tool.name) + len(tool.description) + len(dumps(tool.parameters))


def estimated_usage(
    request: ProviderRequest, response: ProviderResponse, sizes: PromptSizes | None = None
) -> Usage:
    """The usage a real provider would report for this answer, estimated from characters."""
    if sizes is None:
        prompt_chars = sum(_message_chars(message) for message in request.messages)
    else:
        prompt_chars = sizes.chars(request)
    for tool in request.tools:
        prompt_chars += _tool_chars(tool) if sizes is None else sizes.tool_chars(tool)
    reasoning = _estimate_tokens(response.reasoning or "")
    output = response.content or ""
    for call in response.tool_calls:
        output += call.name + dumps(call.arguments)
    prompt = (prompt_chars + 3) // 4
    completion = _estimate_tokens(output) + reasoning
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        reasoning_tokens=reasoning,
    )


def raise_scripted_error(error: Mapping[str, Any], provider: str) -> None:
    """Raise the :class:`~sa_core.errors.ProviderError` a scripted ``error`` entry describes."""
    status = error.get("status")
    code = error.get("code") or default_error_code(status)
    raise ProviderError(
        str(error.get("message") or "Scripted provider error"),
        str(code),
        status,
        retry_after=error.get("retry_after"),
        provider=provider,
    )


def build_response(
    scripted: ScriptedResponse, request: ProviderRequest, sizes: PromptSizes | None = None
) -> ProviderResponse:
    """The :class:`ProviderResponse` of a scripted entry (fresh tool calls, estimated usage)."""
    calls = [to_tool_call(call) for call in scripted.tool_calls]
    finish: FinishReason = scripted.finish_reason or ("tool_calls" if calls else "stop")
    response = ProviderResponse(
        content=scripted.content,
        tool_calls=calls,
        reasoning=scripted.reasoning,
        reasoning_details=fresh_copy(scripted.reasoning_details),
        images=list(scripted.images),
        finish_reason=finish,
    )
    scripted_usage = scripted.usage
    if scripted_usage is not None and type(scripted_usage) is not Usage:
        usage = copy.copy(scripted_usage)
        if not usage.total_tokens:
            usage.total_tokens = usage.prompt_tokens + usage.completion_tokens
        response.usage = usage
    elif scripted_usage is not None:  # a fresh copy, built directly (no copy protocol)
        response.usage = Usage(
            prompt_tokens=scripted_usage.prompt_tokens,
            completion_tokens=scripted_usage.completion_tokens,
            total_tokens=scripted_usage.total_tokens
            or scripted_usage.prompt_tokens + scripted_usage.completion_tokens,
            reasoning_tokens=scripted_usage.reasoning_tokens,
            cached_tokens=scripted_usage.cached_tokens,
            cost=scripted_usage.cost,
            cache_write_tokens=scripted_usage.cache_write_tokens,
        )
    else:
        response.usage = estimated_usage(request, response, sizes)
    return response


def _pieces(text: str, size: int | None) -> list[str]:
    if size is None or len(text) <= size:
        return [text]
    return [text[i : i + size] for i in range(0, len(text), size)]


async def stream_response(
    response: ProviderResponse, *, chunk_size: int | None = None, chunk_delay: float = 0.0
) -> AsyncIterator[StreamChunk]:
    """Replay a complete answer as the chunk stream a streaming provider would send.

    Emits ``reasoning-delta``/``reasoning-done``, ``content-delta``/``content-done``, then per
    tool call ``tool-call-start``, ``tool-call-delta`` (the JSON arguments) and
    ``tool-call-done``, and a final ``finish``. Assembling the stream with
    :func:`sa_core.providers.collect_stream` gives back an equal response.

    Args:
        response: the answer to replay.
        chunk_size: characters per delta; ``None`` sends each part as one delta.
        chunk_delay: seconds to sleep between delta chunks.

    Yields:
        The chunks, in order.

    """
    if chunk_delay <= 0:
        for chunk in replay(response, chunk_size):
            yield chunk
        return
    first = True
    for chunk in replay(response, chunk_size):
        if chunk.type in _DELTAS:
            if not first:
                await asyncio.sleep(chunk_delay)
            first = False
        yield chunk


_DELTAS = frozenset({"reasoning-delta", "content-delta", "tool-call-delta"})
"""The chunks :func:`stream_response` spaces out by ``chunk_delay``."""


def replay(response: ProviderResponse, chunk_size: int | None) -> Iterator[StreamChunk]:
    """The chunks of :func:`stream_response`, without the delays."""
    if response.reasoning:
        for piece in _pieces(response.reasoning, chunk_size):
            yield StreamChunk("reasoning-delta", delta=piece)
        yield StreamChunk("reasoning-done", reasoning_details=response.reasoning_details)
    if response.content:
        for piece in _pieces(response.content, chunk_size):
            yield StreamChunk("content-delta", delta=piece)
        yield StreamChunk("content-done")
    for call in response.tool_calls:
        yield StreamChunk("tool-call-start", id=call.id, name=call.name)
        for piece in _pieces(dumps(call.arguments), chunk_size):
            yield StreamChunk("tool-call-delta", id=call.id, arguments_delta=piece)
        yield StreamChunk(
            "tool-call-done",
            id=call.id,
            name=call.name,
            arguments=call.arguments,
            extra_content=call.extra_content,
        )
    yield StreamChunk(
        "finish",
        finish_reason=response.finish_reason,
        usage=response.usage,
        response_id=response.response_id,
    )
