"""The scripted providers: :class:`TestProvider` (a script) and :class:`FunctionProvider`."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import ClassVar

from sa_core.embeddings import EmbeddingRequest, EmbeddingResponse
from sa_core.errors import ProviderError, ScriptExhaustedError
from sa_core.providers import (
    BaseProvider,
    ProviderRequest,
    ProviderResponse,
    StreamChunk,
)
from sa_core.testing.answers import (
    PromptSizes,
    build_response,
    raise_scripted_error,
    replay,
    stream_response,
)
from sa_core.testing.embeddings import embedding_response
from sa_core.testing.script import (
    SCRIPTED_FIELDS,
    UNSCRIPTED_REPLY,
    FunctionResult,
    ScriptedResponse,
    TestScript,
    as_usage,
)

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
        self.embedding_requests: list[EmbeddingRequest] = []
        """The embedding calls received (kept like :attr:`requests`)."""
        self.max_recorded = max_recorded
        self._calls = 0
        self._sizes = PromptSizes()

    def _record(self, request: ProviderRequest) -> None:
        """Count a request and keep it, dropping the oldest beyond ``max_recorded``."""
        self._calls += 1
        self.requests.append(request)
        limit = self.max_recorded
        if limit is not None and len(self.requests) > limit:
            del self.requests[: len(self.requests) - limit]

    async def embed(self, request: EmbeddingRequest) -> EmbeddingResponse:
        """Deterministic vectors (:func:`~sa_core.testing.embeddings.text_vector`), offline.

        Any model defined with ``kind="embedding"`` on this provider gets them: texts that
        share words or parts of words get similar vectors.
        """
        self.embedding_requests.append(request)
        limit = self.max_recorded
        if limit is not None and len(self.embedding_requests) > limit:
            del self.embedding_requests[: len(self.embedding_requests) - limit]
        return embedding_response(request)

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
            for chunk in replay(response, chunk_size):
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
        responses = self._script  # read in place: ``responses`` returns a copy
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
            raise_scripted_error(scripted.error, self.name)
        script = self._script
        chunk_size = script.chunk_size if script is not None else None
        chunk_delay = script.chunk_delay if script is not None else 0.0
        return build_response(scripted, request, self._sizes), chunk_size, chunk_delay


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
            raise_scripted_error(scripted.error, self.name)
        return build_response(scripted, request, self._sizes), self.chunk_size, self.chunk_delay


def _to_scripted(result: object) -> ScriptedResponse:
    if isinstance(result, ScriptedResponse):
        return result
    if isinstance(result, str):
        return ScriptedResponse(content=result)
    if isinstance(result, Mapping):
        unknown = sorted(set(result) - SCRIPTED_FIELDS)
        if unknown:
            raise TypeError(
                f"FunctionProvider: unknown keys {unknown} in the returned dict; use "
                f"{sorted(SCRIPTED_FIELDS)}"
            )
        options = dict(result)
        options["usage"] = as_usage(options.get("usage"))
        options["tool_calls"] = list(options.get("tool_calls") or [])
        return ScriptedResponse(**options)
    raise TypeError(
        "FunctionProvider: the function must return a str, a dict, a ScriptedResponse or a "
        f"ProviderResponse, not {type(result).__name__}"
    )
