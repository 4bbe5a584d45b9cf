"""The test kit: scripted providers and pytest fixtures for testing packs without a network.

Script the model's answers, register the provider under the name your model definitions use,
and drive the runtime as a user would::

    script = (
        TestScript()
        .add_tool_call_response([{"name": "lookup", "arguments": {"q": "tea"}}])
        .add_text_response("Green tea it is.")
    )
    provider = TestProvider(script)
    async with Runtime(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("barista")
        await thread.send_message("What should I drink?")
    assert provider.tool_names() == ["lookup"]
    assert provider.is_script_complete()

:class:`TestProvider` answers from a :class:`TestScript` in order (or ``Test response
received.`` forever when it has no script); :class:`FunctionProvider` answers by calling a
function, for replies that depend on the request. Both record every request they receive.

The fixtures ``sa_database_url`` and ``sa_runtime_factory`` come with the pytest plugin
:mod:`sa_core.pytest_plugin` (entry point ``sa_testing``). This module does not import pytest,
so a script or a server using its providers does not load pytest.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import importlib
import inspect
import os
import re
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeAlias

from sa_core.cachepolicy import THREAD_USE, cached_messages
from sa_core.errors import ProviderError, ScriptExhaustedError
from sa_core.jsontext import dumps
from sa_core.providers import (
    BaseProvider,
    FinishReason,
    ProviderImage,
    ProviderMessage,
    ProviderRequest,
    ProviderResponse,
    ProviderTool,
    ProviderToolCall,
    StreamChunk,
    Usage,
    parse_arguments,
)

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

UNSCRIPTED_REPLY = "Test response received."
"""What a :class:`TestProvider` without a script answers, every time."""

TextPattern: TypeAlias = str | re.Pattern[str]
ToolCallSpec: TypeAlias = ProviderToolCall | Mapping[str, Any]
UsageSpec: TypeAlias = Usage | Mapping[str, Any]


def new_call_id() -> str:
    """Return a fresh tool-call id of the form ``call_<8 hex>``."""
    return f"call_{os.urandom(4).hex()}"


def default_error_code(status: int | None) -> str:
    """Return the :class:`~sa_core.errors.ProviderError` code an HTTP status implies.

    Args:
        status: the HTTP status of the simulated failure, if any.

    Returns:
        ``server_error`` for 5xx, ``rate_limit`` for 429, ``auth_error`` for 401 and 403,
        ``invalid_request`` for other 4xx, ``unknown`` otherwise.

    """
    if status is None:
        return "unknown"
    if status >= 500:
        return "server_error"
    if status == 429:
        return "rate_limit"
    if status in (401, 403):
        return "auth_error"
    if 400 <= status < 500:
        return "invalid_request"
    return "unknown"


def _estimate_tokens(text: str) -> int:
    """About four characters a token, rounded up."""
    return (len(text) + 3) // 4


def _as_usage(usage: UsageSpec | None) -> Usage | None:
    if usage is None or isinstance(usage, Usage):
        return usage
    return Usage(**dict(usage))


# --------------------------------------------------------------------------------------------
# Scripts
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class InputExpectation:
    """What a request must contain for a scripted response to be given.

    Checked only when the provider was built with ``validate_inputs=True``; a violation raises
    :class:`~sa_core.errors.ProviderError` with code ``invalid_request``, naming every failed
    condition.

    Attributes:
        contains_message: some message's text contains this string (or matches this regex).
        contains_tool_result: ``{"tool_name": ..., "result_contains": ...}``: some tool message
            answers a call to ``tool_name``, and (when given) its text contains
            ``result_contains``.
        message_count: the request carries exactly this many messages, system prompt included.
        system_prompt_contains: the system prompt contains this string (or matches this regex).

    """

    contains_message: TextPattern | None = None
    contains_tool_result: Mapping[str, Any] | None = None
    message_count: int | None = None
    system_prompt_contains: TextPattern | None = None

    def problems(self, request: ProviderRequest) -> list[str]:
        """Describe every condition the request fails; an empty list means it passes.

        Args:
            request: the request the provider received.

        Returns:
            One sentence per failed condition.

        """
        found: list[str] = []
        texts = [m.content for m in request.messages if m.content]
        if self.contains_message is not None and not any(
            _matches(self.contains_message, text) for text in texts
        ):
            found.append(f"no message contains {_describe(self.contains_message)}")
        if self.system_prompt_contains is not None:
            system = "\n".join(
                m.content for m in request.messages if m.role == "system" and m.content
            )
            if not _matches(self.system_prompt_contains, system):
                found.append(
                    f"the system prompt does not contain {_describe(self.system_prompt_contains)}"
                )
        if self.message_count is not None and len(request.messages) != self.message_count:
            found.append(f"expected {self.message_count} messages, got {len(request.messages)}")
        if self.contains_tool_result is not None:
            problem = _tool_result_problem(self.contains_tool_result, request)
            if problem:
                found.append(problem)
        return found


def _matches(pattern: TextPattern, text: str) -> bool:
    if isinstance(pattern, re.Pattern):
        return pattern.search(text) is not None
    return pattern in text


def _describe(pattern: TextPattern) -> str:
    if isinstance(pattern, re.Pattern):
        return f"a match for /{pattern.pattern}/"
    return repr(pattern)


def _tool_result_problem(spec: Mapping[str, Any], request: ProviderRequest) -> str | None:
    tool_name = spec.get("tool_name", spec.get("toolName"))
    wanted = spec.get("result_contains", spec.get("resultContains"))
    call_names = {call.id: call.name for message in request.messages for call in message.tool_calls}
    for message in request.messages:
        if message.role != "tool":
            continue
        name = message.tool_name or call_names.get(message.tool_call_id or "")
        if tool_name is not None and name != tool_name:
            continue
        if wanted is None or _matches(wanted, message.content or ""):
            return None
    what = f"tool '{tool_name}'" if tool_name is not None else "any tool"
    detail = f" containing {_describe(wanted)}" if wanted is not None else ""
    return f"no result from {what}{detail}"


@dataclass(slots=True)
class ScriptedResponse:
    """One scripted model answer.

    Attributes:
        content: the text reply.
        tool_calls: calls the model makes; :class:`~sa_core.providers.ProviderToolCall` or
            dicts ``{"name": ..., "arguments": {...}, "id": optional}`` (ids default to
            ``call_<8 hex>``).
        reasoning: the model's visible thinking.
        reasoning_details: provider reasoning blocks (signatures), passed through.
        finish_reason: defaults to ``tool_calls`` when there are tool calls, else ``stop``.
        usage: reported token usage; estimated at about four characters a token when ``None``.
        error: ``{"message": ..., "code": ..., "status": ..., "retry_after": ...}``: the
            provider raises :class:`~sa_core.errors.ProviderError` instead of answering.
        delay: seconds to sleep before answering (or failing), to observe in-flight turns.
        expect: conditions on the request, checked when ``validate_inputs`` is on.
        images: images the model returns.

    """

    content: str | None = None
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    reasoning: str | None = None
    reasoning_details: list[dict[str, Any]] | None = None
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    error: dict[str, Any] | None = None
    delay: float | None = None
    expect: InputExpectation | None = None
    images: list[ProviderImage] = field(default_factory=list)


_SCRIPTED_FIELDS: frozenset[str] = frozenset(f.name for f in fields(ScriptedResponse))

FunctionResult: TypeAlias = str | Mapping[str, Any] | ScriptedResponse | ProviderResponse
"""What a :class:`FunctionProvider` function may return."""


class TestScript:
    """An ordered list of scripted answers, built with chainable methods.

    Example::

        script = (
            TestScript()
            .add_text_response("Hello!")
            .add_tool_call_response([{"name": "search", "arguments": {"q": "x"}}])
            .add_error_response("overloaded", status=529)
        )
    """

    __test__: ClassVar[bool] = False  # not a pytest test class, despite the name

    def __init__(self, responses: Sequence[ScriptedResponse] = ()) -> None:
        self._responses: list[ScriptedResponse] = list(responses)
        self._chunk_size: int | None = None
        self._chunk_delay: float = 0.0

    @classmethod
    def create(cls) -> TestScript:
        """Return an empty script (the spec's ``TestScript.create()``)."""
        return cls()

    def add_response(self, response: ScriptedResponse) -> TestScript:
        """Append a fully specified answer.

        Args:
            response: the answer to append.

        Returns:
            This script, for chaining.

        """
        self._responses.append(response)
        return self

    def add_text_response(
        self,
        text: str,
        *,
        usage: UsageSpec | None = None,
        delay: float | None = None,
        expect: InputExpectation | None = None,
    ) -> TestScript:
        """Append a plain text answer (finish reason ``stop``).

        Args:
            text: the reply.
            usage: reported usage, a :class:`~sa_core.providers.Usage` or a dict of its fields.
            delay: seconds to wait before answering.
            expect: conditions the request must meet (with ``validate_inputs``).

        Returns:
            This script, for chaining.

        """
        return self.add_response(
            ScriptedResponse(
                content=text,
                finish_reason="stop",
                usage=_as_usage(usage),
                delay=delay,
                expect=expect,
            )
        )

    def add_tool_call_response(
        self,
        calls: Sequence[ToolCallSpec],
        text: str | None = None,
        *,
        usage: UsageSpec | None = None,
        delay: float | None = None,
        expect: InputExpectation | None = None,
    ) -> TestScript:
        """Append an answer that calls tools (finish reason ``tool_calls``).

        Args:
            calls: ``{"name": ..., "arguments": {...}, "id": optional}`` dicts or
                :class:`~sa_core.providers.ProviderToolCall` objects; missing ids become
                ``call_<8 hex>``.
            text: text the model says alongside the calls.
            usage: reported usage.
            delay: seconds to wait before answering.
            expect: conditions the request must meet (with ``validate_inputs``).

        Returns:
            This script, for chaining.

        """
        return self.add_response(
            ScriptedResponse(
                content=text,
                tool_calls=[_tool_call(call) for call in calls],
                finish_reason="tool_calls",
                usage=_as_usage(usage),
                delay=delay,
                expect=expect,
            )
        )

    def add_error_response(
        self,
        message: str,
        code: str | None = None,
        status: int | None = None,
        *,
        retry_after: float | None = None,
        delay: float | None = None,
    ) -> TestScript:
        """Append a failure: the provider raises :class:`~sa_core.errors.ProviderError`.

        Mind that the engine retries retryable codes (``rate_limit``, ``server_error``,
        ``timeout``, ``unknown``), and each attempt consumes a scripted response.

        Args:
            message: the error message.
            code: the error code; derived from ``status`` when omitted (``server_error`` for
                5xx, ``rate_limit`` for 429, ``auth_error`` for 401/403, ``invalid_request``
                for other 4xx, ``unknown`` otherwise).
            status: the simulated HTTP status.
            retry_after: seconds the simulated provider asks the caller to wait.
            delay: seconds to wait before failing.

        Returns:
            This script, for chaining.

        """
        error: dict[str, Any] = {
            "message": message,
            "code": code or default_error_code(status),
            "status": status,
        }
        if retry_after is not None:
            error["retry_after"] = retry_after
        return self.add_response(ScriptedResponse(error=error, finish_reason="error", delay=delay))

    def add_reasoning_response(
        self,
        text: str,
        reasoning: str,
        *,
        usage: UsageSpec | None = None,
        delay: float | None = None,
    ) -> TestScript:
        """Append a text answer preceded by visible reasoning.

        Args:
            text: the reply.
            reasoning: the model's thinking.
            usage: reported usage.
            delay: seconds to wait before answering.

        Returns:
            This script, for chaining.

        """
        return self.add_response(
            ScriptedResponse(
                content=text,
                reasoning=reasoning,
                finish_reason="stop",
                usage=_as_usage(usage),
                delay=delay,
            )
        )

    def with_streaming_simulation(self, chunk_size: int, chunk_delay: float = 0.0) -> TestScript:
        """Stream text, reasoning and tool arguments in pieces of ``chunk_size`` characters.

        Args:
            chunk_size: characters per delta chunk (at least 1).
            chunk_delay: seconds to sleep between chunks.

        Returns:
            This script, for chaining.

        Raises:
            ValueError: ``chunk_size`` is below 1 or ``chunk_delay`` is negative.

        """
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
        if chunk_delay < 0:
            raise ValueError(f"chunk_delay must not be negative, got {chunk_delay}")
        self._chunk_size = chunk_size
        self._chunk_delay = chunk_delay
        return self

    @property
    def responses(self) -> list[ScriptedResponse]:
        """The scripted answers, in order (a copy of the list)."""
        return list(self._responses)

    @property
    def chunk_size(self) -> int | None:
        """Characters per streamed delta, or ``None`` for one delta per part."""
        return self._chunk_size

    @property
    def chunk_delay(self) -> float:
        """Seconds between streamed chunks."""
        return self._chunk_delay

    def __len__(self) -> int:
        return len(self._responses)

    def __iter__(self) -> Iterator[ScriptedResponse]:
        return iter(list(self._responses))

    def __repr__(self) -> str:
        return f"TestScript({len(self._responses)} responses)"

    def is_empty(self) -> bool:
        """Whether the script holds no answers."""
        return not self._responses

    def clone(self) -> TestScript:
        """Return an independent deep copy (answers and streaming settings)."""
        twin = TestScript(copy.deepcopy(self._responses))
        twin._chunk_size = self._chunk_size
        twin._chunk_delay = self._chunk_delay
        return twin


_SCALARS = (str, int, float, bool, type(None))


def _fresh(value: Any) -> Any:
    """A deep copy of ``value``; plain JSON (dicts, lists, scalars) is copied without deepcopy.

    Anything else goes through :func:`copy.deepcopy`. Scripted arguments are nearly always
    small plain JSON, copied here without ``deepcopy``'s memo and reduce machinery (a model
    step copies them once per call).
    """
    if isinstance(value, _SCALARS):
        return value
    kind = type(value)
    if kind is dict:
        copied: dict[Any, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                return copy.deepcopy(value)
            copied[key] = item if isinstance(item, _SCALARS) else _fresh(item)
        return copied
    if kind is list:
        return [item if isinstance(item, _SCALARS) else _fresh(item) for item in value]
    return copy.deepcopy(value)


def _tool_call(spec: ToolCallSpec) -> ProviderToolCall:
    """Normalise a tool-call spec into a fresh ProviderToolCall (copying its arguments)."""
    if isinstance(spec, ProviderToolCall):
        return ProviderToolCall(
            spec.id or new_call_id(),
            spec.name,
            _fresh(spec.arguments),
            _fresh(spec.extra_content),
        )
    if "name" not in spec:
        raise ValueError(f"A scripted tool call needs a 'name': {dict(spec)!r}")
    raw = spec.get("arguments")
    arguments = _fresh(raw) if isinstance(raw, Mapping) else parse_arguments(raw)
    extra = spec.get("extra_content")
    return ProviderToolCall(
        str(spec.get("id") or new_call_id()),
        str(spec["name"]),
        dict(arguments),
        _fresh(dict(extra)) if extra is not None else None,
    )


# --------------------------------------------------------------------------------------------
# Turning a script entry into an answer
# --------------------------------------------------------------------------------------------


def _message_chars(message: ProviderMessage) -> int:
    chars = len(message.content or "") + len(message.reasoning or "")
    for call in message.tool_calls:
        chars += len(call.name) + len(dumps(call.arguments))
    return chars


class _PromptSizes:
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
        self._last: OrderedDict[str | None, tuple[list[ProviderMessage], list[int]]] = (
            OrderedDict()
        )
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


def _estimated_usage(
    request: ProviderRequest, response: ProviderResponse, sizes: _PromptSizes | None = None
) -> Usage:
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


def _raise_scripted_error(error: Mapping[str, Any], provider: str) -> None:
    status = error.get("status")
    code = error.get("code") or default_error_code(status)
    raise ProviderError(
        str(error.get("message") or "Scripted provider error"),
        str(code),
        status,
        retry_after=error.get("retry_after"),
        provider=provider,
    )


def _build_response(
    scripted: ScriptedResponse, request: ProviderRequest, sizes: _PromptSizes | None = None
) -> ProviderResponse:
    calls = [_tool_call(call) for call in scripted.tool_calls]
    finish: FinishReason = scripted.finish_reason or ("tool_calls" if calls else "stop")
    response = ProviderResponse(
        content=scripted.content,
        tool_calls=calls,
        reasoning=scripted.reasoning,
        reasoning_details=_fresh(scripted.reasoning_details),
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
        )
    else:
        response.usage = _estimated_usage(request, response, sizes)
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
        for chunk in _replay(response, chunk_size):
            yield chunk
        return
    first = True
    for chunk in _replay(response, chunk_size):
        if chunk.type in _DELTAS:
            if not first:
                await asyncio.sleep(chunk_delay)
            first = False
        yield chunk


_DELTAS = frozenset({"reasoning-delta", "content-delta", "tool-call-delta"})
"""The chunks :func:`stream_response` spaces out by ``chunk_delay``."""


def _replay(response: ProviderResponse, chunk_size: int | None) -> Iterator[StreamChunk]:
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


# --------------------------------------------------------------------------------------------
# Providers
# --------------------------------------------------------------------------------------------


DEFAULT_RECORDED = 1000
"""Requests a :class:`TestProvider` or :class:`FunctionProvider` keeps by default (its
``max_recorded``)."""


class _RecordingProvider(BaseProvider):
    """Shared plumbing: request recording, delays, streaming and inspection helpers."""

    name: ClassVar[str] = "test"

    def __init__(self, *, name: str = "test", max_recorded: int | None = None) -> None:
        super().__init__(name=name)
        if max_recorded is not None and max_recorded < 1:
            raise ValueError(f"max_recorded must be at least 1 (or None), got {max_recorded}")
        self.requests: list[ProviderRequest] = []
        self.max_recorded = max_recorded
        self._calls = 0
        self._sizes = _PromptSizes()

    def _record(self, request: ProviderRequest) -> None:
        """Count a request and keep it, dropping the oldest beyond ``max_recorded``."""
        self._calls += 1
        self.requests.append(request)
        limit = self.max_recorded
        if limit is not None and len(self.requests) > limit:
            del self.requests[: len(self.requests) - limit]

    # -- inspection -------------------------------------------------------------------------

    @property
    def request_log(self) -> list[ProviderRequest]:
        """The requests kept (all, or the last ``max_recorded``), oldest first; :attr:`requests`."""
        return self.requests

    @property
    def last_request(self) -> ProviderRequest | None:
        """The most recent request, or ``None`` before the first call."""
        return self.requests[-1] if self.requests else None

    @property
    def call_count(self) -> int:
        """How many requests the provider received (counted even when no longer kept)."""
        return self._calls

    def last_user_message(self, request: ProviderRequest | None = None) -> str | None:
        """Return the text of the last ``user`` message of a request.

        Args:
            request: the request to read; defaults to :attr:`last_request`.

        Returns:
            The text, or ``None`` when there is no request or no user message.

        """
        request = request if request is not None else self.last_request
        return _last_user_text(request) if request is not None else None

    def tool_names(self, request: ProviderRequest | None = None) -> list[str]:
        """Names of the tools offered in a request, in order.

        Args:
            request: the request to read; defaults to :attr:`last_request`.

        Returns:
            The tool names; empty when there is no request.

        """
        request = request if request is not None else self.last_request
        return [tool.name for tool in request.tools] if request is not None else []

    # -- answering --------------------------------------------------------------------------

    async def _answer(self, request: ProviderRequest) -> tuple[ProviderResponse, int | None, float]:
        """Produce the answer and the streaming settings (chunk size, chunk delay)."""
        raise NotImplementedError

    async def generate(self, request: ProviderRequest) -> ProviderResponse:
        """Record the request and return the next answer.

        Args:
            request: the model call.

        Returns:
            The answer.

        Raises:
            ProviderError: the answer is a scripted error or an expectation failed.

        """
        response, _, _ = await self._answer(request)
        return response

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamChunk]:
        """Record the request and stream the next answer as chunks.

        Args:
            request: the model call.

        Yields:
            Reasoning, content and tool-call chunks, then ``finish``.

        Raises:
            ProviderError: the answer is a scripted error or an expectation failed.

        """
        response, chunk_size, chunk_delay = await self._answer(request)
        if chunk_delay <= 0:  # no pauses: the chunks straight from the replay
            for chunk in _replay(response, chunk_size):
                yield chunk
            return
        async for chunk in stream_response(
            response, chunk_size=chunk_size, chunk_delay=chunk_delay
        ):
            yield chunk


def _last_user_text(request: ProviderRequest) -> str | None:
    for message in reversed(request.messages):
        if message.role == "user":
            return message.content or ""
    return None


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class TestProvider(_RecordingProvider):
    """A provider that answers from a :class:`TestScript`, in order, and records requests.

    Without a script it answers ``Test response received.`` forever. With a script, the
    request after the last scripted answer raises
    :class:`~sa_core.errors.ScriptExhaustedError`.

    Args:
        script: the answers; ``None`` for the endless default reply.
        name: the provider name; register the provider under the name your model
            definitions use.
        validate_inputs: check each answer's ``expect`` against the request.
        max_recorded: requests kept in :attr:`requests` (the oldest go first; ``None`` keeps
            every one). The default bound keeps a long-running ``sa serve --test-provider``
            from holding every request with its whole message list; :attr:`call_count` counts
            every request either way.

    """

    __test__: ClassVar[bool] = False  # not a pytest test class, despite the name

    def __init__(
        self,
        script: TestScript | None = None,
        *,
        name: str = "test",
        validate_inputs: bool = False,
        max_recorded: int | None = DEFAULT_RECORDED,
    ) -> None:
        super().__init__(name=name, max_recorded=max_recorded)
        self.validate_inputs = validate_inputs
        self._script = script
        self._index = 0

    @property
    def script(self) -> TestScript | None:
        """The script answered from, or ``None``."""
        return self._script

    @property
    def current_index(self) -> int:
        """Index of the next scripted answer (the number of answers given so far)."""
        return self._index

    def set_script(self, script: TestScript | None) -> None:
        """Replace the script and start over (the request log is cleared too).

        Args:
            script: the new answers, or ``None`` for the endless default reply.

        """
        self._script = script
        self.reset()

    def reset(self) -> None:
        """Rewind to the first scripted answer and clear the request log."""
        self._index = 0
        self.requests.clear()
        self._calls = 0

    def remaining_responses(self) -> int:
        """Scripted answers not given yet (0 without a script)."""
        if self._script is None:
            return 0
        return max(len(self._script) - self._index, 0)

    def is_script_complete(self) -> bool:
        """Whether every scripted answer was given (always true without a script)."""
        return self.remaining_responses() == 0

    def _next(self, request: ProviderRequest) -> ScriptedResponse:
        self._record(request)
        if self._script is None:
            return ScriptedResponse(content=UNSCRIPTED_REPLY, finish_reason="stop")
        responses = self._script._responses  # read in place: ``responses`` returns a copy
        if self._index >= len(responses):
            user = _last_user_text(request)
            said = f"'{_short(user)}'" if user is not None else "(none)"
            raise ScriptExhaustedError(
                f"TestProvider: script exhausted after {len(responses)} responses; add more "
                f"responses to the TestScript (last request had {len(request.messages)} "
                f"messages, last user message: {said})",
                "invalid_request",
                provider=self.name,
            )
        scripted = responses[self._index]
        self._index += 1
        if self.validate_inputs and scripted.expect is not None:
            problems = scripted.expect.problems(request)
            if problems:
                raise ProviderError(
                    f"TestProvider: request {self._index} does not meet the expectation of "
                    f"scripted response {self._index}: " + "; ".join(problems),
                    "invalid_request",
                    provider=self.name,
                )
        return scripted

    async def _answer(self, request: ProviderRequest) -> tuple[ProviderResponse, int | None, float]:
        scripted = self._next(request)
        if scripted.delay:
            await asyncio.sleep(scripted.delay)
        if scripted.error is not None:
            _raise_scripted_error(scripted.error, self.name)
        script = self._script
        chunk_size = script.chunk_size if script is not None else None
        chunk_delay = script.chunk_delay if script is not None else 0.0
        return _build_response(scripted, request, self._sizes), chunk_size, chunk_delay


class FunctionProvider(_RecordingProvider):
    """A provider whose answers come from a function of the request.

    ``fn(request)`` (plain or ``async``) returns one of:

    - a ``str``: a text reply;
    - a dict with any :class:`ScriptedResponse` field, typically
      ``{"tool_calls": [{"name": ..., "arguments": {...}, "id"?: ...}], "content"?: ...,
      "reasoning"?: ...}``;
    - a :class:`ScriptedResponse` (its ``error``, ``delay`` and ``usage`` are honoured);
    - a :class:`~sa_core.providers.ProviderResponse`, returned as is.

    To simulate a failure, return ``{"error": {...}}`` or raise
    :class:`~sa_core.errors.ProviderError` from the function.

    Args:
        fn: computes the answer for each request.
        name: the provider name.
        chunk_size: characters per streamed delta; ``None`` sends each part whole.
        chunk_delay: seconds between streamed chunks.
        max_recorded: requests kept in :attr:`requests` (the oldest go first; ``None`` keeps
            every one), as for :class:`TestProvider`.

    """

    def __init__(
        self,
        fn: Callable[[ProviderRequest], FunctionResult | Awaitable[FunctionResult]],
        *,
        name: str = "test",
        chunk_size: int | None = None,
        chunk_delay: float = 0.0,
        max_recorded: int | None = DEFAULT_RECORDED,
    ) -> None:
        super().__init__(name=name, max_recorded=max_recorded)
        self.fn = fn
        self.chunk_size = chunk_size
        self.chunk_delay = chunk_delay

    def reset(self) -> None:
        """Clear the request log."""
        self.requests.clear()
        self._calls = 0

    async def _answer(self, request: ProviderRequest) -> tuple[ProviderResponse, int | None, float]:
        self._record(request)
        result = self.fn(request)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, ProviderResponse):
            return result, self.chunk_size, self.chunk_delay
        scripted = _to_scripted(result)
        if scripted.delay:
            await asyncio.sleep(scripted.delay)
        if scripted.error is not None:
            _raise_scripted_error(scripted.error, self.name)
        return _build_response(scripted, request, self._sizes), self.chunk_size, self.chunk_delay


def _to_scripted(result: object) -> ScriptedResponse:
    if isinstance(result, ScriptedResponse):
        return result
    if isinstance(result, str):
        return ScriptedResponse(content=result)
    if isinstance(result, Mapping):
        unknown = sorted(set(result) - _SCRIPTED_FIELDS)
        if unknown:
            raise TypeError(
                f"FunctionProvider: unknown keys {unknown} in the returned dict; use "
                f"{sorted(_SCRIPTED_FIELDS)}"
            )
        options = dict(result)
        options["usage"] = _as_usage(options.get("usage"))
        options["tool_calls"] = list(options.get("tool_calls") or [])
        return ScriptedResponse(**options)
    raise TypeError(
        "FunctionProvider: the function must return a str, a dict, a ScriptedResponse or a "
        f"ProviderResponse, not {type(result).__name__}"
    )


# --------------------------------------------------------------------------------------------
# pytest plugin
# --------------------------------------------------------------------------------------------


class RuntimeFactory(Protocol):
    """The ``sa_runtime_factory`` fixture: opens runtimes on the test's database."""

    def __call__(
        self,
        *,
        packs: Sequence[Any] = (),
        providers: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> AbstractAsyncContextManager[Any]:
        """Open ``sa_core.Runtime`` as an async context manager."""
        ...


def make_runtime_factory(database_url: str) -> RuntimeFactory:
    """Build the ``sa_runtime_factory`` callable for one database.

    Each call opens ``Runtime(packs=..., providers=..., database_url=database_url,
    load_entrypoints=False, **options)``. Every runtime a factory opens shares the database, so
    a test can close one and open another to check that state survived.

    Args:
        database_url: the database the runtimes use.

    Returns:
        The factory; ``providers`` defaults to ``{"test": TestProvider()}``.

    """

    @contextlib.asynccontextmanager
    async def open_runtime(
        *,
        packs: Sequence[Any] = (),
        providers: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> AsyncIterator[Any]:
        runtime_class = importlib.import_module("sa_core.runtime").Runtime
        settings: dict[str, Any] = {"database_url": database_url, "load_entrypoints": False}
        settings.update(options)
        chosen = dict(providers) if providers is not None else {"test": TestProvider()}
        async with runtime_class(packs=list(packs), providers=chosen, **settings) as runtime:
            yield runtime

    return open_runtime


def __getattr__(name: str) -> Any:
    """The fixtures, for ``from sa_core.testing import sa_runtime_factory`` (imports pytest)."""
    if name in ("sa_database_url", "sa_runtime_factory"):
        from sa_core import pytest_plugin

        return getattr(pytest_plugin, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def pytest_configure(config: Any) -> None:
    """Bring the fixtures along where pytest loads this module as a plugin.

    Only pytest calls it, and only for ``pytest_plugins = ["sa_core.testing"]`` (the older
    spelling of :mod:`sa_core.pytest_plugin`): registers that plugin unless it already is.
    """
    from sa_core import pytest_plugin

    manager = config.pluginmanager
    if not manager.is_registered(pytest_plugin):
        manager.register(pytest_plugin, "sa_core.pytest_plugin")


__all__ = [
    "UNSCRIPTED_REPLY",
    "FunctionProvider",
    "FunctionResult",
    "InputExpectation",
    "RuntimeFactory",
    "ScriptedResponse",
    "TestProvider",
    "TestScript",
    "default_error_code",
    "make_runtime_factory",
    "new_call_id",
    "stream_response",
]
