"""The provider interface: how the engine talks to any LLM API.

A provider is an object with a ``name`` and two methods::

    async def generate(self, request: ProviderRequest) -> ProviderResponse
    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamChunk]

The engine always calls :meth:`Provider.stream`; ``generate`` serves callers that want one
answer. :class:`BaseProvider` derives either method from the other, so a plugin implements
whichever its wire protocol makes natural. Failures are raised as
:class:`~sa_core.errors.ProviderError` with a code; transport exceptions never escape.

The vocabulary follows the spec (reference.md section 4): requests carry provider-neutral
messages and tool schemas; streams yield chunks typed ``content-delta``, ``content-done``,
``reasoning-delta``, ``reasoning-done``, ``tool-call-start``, ``tool-call-delta``,
``tool-call-done``, ``finish`` and ``error``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

from sa_core.errors import MissingKeyError, ProviderError

if TYPE_CHECKING:
    import ssl

    import httpx

Role = Literal["system", "user", "assistant", "tool"]
FinishReason = Literal["stop", "tool_calls", "length", "content_filter", "error"]
ChunkType = Literal[
    "content-delta",
    "content-done",
    "reasoning-delta",
    "reasoning-done",
    "tool-call-start",
    "tool-call-delta",
    "tool-call-done",
    "finish",
    "error",
]


@dataclass(slots=True)
class ProviderImage:
    """An image sent to or received from a model; ``data`` is base64 without a data: prefix."""

    data: str
    media_type: str = "image/png"
    name: str | None = None
    path: str | None = None


@dataclass(slots=True)
class ProviderToolCall:
    """A tool call as the model made it; ``arguments`` is already parsed JSON.

    ``extra_content`` carries provider round-trip data (a Gemini thought signature, for
    example) that must be sent back unchanged with the call in later requests.
    """

    id: str
    name: str
    arguments: dict[str, Any]
    extra_content: dict[str, Any] | None = None


@dataclass(slots=True)
class ProviderMessage:
    """One provider-neutral message.

    ``images`` carries images of a ``user`` message, or of a ``tool`` result.
    ``reasoning`` / ``reasoning_details`` replay an assistant's thinking (Anthropic signatures
    live in ``reasoning_details``).
    """

    role: Role
    content: str | None = None
    tool_calls: list[ProviderToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    tool_name: str | None = None
    images: list[ProviderImage] = field(default_factory=list)
    reasoning: str | None = None
    reasoning_details: list[dict[str, Any]] | None = None


@dataclass(slots=True)
class ProviderTool:
    """A tool offered to the model: ``parameters`` is a JSON Schema object.

    ``strict``: the arguments must match ``parameters`` exactly (OpenAI's strict function
    calling; a client tool declared ``strict``), where the provider's API has it.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    strict: bool = False


@dataclass(slots=True)
class ReasoningConfig:
    """Requested reasoning: ``effort`` low / medium / high, a token budget, or exclusion."""

    effort: Literal["low", "medium", "high"] | None = None
    max_tokens: int | None = None
    exclude: bool = False


@dataclass(slots=True)
class OutputSchema:
    """The JSON shape a model's final answer must take (a prompt's ``output_schema``).

    Attributes:
        name: a name for the schema (the prompt's, reduced to ``[a-zA-Z0-9_-]``).
        schema: the JSON Schema object.
        strict: whether the schema meets OpenAI's strict-mode rules (every object closed with
            ``additionalProperties: false`` and listing all its properties as required), so
            a provider may ask the API to enforce it exactly.
    """

    name: str
    schema: dict[str, Any]
    strict: bool = False


CacheTTL = Literal["5m", "1h"]


@dataclass(slots=True, frozen=True)
class PromptCache:
    """Prompt caching the engine asks of a provider for one request.

    A provider applies what its API offers and ignores the rest: Anthropic marks the stable
    prefix with ``cache_control`` breakpoints of lifetime ``ttl``; OpenAI and compatible servers
    send ``key`` as ``prompt_cache_key`` (unless ``send_key`` is off); Gemini caches implicitly.

    Attributes:
        key: a stable key for the thread (derived from its id, the same after a restart; a
            child thread has its own).
        ttl: how long a cache entry should live: ``5m``, or ``1h`` when the thread is about to
            wait long (on blocking children or an approval).
        send_key: whether to send ``key`` on the wire (off for servers that reject the field).
    """

    key: str
    ttl: CacheTTL = "5m"
    send_key: bool = True


def _process_env(name: str) -> str | None:
    return os.environ.get(name)


@dataclass(slots=True)
class ProviderRequest:
    """Everything a provider needs for one model call.

    Attributes:
        model: the provider's model id (``ModelDefinition.model``).
        messages: the conversation, system prompt first.
        tools: tools offered to the model.
        tool_choice: ``auto``, ``none``, ``required``, or ``{"name": tool}`` to force one tool.
        parallel_tool_calls: sent with the tools when set; ``None`` keeps the provider
            default. The engine sends the prompt's value, ``False`` unless it allows parallel
            calls.
        reasoning: requested reasoning, if any.
        provider_options: the model definition's ``provider_options`` (``base_url`` etc.)
            with the prompt's merged over them, key by key.
        max_tokens: an output cap, when the model definition sets one.
        user: the thread id, for provider-side abuse tracking.
        env: resolves a variable (API keys): thread env first, then the process environment.
            It is a function, not a mapping, so a request can be logged without leaking keys.
        output_schema: the JSON shape the answer must take, set only for providers that
            declare ``supports_structured_output``; they send it in the API's native field
            (others get a forced ``final_answer`` tool from the engine instead).
        prompt_cache: prompt caching to ask for; ``None`` asks for none (the engine sets it
            from the model's ``prompt_caching`` config, on by default).
        temperature, top_p, seed, stop, frequency_penalty, presence_penalty, verbosity: a
            turn's own settings (``send_message(model_settings=...)``), ``None`` when unset.
            A provider sends each in its API's field where the API has one; they win over
            the same settings in ``provider_options`` (the engine drops those).
    """

    model: str
    messages: list[ProviderMessage]
    tools: list[ProviderTool] = field(default_factory=list)
    tool_choice: str | dict[str, str] = "auto"
    parallel_tool_calls: bool | None = None
    reasoning: ReasoningConfig | None = None
    provider_options: dict[str, Any] = field(default_factory=dict)
    max_tokens: int | None = None
    user: str | None = None
    env: Callable[[str], str | None] = field(default=_process_env, repr=False)
    output_schema: OutputSchema | None = None
    prompt_cache: PromptCache | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: list[str] | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    verbosity: Literal["low", "medium", "high"] | None = None


@dataclass(slots=True)
class Usage:
    """Token usage of one call; ``cost`` in USD when prices are known.

    ``prompt_tokens`` counts every input token, cached or not. Of those, ``cached_tokens``
    were read from the provider's prompt cache and ``cache_write_tokens`` were written to it
    (Anthropic reports writes; OpenAI and Gemini cache without reporting them).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cost: float | None = None
    cache_write_tokens: int = 0


@dataclass(slots=True)
class ProviderResponse:
    """A complete model answer."""

    content: str | None = None
    tool_calls: list[ProviderToolCall] = field(default_factory=list)
    reasoning: str | None = None
    reasoning_details: list[dict[str, Any]] | None = None
    images: list[ProviderImage] = field(default_factory=list)
    finish_reason: FinishReason = "stop"
    usage: Usage = field(default_factory=Usage)
    response_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class StreamChunk:
    """One streamed event. Which fields are set depends on ``type``.

    - ``content-delta`` / ``reasoning-delta``: ``delta``
    - ``reasoning-done``: ``reasoning_details`` (signatures), when any
    - ``tool-call-start``: ``id``, ``name``
    - ``tool-call-delta``: ``id``, ``arguments_delta``
    - ``tool-call-done``: ``id``, ``name``, ``arguments`` (parsed), ``extra_content``
    - ``finish``: ``finish_reason``, ``usage``, ``response_id``
    - ``error``: ``error``, ``code``
    """

    type: ChunkType
    delta: str | None = None
    id: str | None = None
    name: str | None = None
    arguments_delta: str | None = None
    arguments: dict[str, Any] | None = None
    extra_content: dict[str, Any] | None = None
    reasoning_details: list[dict[str, Any]] | None = None
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    response_id: str | None = None
    error: str | None = None
    code: str | None = None


@runtime_checkable
class Provider(Protocol):
    """What the engine needs from a provider."""

    @property
    def name(self) -> str:
        """The name model definitions use in their ``provider`` field."""
        ...

    async def generate(self, request: ProviderRequest) -> ProviderResponse:
        """Return one complete answer."""
        ...

    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamChunk]:
        """Yield the answer as chunks, ending with a ``finish`` chunk."""
        ...


def parse_arguments(raw: str | dict[str, Any] | None) -> dict[str, Any]:
    """Parse tool-call arguments from the wire; invalid JSON becomes ``{"_raw": text}``."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_value": value}


class StreamCollector:
    """Assembles a :class:`ProviderResponse` from chunks handed to it one at a time.

    What :func:`collect_stream` does, for a caller that owns the loop over the stream (the
    engine's guarded model call feeds each chunk straight in, without one more async
    generator between the provider and the assembly).
    """

    __slots__ = ("_response", "_text", "_reasoning", "_calls")

    def __init__(self) -> None:
        self._response = ProviderResponse()
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[str, dict[str, Any]] = {}

    def add(self, chunk: StreamChunk) -> None:
        """Take one chunk.

        Raises:
            ProviderError: ``chunk`` is an ``error`` chunk.
        """
        kind = chunk.type
        if kind == "content-delta":
            self._text.append(chunk.delta or "")
        elif kind == "tool-call-delta":
            self._call(chunk)["args"].append(chunk.arguments_delta or "")
        elif kind == "tool-call-start":
            self._call(chunk)
        elif kind == "tool-call-done":
            entry = self._call(chunk)
            entry["name"] = chunk.name or entry["name"]
            entry["done"] = chunk.arguments
            entry["extra"] = chunk.extra_content
        elif kind == "finish":
            response = self._response
            response.finish_reason = chunk.finish_reason or "stop"
            if chunk.usage is not None:
                response.usage = chunk.usage
            response.response_id = chunk.response_id
        elif kind == "reasoning-delta":
            self._reasoning.append(chunk.delta or "")
        elif kind == "reasoning-done":
            if chunk.reasoning_details:
                response = self._response
                response.reasoning_details = [
                    *(response.reasoning_details or []),
                    *chunk.reasoning_details,
                ]
        elif kind == "error":
            raise ProviderError(chunk.error or "stream error", chunk.code or "unknown")

    def _call(self, chunk: StreamChunk) -> dict[str, Any]:
        """The entry of the tool call ``chunk`` belongs to (created on its first chunk)."""
        return self._calls.setdefault(
            chunk.id or "", {"name": chunk.name, "args": [], "done": None}
        )

    def response(self) -> ProviderResponse:
        """The answer assembled from the chunks taken so far."""
        response = self._response
        response.content = "".join(self._text) or None
        response.reasoning = "".join(self._reasoning) or None
        for call_id, entry in self._calls.items():
            arguments = entry["done"]
            if arguments is None:
                arguments = parse_arguments("".join(entry["args"]))
            response.tool_calls.append(
                ProviderToolCall(call_id, entry["name"] or "", arguments, entry.get("extra"))
            )
        if response.tool_calls and response.finish_reason == "stop":
            response.finish_reason = "tool_calls"
        return response


async def collect_stream(chunks: AsyncIterator[StreamChunk]) -> ProviderResponse:
    """Assemble a :class:`ProviderResponse` from a chunk stream.

    Tool-call argument deltas are concatenated per call id; a ``tool-call-done`` chunk's parsed
    arguments win. An ``error`` chunk raises :class:`ProviderError`.
    """
    collector = StreamCollector()
    async for chunk in chunks:
        collector.add(chunk)
    return collector.response()


async def response_chunks(response: ProviderResponse) -> AsyncIterator[StreamChunk]:
    """Replay a complete response as a chunk stream (for providers that cannot stream)."""
    if response.reasoning:
        yield StreamChunk("reasoning-delta", delta=response.reasoning)
        yield StreamChunk("reasoning-done", reasoning_details=response.reasoning_details)
    if response.content:
        yield StreamChunk("content-delta", delta=response.content)
        yield StreamChunk("content-done")
    for call in response.tool_calls:
        yield StreamChunk("tool-call-start", id=call.id, name=call.name)
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


HTTP_CLIENTS = 16
"""HTTP clients a provider spreads its calls over (see :meth:`BaseProvider.client`)."""
CONNECTIONS_PER_CLIENT = 16
"""Connections each of them pools (all kept alive): 256 calls in flight before any waits."""


class BaseProvider:
    """Convenience base for provider plugins.

    Subclasses set the class attributes and override :meth:`generate`, :meth:`stream`, or both:
    each default derives itself from the other. :meth:`client` hands out the provider
    instance's shared ``httpx.AsyncClient`` objects (connection pooling); tests inject their own
    transport through ``transport=``.
    """

    name: ClassVar[str] = "base"
    key_variable: ClassVar[str | None] = None
    default_base_url: ClassVar[str | None] = None
    supports_tools: ClassVar[bool] = True
    supports_streaming: ClassVar[bool] = True
    supports_structured_output: ClassVar[bool] = False
    """Whether the provider sends ``request.output_schema`` natively (the engine offers a
    forced ``final_answer`` tool to providers without it); see
    :meth:`native_structured_output`."""

    def __init__(
        self,
        *,
        name: str | None = None,
        base_url: str | None = None,
        key_variable: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 600.0,
    ) -> None:
        if name is not None:
            self.name = name  # type: ignore[misc]
        if key_variable is not None:
            self.key_variable = key_variable  # type: ignore[misc]
        self.base_url = base_url or self.default_base_url
        self._transport = transport
        self._timeout = timeout
        self._clients: list[httpx.AsyncClient | None] = [None] * HTTP_CLIENTS
        self._turn = 0
        self._ssl: ssl.SSLContext | None = None

    def client(self) -> httpx.AsyncClient:
        """One of the provider's shared ``httpx.AsyncClient`` objects, created on first use.

        Calls take the provider's :data:`HTTP_CLIENTS` clients in turn, each pooling up to
        :data:`CONNECTIONS_PER_CLIENT` keep-alive connections. One client for every call costs
        CPU quadratic in the calls in flight: httpcore's pool checks every waiting request
        against every connection whenever a request starts or ends, and once it holds more
        than its keep-alive limit it closes each connection that falls idle, so that under a
        few hundred concurrent calls a new connection is opened for nearly every one. Small
        pools keep each check short and every connection reused. The clients share one TLS
        context: each loads the CA bundle otherwise (about 30 ms of CPU per client).
        """
        index = self._turn
        self._turn = (index + 1) % HTTP_CLIENTS
        client = self._clients[index]
        if client is None or client.is_closed:
            import httpx

            limits = httpx.Limits(
                max_connections=CONNECTIONS_PER_CLIENT,
                max_keepalive_connections=CONNECTIONS_PER_CLIENT,
            )
            if self._ssl is None:
                self._ssl = httpx.create_ssl_context()
            client = httpx.AsyncClient(
                transport=self._transport, timeout=self._timeout, limits=limits, verify=self._ssl
            )
            self._clients[index] = client
        return client

    async def aclose(self) -> None:
        """Close the shared HTTP clients."""
        clients, self._clients = self._clients, [None] * HTTP_CLIENTS
        for client in clients:
            if client is not None:
                await client.aclose()

    def resolve_base_url(self, request: ProviderRequest) -> str:
        """``provider_options['base_url']`` (or ``baseUrl``) wins over the configured URL."""
        options = request.provider_options
        url = options.get("base_url") or options.get("baseUrl") or self.base_url
        if not url:
            raise ProviderError(
                f"Provider '{self.name}' has no base URL: set provider_options.base_url "
                "on the model definition.",
                "invalid_request",
                provider=self.name,
            )
        return str(url).rstrip("/")

    def api_key(self, request: ProviderRequest, *, required: bool = True) -> str | None:
        """Resolve the key variable through the request's env; raise when it is missing."""
        variable = request.provider_options.get("key_variable") or self.key_variable
        if not variable:
            return None
        value = request.env(str(variable))
        if not value and required:
            raise MissingKeyError(self.name, str(variable))
        return value or None

    async def generate(self, request: ProviderRequest) -> ProviderResponse:
        """Default: collect :meth:`stream`."""
        return await collect_stream(self.stream(request))

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamChunk]:
        """Default: replay :meth:`generate` as chunks."""
        response = await self.generate(request)
        async for chunk in response_chunks(response):
            yield chunk

    def native_structured_output(self, request: ProviderRequest) -> bool:
        """Whether ``request`` (its tools set, no schema yet) gets its schema natively.

        ``supports_structured_output`` by default; a provider whose API cannot combine its
        structured-output mode with something in the request (tools, say) returns ``False``
        for it, and the engine offers the ``final_answer`` tool instead.
        """
        return self.supports_structured_output

    async def list_models(self, env: Callable[[str], str | None] = _process_env) -> list[str]:
        """Model ids the provider reports; providers with a list endpoint override this."""
        return []


def compute_cost(
    usage: Usage,
    input_price: float | None,
    output_price: float | None,
    cached_price: float | None = None,
    cache_write_price: float | None = None,
) -> float | None:
    """USD cost from per-million-token prices; ``None`` when no price is known.

    Cost = plain prompt x input + cache reads x (cached or input) + cache writes x (cache
    write or input) + completion x output, where plain prompt tokens are the prompt tokens
    neither read from nor written to the cache.
    """
    if input_price is None and output_price is None:
        return None
    cached = min(usage.cached_tokens, usage.prompt_tokens)
    written = min(usage.cache_write_tokens, usage.prompt_tokens - cached)
    plain = usage.prompt_tokens - cached - written
    in_price = input_price or 0.0
    cost = (
        plain * in_price
        + cached * (cached_price if cached_price is not None else in_price)
        + written * (cache_write_price if cache_write_price is not None else in_price)
        + usage.completion_tokens * (output_price or 0.0)
    ) / 1_000_000
    return round(cost, 12)


__all__ = [
    "BaseProvider",
    "Provider",
    "OutputSchema",
    "PromptCache",
    "ProviderImage",
    "ProviderMessage",
    "ProviderRequest",
    "ProviderResponse",
    "ProviderTool",
    "ProviderToolCall",
    "ReasoningConfig",
    "StreamChunk",
    "Usage",
    "StreamCollector",
    "collect_stream",
    "compute_cost",
    "parse_arguments",
    "response_chunks",
]
