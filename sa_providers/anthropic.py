"""The ``anthropic`` provider: the Anthropic Messages API over httpx.

Thinking blocks come back with signatures that must be sent back unchanged with later requests.
They travel in ``reasoning_details`` as ``reasoning.text`` entries (``text`` + ``signature``)
and ``reasoning.encrypted`` entries (redacted thinking), both of format
``anthropic-claude-v1`` — the same shape OpenRouter uses, so details survive either route.
A reasoning effort or token budget enables extended thinking with a matching budget.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from sa_core.errors import ProviderError
from sa_core.providers import (
    FinishReason,
    PromptCache,
    ProviderMessage,
    ProviderRequest,
    ProviderResponse,
    ProviderToolCall,
    ReasoningConfig,
    StreamChunk,
    Usage,
    parse_arguments,
)
from sa_hooks import hookimpl
from sa_providers._http import HTTPProvider, SSEEvent, error_code_from_name, sse_json
from sa_providers._stream import ToolCallBuffer, closing, ended_early

FORMAT = "anthropic-claude-v1"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
MAX_BREAKPOINTS = 4
"""The most ``cache_control`` breakpoints one Messages request may carry."""
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})
EFFORT_BUDGETS = {"low": 2048, "medium": 8192, "high": 16384}
_STOP: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


def thinking_budget(reasoning: ReasoningConfig | None) -> int | None:
    """Return the thinking budget a reasoning config asks for (at least 1024 tokens)."""
    if reasoning is None:
        return None
    if reasoning.max_tokens is not None:
        return max(1024, reasoning.max_tokens)
    return EFFORT_BUDGETS.get(reasoning.effort or "")


def _thinking_blocks(message: ProviderMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for detail in message.reasoning_details or []:
        if detail.get("format") != FORMAT:
            continue
        if detail.get("type") == "reasoning.text" and detail.get("signature"):
            blocks.append(
                {
                    "type": "thinking",
                    "thinking": detail.get("text") or "",
                    "signature": detail["signature"],
                }
            )
        elif detail.get("type") == "reasoning.encrypted" and detail.get("data"):
            blocks.append({"type": "redacted_thinking", "data": detail["data"]})
    return blocks


def _image_blocks(message: ProviderMessage) -> list[dict[str, Any]]:
    return [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": image.media_type, "data": image.data},
        }
        for image in message.images
    ]


def _text_blocks(text: str | None) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}] if text else []


def _blocks(message: ProviderMessage) -> tuple[str, list[dict[str, Any]]]:
    if message.role == "assistant":
        blocks = _thinking_blocks(message) + _text_blocks(message.content)
        blocks += [
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
            for call in message.tool_calls
        ]
        return "assistant", blocks
    if message.role == "tool":
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
        content = _text_blocks(message.content) + _image_blocks(message)
        if content:
            result["content"] = content
        return "user", [result]
    return "user", _text_blocks(message.content) + _image_blocks(message)


def anthropic_messages(
    messages: list[ProviderMessage],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split neutral messages into ``system`` blocks and merged same-role ``messages``."""
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system" and not out:
            system.extend(_text_blocks(message.content))
            continue
        role, blocks = _blocks(message)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return system, out


def _tool_choice(request: ProviderRequest) -> dict[str, Any]:
    choice = request.tool_choice
    if isinstance(choice, dict):
        wire: dict[str, Any] = {"type": "tool", "name": choice["name"]}
    else:
        wire = {"type": {"required": "any"}.get(choice, choice)}
    if request.parallel_tool_calls is not None and wire["type"] != "none":
        wire["disable_parallel_tool_use"] = not request.parallel_tool_calls
    return wire


def anthropic_body(request: ProviderRequest, *, stream: bool) -> dict[str, Any]:
    """Build a Messages request body (``provider_options`` are merged by the caller).

    The cached prefix comes first and in the API's cache order (tools, system, messages), so
    the bytes of a thread's requests agree up to the last ``cache_control`` breakpoint; the
    fields that may change per step (``tool_choice``, ``thinking``) follow the messages.
    """
    system, messages = anthropic_messages(request.messages)
    max_tokens = request.max_tokens or DEFAULT_MAX_TOKENS
    body: dict[str, Any] = {"model": request.model}
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
    if system:
        body["system"] = system
    body["messages"] = messages
    if request.prompt_cache is not None:
        add_cache_breakpoints(body, request.prompt_cache)
    if request.tools:
        body["tool_choice"] = _tool_choice(request)
    budget = thinking_budget(request.reasoning)
    if budget is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        if max_tokens <= budget:
            max_tokens = budget + DEFAULT_MAX_TOKENS
    body["max_tokens"] = max_tokens
    if request.temperature is not None:  # a turn's settings the Messages API takes
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.stop is not None:
        body["stop_sequences"] = request.stop
    if request.user:
        body["metadata"] = {"user_id": request.user}
    if stream:
        body["stream"] = True
    return body


def cache_control(ttl: str) -> dict[str, str]:
    """A ``cache_control`` marker: ephemeral, with ``ttl`` spelled out only for ``1h``."""
    return {"type": "ephemeral", "ttl": ttl} if ttl != "5m" else {"type": "ephemeral"}


def _last_cacheable(blocks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The last block that may carry ``cache_control`` (thinking blocks may not)."""
    found: dict[str, Any] | None = None
    for block in reversed(blocks):
        if block.get("type") not in _UNMARKABLE:
            found = block
            break
    return found


def add_cache_breakpoints(body: dict[str, Any], cache: PromptCache) -> None:
    """Mark the stable prefix of a Messages body with at most four ``cache_control`` breakpoints.

    In cache order: the last tool (the tool definitions), the first system block (the system
    prompt), the last system block when there are more (the subagent listing, which changes
    only when a child does), and the last block of the newest message: that one moves as the
    conversation grows, so each step reads what the previous one wrote.
    """
    marker = cache_control(cache.ttl)
    targets: list[dict[str, Any]] = []
    if body.get("tools"):
        targets.append(body["tools"][-1])
    system = body.get("system") or []
    targets += [system[0], system[-1]] if len(system) > 1 else system
    for message in reversed(body.get("messages") or []):
        block = _last_cacheable(message["content"])
        if block is not None:
            targets.append(block)
            break
    for target in targets[:MAX_BREAKPOINTS]:
        target["cache_control"] = dict(marker)


def anthropic_usage(raw: Any, previous: Usage | None = None) -> Usage:
    """Read a Messages ``usage`` object; streamed deltas update ``previous``.

    ``prompt_tokens`` is every input token: uncached ``input_tokens`` plus cache reads
    (``cache_read_input_tokens``, kept as ``cached_tokens``) and cache writes
    (``cache_creation_input_tokens``, kept as ``cache_write_tokens``).
    """
    usage = Usage()
    if previous is not None:
        usage.prompt_tokens, usage.cached_tokens = previous.prompt_tokens, previous.cached_tokens
        usage.cache_write_tokens = previous.cache_write_tokens
    if not isinstance(raw, dict):
        return usage
    if "input_tokens" in raw:
        cached = int(raw.get("cache_read_input_tokens") or 0)
        created = int(raw.get("cache_creation_input_tokens") or 0)
        usage.prompt_tokens = int(raw.get("input_tokens") or 0) + cached + created
        usage.cached_tokens = cached
        usage.cache_write_tokens = created
    usage.completion_tokens = int(raw.get("output_tokens") or 0)
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens
    return usage


def map_stop(reason: str | None, has_tool_calls: bool) -> FinishReason:
    """Map a Messages ``stop_reason`` to the spec's finish reason."""
    mapped = _STOP.get(reason or "end_turn", "stop")
    return "tool_calls" if has_tool_calls and mapped == "stop" else mapped


def _thinking_detail(block: dict[str, Any]) -> dict[str, Any]:
    if block.get("type") == "redacted_thinking":
        return {"type": "reasoning.encrypted", "data": block.get("data", ""), "format": FORMAT}
    return {
        "type": "reasoning.text",
        "text": block.get("thinking", ""),
        "signature": block.get("signature", ""),
        "format": FORMAT,
    }


def parse_anthropic_response(data: Any, provider: str) -> ProviderResponse:
    """Read a non-streamed Messages answer."""
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        raise ProviderError(f"{provider}: response has no content", "unknown", provider=provider)
    text: list[str] = []
    reasoning: list[str] = []
    details: list[dict[str, Any]] = []
    calls: list[ProviderToolCall] = []
    for block in data["content"]:
        kind = block.get("type")
        if kind == "text":
            text.append(block.get("text", ""))
        elif kind in ("thinking", "redacted_thinking"):
            reasoning.append(block.get("thinking", ""))
            details.append(_thinking_detail(block))
        elif kind == "tool_use":
            calls.append(
                ProviderToolCall(block["id"], block["name"], parse_arguments(block.get("input")))
            )
    return ProviderResponse(
        content="".join(text) or None,
        tool_calls=calls,
        reasoning="".join(reasoning) or None,
        reasoning_details=details or None,
        finish_reason=map_stop(data.get("stop_reason"), bool(calls)),
        usage=anthropic_usage(data.get("usage")),
        response_id=data.get("id"),
        metadata={"model": data["model"]} if data.get("model") else {},
    )


@dataclass(slots=True)
class _AnthropicStream:
    show_reasoning: bool
    tools: ToolCallBuffer = field(default_factory=ToolCallBuffer)
    blocks: dict[int, dict[str, Any]] = field(default_factory=dict)
    has_text: bool = False
    stop_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    response_id: str | None = None

    def feed(self, data: dict[str, Any]) -> list[StreamChunk]:
        kind = data.get("type")
        index = data.get("index", 0)
        if kind == "message_start":
            message = data.get("message") or {}
            self.response_id = message.get("id")
            self.usage = anthropic_usage(message.get("usage"))
        elif kind == "content_block_start":
            return self._start(index, dict(data.get("content_block") or {}))
        elif kind == "content_block_delta":
            return self._delta(index, data.get("delta") or {})
        elif kind == "content_block_stop":
            return self._stop(index)
        elif kind == "message_delta":
            self.stop_reason = (data.get("delta") or {}).get("stop_reason") or self.stop_reason
            self.usage = anthropic_usage(data.get("usage"), self.usage)
        return []

    def _start(self, index: int, block: dict[str, Any]) -> list[StreamChunk]:
        self.blocks[index] = block
        if block.get("type") == "tool_use":
            return self.tools.start(index, block.get("id"), block.get("name"))
        if block.get("type") == "text" and block.get("text"):
            self.has_text = True
            return [StreamChunk("content-delta", delta=block["text"])]
        return []

    def _delta(self, index: int, delta: dict[str, Any]) -> list[StreamChunk]:
        kind = delta.get("type")
        block = self.blocks.setdefault(index, {})
        if kind == "text_delta" and delta.get("text"):
            self.has_text = True
            return [StreamChunk("content-delta", delta=delta["text"])]
        if kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            if self.show_reasoning and delta.get("thinking"):
                return [StreamChunk("reasoning-delta", delta=delta["thinking"])]
        elif kind == "signature_delta":
            block["signature"] = block.get("signature", "") + delta.get("signature", "")
        elif kind == "input_json_delta":
            return self.tools.delta(index, delta.get("partial_json", ""))
        return []

    def _stop(self, index: int) -> list[StreamChunk]:
        block = self.blocks.get(index, {})
        if block.get("type") == "tool_use":
            return self.tools.finish(index)
        if block.get("type") in ("thinking", "redacted_thinking"):
            return [StreamChunk("reasoning-done", reasoning_details=[_thinking_detail(block)])]
        return []

    def close(self) -> list[StreamChunk]:
        out = [StreamChunk("content-done")] if self.has_text else []
        out.extend(self.tools.finish_all())
        out.append(
            StreamChunk(
                "finish",
                finish_reason=map_stop(self.stop_reason, bool(self.tools)),
                usage=self.usage,
                response_id=self.response_id,
            )
        )
        return out


async def anthropic_stream_chunks(
    events: AsyncIterator[SSEEvent],
    provider: str,
    bad_event: Callable[[str], ProviderError],
    *,
    show_reasoning: bool = True,
) -> AsyncIterator[StreamChunk]:
    """Turn a Messages event stream into spec chunks."""
    state = _AnthropicStream(show_reasoning)
    async for event in events:
        data = sse_json(event, bad_event)
        kind = data.get("type") or event.event
        if kind == "error":
            error = data.get("error") or {}
            code = error_code_from_name(error.get("type"))
            message = f"{provider}: {error.get('message') or 'stream error'}"
            yield StreamChunk("error", error=message, code=code)
            return
        if kind == "message_stop":
            break
        for chunk in state.feed(data):
            yield chunk
    else:
        if state.stop_reason is None:
            yield ended_early(provider)
            return
    for chunk in state.close():
        yield chunk


class AnthropicProvider(HTTPProvider):
    """Anthropic's Messages API over httpx."""

    name = "anthropic"
    key_variable = "ANTHROPIC_API_KEY"
    default_base_url = "https://api.anthropic.com/v1"
    default_headers = {"anthropic-version": API_VERSION}

    def auth_headers(self, key: str | None) -> dict[str, str]:
        """Authenticate with ``x-api-key``."""
        return {"x-api-key": key} if key else {}

    def body(self, request: ProviderRequest, *, stream: bool) -> dict[str, Any]:
        """Build the full request body, ``provider_options`` merged."""
        return self.passthrough(anthropic_body(request, stream=stream), request)

    async def generate(self, request: ProviderRequest) -> ProviderResponse:
        """One Messages call."""
        endpoint = self.endpoint(request)
        data = await self.post_json(endpoint, "/messages", self.body(request, stream=False))
        response = parse_anthropic_response(data, self.name)
        if request.reasoning is not None and request.reasoning.exclude:
            response.reasoning = None
        return response

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamChunk]:
        """One streamed Messages call."""
        endpoint = self.endpoint(request)
        body = self.body(request, stream=True)
        show = request.reasoning is None or not request.reasoning.exclude
        bad = partial(self.bad_response, endpoint)
        async with (
            closing(self.post_sse(endpoint, "/messages", body)) as events,
            closing(anthropic_stream_chunks(events, self.name, bad, show_reasoning=show)) as chunks,
        ):
            async for chunk in chunks:
                yield chunk

    async def list_models(self, env: Callable[[str], str | None] | None = None) -> list[str]:
        """Model ids from ``GET /v1/models`` (all pages)."""
        endpoint = self.endpoint(self.listing_request(env))
        ids: list[str] = []
        params = {"limit": "1000"}
        for _ in range(50):
            data = await self.get_json(endpoint, "/models", params)
            ids.extend(str(m["id"]) for m in data.get("data") or [] if "id" in m)
            if not data.get("has_more") or not data.get("last_id"):
                break
            params = {"limit": "1000", "after_id": str(data["last_id"])}
        return sorted(ids)


@hookimpl
def sa_register_providers(register: Callable[..., None]) -> None:
    """Register the ``anthropic`` provider."""
    register(AnthropicProvider())


__all__ = ["AnthropicProvider", "sa_register_providers"]
