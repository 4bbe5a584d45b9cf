"""Scripts for the test providers: :class:`TestScript`, its entries and input expectations."""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeAlias

from sa_core.providers import (
    FinishReason,
    ProviderImage,
    ProviderRequest,
    ProviderResponse,
    ProviderToolCall,
    Usage,
    parse_arguments,
)

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


def as_usage(usage: UsageSpec | None) -> Usage | None:
    """A :class:`Usage` from a usage spec (a mapping of its fields), or ``None``."""
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


SCRIPTED_FIELDS: frozenset[str] = frozenset(f.name for f in fields(ScriptedResponse))

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
                usage=as_usage(usage),
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
                tool_calls=[to_tool_call(call) for call in calls],
                finish_reason="tool_calls",
                usage=as_usage(usage),
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
                usage=as_usage(usage),
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

    def __getitem__(self, index: int) -> ScriptedResponse:
        """The scripted answer at ``index`` (the script's own, not a copy)."""
        return self._responses[index]

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


def fresh_copy(value: Any) -> Any:
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
            copied[key] = item if isinstance(item, _SCALARS) else fresh_copy(item)
        return copied
    if kind is list:
        return [item if isinstance(item, _SCALARS) else fresh_copy(item) for item in value]
    return copy.deepcopy(value)


def to_tool_call(spec: ToolCallSpec) -> ProviderToolCall:
    """Normalise a tool-call spec into a fresh ProviderToolCall (copying its arguments)."""
    if isinstance(spec, ProviderToolCall):
        return ProviderToolCall(
            spec.id or new_call_id(),
            spec.name,
            fresh_copy(spec.arguments),
            fresh_copy(spec.extra_content),
        )
    if "name" not in spec:
        raise ValueError(f"A scripted tool call needs a 'name': {dict(spec)!r}")
    raw = spec.get("arguments")
    arguments = fresh_copy(raw) if isinstance(raw, Mapping) else parse_arguments(raw)
    extra = spec.get("extra_content")
    return ProviderToolCall(
        str(spec.get("id") or new_call_id()),
        str(spec["name"]),
        dict(arguments),
        fresh_copy(dict(extra)) if extra is not None else None,
    )
