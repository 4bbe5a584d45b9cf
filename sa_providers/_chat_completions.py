"""The OpenAI Chat Completions wire protocol, shared by ``openai`` and every compatible vendor.

Vendors differ in a few details (which max-tokens field, how reasoning is requested, whether
reasoning is sent back); :class:`ChatDialect` names those differences so that one codec and one
provider class serve them all.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from sa_core.errors import ProviderError
from sa_core.providers import (
    FinishReason,
    ProviderMessage,
    ProviderRequest,
    ProviderResponse,
    ProviderTool,
    ProviderToolCall,
    ReasoningConfig,
    StreamChunk,
    Usage,
    parse_arguments,
)
from sa_providers._http import HTTPProvider, SSEEvent, deep_merge, sse_json, status_code_to_error
from sa_providers._stream import (
    ToolCallBuffer,
    closing,
    data_url,
    dump_arguments,
    ended_early,
    new_call_id,
    tool_images_note,
)

_REASONING_MODEL = re.compile(r"^(o\d|gpt-5)")
_NO_PARALLEL_FIELD = re.compile(r"^o\d")
"""OpenAI's o-series models reject ``parallel_tool_calls`` on Chat Completions (HTTP 400)."""
_EFFORT_BUDGETS = ((2048, "low"), (8192, "medium"))
_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "end_turn": "stop",
    "length": "length",
    "max_tokens": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "tool_use": "tool_calls",
    "content_filter": "content_filter",
    "error": "error",
}


@dataclass(frozen=True, slots=True)
class ChatDialect:
    """How one vendor's Chat Completions endpoint differs from the others.

    Attributes:
        max_tokens_field: ``max_tokens``, ``max_completion_tokens``, or ``auto``
            (``max_completion_tokens`` for OpenAI reasoning models, else ``max_tokens``).
        reasoning_style: ``effort`` sends ``reasoning_effort``; ``openrouter`` sends a
            ``reasoning`` object (effort or token budget, exclude).
        echo_reasoning_content: send an assistant's reasoning back as ``reasoning_content``.
        echo_reasoning_details: send an assistant's ``reasoning_details`` back (OpenRouter).
        echo_extra_content: send tool calls' ``extra_content`` back (Gemini's compatible API).
        stream_usage: ask for usage in streams (``stream_options.include_usage``).
        send_user: send the thread id as ``user``.
        send_parallel_tool_calls: send ``parallel_tool_calls`` with the tools (turn it off for
            servers that reject the field; the model's own default then applies).
        send_prompt_cache_key: send the thread's ``prompt_cache_key`` when the request asks
            for prompt caching (turn it off for servers that reject the field; a model can
            also turn it off with ``prompt_caching={"cache_key": False}``).
        extra_body: fields merged into every request body.

    """

    max_tokens_field: Literal["max_tokens", "max_completion_tokens", "auto"] = "max_tokens"
    reasoning_style: Literal["effort", "openrouter"] = "effort"
    echo_reasoning_content: bool = False
    echo_reasoning_details: bool = False
    echo_extra_content: bool = False
    stream_usage: bool = True
    send_user: bool = False
    send_parallel_tool_calls: bool = True
    send_prompt_cache_key: bool = True
    extra_body: Mapping[str, Any] = field(default_factory=dict)


def is_reasoning_model(model: str) -> bool:
    """Whether an OpenAI model id names a reasoning model (o-series, gpt-5)."""
    return bool(_REASONING_MODEL.match(model))


def effort_for(reasoning: ReasoningConfig) -> str | None:
    """Return the effort level a reasoning config asks for (a budget maps to a level)."""
    if reasoning.effort:
        return reasoning.effort
    if reasoning.max_tokens is None:
        return None
    for limit, level in _EFFORT_BUDGETS:
        if reasoning.max_tokens <= limit:
            return level
    return "high"


def map_finish(reason: str | None, has_tool_calls: bool) -> FinishReason:
    """Map a Chat Completions finish reason to the spec's vocabulary."""
    mapped = _FINISH.get(reason or "stop", "stop")
    return "tool_calls" if has_tool_calls and mapped == "stop" else mapped


def cache_key(request: ProviderRequest) -> str | None:
    """The ``prompt_cache_key`` to send: the thread's, unless caching or the key is off."""
    cache = request.prompt_cache
    return cache.key if cache is not None and cache.send_key else None


def chat_usage(raw: Any) -> Usage:
    """Read a Chat Completions ``usage`` object (OpenRouter's ``cost`` included).

    Cache reads are ``prompt_tokens_details.cached_tokens`` (DeepSeek:
    ``prompt_cache_hit_tokens``); cache writes ``prompt_tokens_details.cache_write_tokens``
    where a router reports them (OpenRouter for Anthropic models).
    """
    if not isinstance(raw, dict):
        return Usage()
    prompt = int(raw.get("prompt_tokens") or 0)
    completion = int(raw.get("completion_tokens") or 0)
    prompt_details = raw.get("prompt_tokens_details") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    cost = raw.get("cost")
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=int(raw.get("total_tokens") or prompt + completion),
        reasoning_tokens=int(completion_details.get("reasoning_tokens") or 0),
        cached_tokens=int(
            prompt_details.get("cached_tokens") or raw.get("prompt_cache_hit_tokens") or 0
        ),
        cost=float(cost) if isinstance(cost, int | float) else None,
        cache_write_tokens=int(prompt_details.get("cache_write_tokens") or 0),
    )


def body_error(data: Any, provider: str) -> ProviderError | None:
    """Return the error reported inside a successful response body (OpenRouter does this)."""
    error = data.get("error") if isinstance(data, dict) else None
    if not error:
        return None
    message = error.get("message") if isinstance(error, dict) else str(error)
    raw_code = error.get("code") if isinstance(error, dict) else None
    status = raw_code if isinstance(raw_code, int) else None
    code = status_code_to_error(status) if status else "server_error"
    return ProviderError(f"{provider}: {message}", code, status, provider=provider)


# ------------------------------------------------------------------------------------------
# Requests
# ------------------------------------------------------------------------------------------


def _user_content(message: ProviderMessage) -> str | list[dict[str, Any]]:
    if not message.images:
        return message.content or ""
    parts: list[dict[str, Any]] = []
    if message.content:
        parts.append({"type": "text", "text": message.content})
    parts.extend(
        {"type": "image_url", "image_url": {"url": data_url(image)}} for image in message.images
    )
    return parts


def _assistant(message: ProviderMessage, dialect: ChatDialect) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant"}
    if message.content or not message.tool_calls:
        out["content"] = message.content or ""
    if message.tool_calls:
        calls = []
        for call in message.tool_calls:
            wire: dict[str, Any] = {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": dump_arguments(call.arguments)},
            }
            if dialect.echo_extra_content and call.extra_content:
                wire["extra_content"] = call.extra_content
            calls.append(wire)
        out["tool_calls"] = calls
    if dialect.echo_reasoning_content and message.reasoning:
        out["reasoning_content"] = message.reasoning
    if dialect.echo_reasoning_details and message.reasoning_details:
        out["reasoning_details"] = message.reasoning_details
    return out


def chat_messages(messages: list[ProviderMessage], dialect: ChatDialect) -> list[dict[str, Any]]:
    """Convert neutral messages; tool-result images follow the tool results as a user message."""
    out: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for message in messages:
        if message.role != "tool" and images:
            out.append({"role": "user", "content": images})
            images = []
        if message.role == "system":
            out.append({"role": "system", "content": message.content or ""})
        elif message.role == "user":
            out.append({"role": "user", "content": _user_content(message)})
        elif message.role == "assistant":
            out.append(_assistant(message, dialect))
        else:
            call_id = message.tool_call_id
            out.append({"role": "tool", "tool_call_id": call_id, "content": message.content or ""})
            if message.images:
                note = tool_images_note(message.tool_name, call_id)
                images.append({"type": "text", "text": note})
                images.extend(
                    {"type": "image_url", "image_url": {"url": data_url(image)}}
                    for image in message.images
                )
    if images:
        out.append({"role": "user", "content": images})
    return out


def chat_tools(tools: list[ProviderTool]) -> list[dict[str, Any]]:
    """Tool schemas as Chat Completions functions."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "strict": tool.strict,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        for tool in tools
    ]


def chat_tool_choice(choice: str | dict[str, str]) -> str | dict[str, Any]:
    """``auto`` / ``none`` / ``required`` pass through; ``{"name": x}`` forces one function."""
    if isinstance(choice, dict):
        return {"type": "function", "function": {"name": choice["name"]}}
    return choice


def chat_body(request: ProviderRequest, dialect: ChatDialect, *, stream: bool) -> dict[str, Any]:
    """Build a Chat Completions request body (``provider_options`` are merged by the caller)."""
    body: dict[str, Any] = {
        "model": request.model,
        "messages": chat_messages(request.messages, dialect),
    }
    if request.tools:
        body["tools"] = chat_tools(request.tools)
        body["tool_choice"] = chat_tool_choice(request.tool_choice)
        if (
            request.parallel_tool_calls is not None
            and dialect.send_parallel_tool_calls
            and not _NO_PARALLEL_FIELD.match(request.model)
        ):
            body["parallel_tool_calls"] = request.parallel_tool_calls
    if (output := request.output_schema) is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": output.name, "schema": output.schema, "strict": output.strict},
        }
    if request.max_tokens is not None:
        name = dialect.max_tokens_field
        if name == "auto":
            reasoning = is_reasoning_model(request.model)
            name = "max_completion_tokens" if reasoning else "max_tokens"
        body[name] = request.max_tokens
    if request.reasoning is not None:
        _add_reasoning(body, request.reasoning, dialect)
    _add_sampling(body, request)
    if dialect.send_user and request.user:
        body["user"] = request.user
    if dialect.send_prompt_cache_key and (key := cache_key(request)) is not None:
        body["prompt_cache_key"] = key
    if stream:
        body["stream"] = True
        if dialect.stream_usage:
            body["stream_options"] = {"include_usage": True}
    return deep_merge(body, json.loads(json.dumps(dict(dialect.extra_body))))


SAMPLING_FIELDS = (
    "temperature", "top_p", "seed", "stop", "frequency_penalty", "presence_penalty", "verbosity",
)  # fmt: skip
"""A turn's settings Chat Completions takes, under the same names."""


def _add_sampling(body: dict[str, Any], request: ProviderRequest) -> None:
    for name in SAMPLING_FIELDS:
        if (value := getattr(request, name)) is not None:
            body[name] = value


def _add_reasoning(body: dict[str, Any], reasoning: ReasoningConfig, dialect: ChatDialect) -> None:
    if dialect.reasoning_style == "openrouter":
        config: dict[str, Any] = {}
        if reasoning.max_tokens is not None:
            config["max_tokens"] = reasoning.max_tokens
        elif reasoning.effort:
            config["effort"] = reasoning.effort
        if reasoning.exclude:
            config["exclude"] = True
        body["reasoning"] = config
    elif effort := effort_for(reasoning):
        body["reasoning_effort"] = effort


# ------------------------------------------------------------------------------------------
# Responses
# ------------------------------------------------------------------------------------------


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(p.get("text", "") for p in value if isinstance(p, dict)) or None
    return None


def _details_text(details: list[dict[str, Any]]) -> str | None:
    texts = [d.get("text") or d.get("summary") for d in details]
    return "".join(t for t in texts if isinstance(t, str)) or None


def parse_chat_response(data: Any, provider: str) -> ProviderResponse:
    """Read a non-streamed Chat Completions answer."""
    if (error := body_error(data, provider)) is not None:
        raise error
    choices = data.get("choices") if isinstance(data, dict) else None
    if not choices:
        raise ProviderError(f"{provider}: response has no choices", "unknown", provider=provider)
    choice = choices[0]
    message = choice.get("message") or {}
    calls = [
        ProviderToolCall(
            call.get("id") or new_call_id(),
            (call.get("function") or {}).get("name", ""),
            parse_arguments((call.get("function") or {}).get("arguments")),
            call.get("extra_content"),
        )
        for call in message.get("tool_calls") or []
    ]
    details = message.get("reasoning_details") or None
    reasoning = _text(message.get("reasoning_content")) or _text(message.get("reasoning"))
    return ProviderResponse(
        content=_text(message.get("content")) or _text(message.get("refusal")),
        tool_calls=calls,
        reasoning=reasoning or (_details_text(details) if details else None),
        reasoning_details=details,
        finish_reason=map_finish(choice.get("finish_reason"), bool(calls)),
        usage=chat_usage(data.get("usage")),
        response_id=data.get("id"),
        metadata={k: data[k] for k in ("model", "provider") if data.get(k)},
    )


@dataclass(slots=True)
class _ChatStream:
    provider: str
    tools: ToolCallBuffer = field(default_factory=ToolCallBuffer)
    details: dict[Any, dict[str, Any]] = field(default_factory=dict)
    keys: dict[int, Any] = field(default_factory=dict)
    reasoning_open: bool = False
    reasoning_fields: bool = False
    content_started: bool = False
    finish: str | None = None
    usage: Usage | None = None
    response_id: str | None = None

    def feed(self, data: dict[str, Any]) -> list[StreamChunk]:
        self.response_id = data.get("id") or self.response_id
        if data.get("usage"):
            self.usage = chat_usage(data["usage"])
        out: list[StreamChunk] = []
        for choice in data.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            out.extend(self._delta(choice.get("delta") or {}))
            self.finish = choice.get("finish_reason") or self.finish
        return out

    def _delta(self, delta: dict[str, Any]) -> list[StreamChunk]:
        out: list[StreamChunk] = []
        text = _text(delta.get("reasoning_content")) or _text(delta.get("reasoning"))
        self.reasoning_fields = self.reasoning_fields or text is not None
        for piece in delta.get("reasoning_details") or []:
            if isinstance(piece, dict):
                self._merge_detail(piece)
                detail_text = None if self.reasoning_fields else _details_text([piece])
                if detail_text:
                    out.append(self._reasoning(detail_text))
        if text:
            out.append(self._reasoning(text))
        content = _text(delta.get("content"))
        if content:
            out.extend(self.flush_reasoning())
            self.content_started = True
            out.append(StreamChunk("content-delta", delta=content))
        for call in delta.get("tool_calls") or []:
            out.extend(self.flush_reasoning())
            out.extend(self._tool(call))
        return out

    def _reasoning(self, text: str) -> StreamChunk:
        self.reasoning_open = True
        return StreamChunk("reasoning-delta", delta=text)

    def _merge_detail(self, piece: dict[str, Any]) -> None:
        index = piece.get("index")
        key = (index, piece.get("type")) if isinstance(index, int) else len(self.details)
        current = self.details.get(key)
        if current is None:
            self.details[key] = dict(piece)
            return
        for name, value in piece.items():
            old = current.get(name)
            if name in ("text", "summary", "data", "signature") and isinstance(old, str):
                current[name] = old + (value or "")
            elif value is not None:
                current[name] = value

    def _key(self, call: dict[str, Any]) -> Any:
        index, call_id = call.get("index"), call.get("id")
        if index is None:
            return call_id or self.tools.last_key or 0
        key = self.keys.get(index, index)
        if call_id and self.tools.id_of(key) not in (None, call_id):
            key = (index, call_id)  # a server that reuses one index for several calls
        self.keys[index] = key
        return key

    def _tool(self, call: dict[str, Any]) -> list[StreamChunk]:
        function = call.get("function") or {}
        key = self._key(call)
        out = self.tools.start(key, call.get("id"), function.get("name"), call.get("extra_content"))
        if not out and call.get("extra_content"):
            self.tools.set_extra(key, call["extra_content"])
        arguments = function.get("arguments")
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments)
        if isinstance(arguments, str):
            out.extend(self.tools.delta(key, arguments))
        return out

    def flush_reasoning(self, *, final: bool = False) -> list[StreamChunk]:
        details = list(self.details.values()) if final and self.details else None
        if not self.reasoning_open and details is None:
            return []
        self.reasoning_open = False
        return [StreamChunk("reasoning-done", reasoning_details=details)]

    def close(self) -> list[StreamChunk]:
        out = self.flush_reasoning(final=True)
        if self.content_started:
            out.append(StreamChunk("content-done"))
        out.extend(self.tools.finish_all())
        out.append(
            StreamChunk(
                "finish",
                finish_reason=map_finish(self.finish, bool(self.tools)),
                usage=self.usage or Usage(),
                response_id=self.response_id,
            )
        )
        return out


async def chat_stream_chunks(
    events: AsyncIterator[SSEEvent],
    provider: str,
    bad_event: Callable[[str], ProviderError],
) -> AsyncIterator[StreamChunk]:
    """Turn a Chat Completions event stream into spec chunks."""
    state = _ChatStream(provider)
    async for event in events:
        if event.data.strip() == "[DONE]":
            break
        data = sse_json(event, bad_event)
        if (error := body_error(data, provider)) is not None:
            yield StreamChunk("error", error=str(error), code=error.code)
            return
        for chunk in state.feed(data):
            yield chunk
    else:
        if state.finish is None:
            yield ended_early(provider)
            return
    for chunk in state.close():
        yield chunk


class ChatCompletionsProvider(HTTPProvider):
    """A provider speaking Chat Completions at ``{base_url}/chat/completions``."""

    dialect: ChatDialect = ChatDialect()
    supports_structured_output = True

    def __init__(self, *, dialect: ChatDialect | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if dialect is not None:
            self.dialect = dialect

    def chat_body(self, request: ProviderRequest, *, stream: bool) -> dict[str, Any]:
        """Build the full request body, ``provider_options`` merged."""
        return self.passthrough(chat_body(request, self.dialect, stream=stream), request)

    async def generate(self, request: ProviderRequest) -> ProviderResponse:
        """One Chat Completions call."""
        endpoint = self.endpoint(request)
        body = self.chat_body(request, stream=False)
        data = await self.post_json(endpoint, "/chat/completions", body)
        return parse_chat_response(data, self.name)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamChunk]:
        """One streamed Chat Completions call."""
        endpoint = self.endpoint(request)
        body = self.chat_body(request, stream=True)
        bad = partial(self.bad_response, endpoint)
        async with (
            closing(self.post_sse(endpoint, "/chat/completions", body)) as events,
            closing(chat_stream_chunks(events, self.name, bad)) as chunks,
        ):
            async for chunk in chunks:
                yield chunk

    async def list_models(self, env: Callable[[str], str | None] | None = None) -> list[str]:
        """Model ids from ``GET {base_url}/models``."""
        endpoint = self.endpoint(self.listing_request(env))
        data = await self.get_json(endpoint, "/models")
        items = data.get("data") if isinstance(data, dict) else data
        return sorted(str(m["id"]) for m in items or [] if isinstance(m, dict) and "id" in m)
