"""The OpenAI Responses API wire protocol (``POST /responses``).

Reasoning items come back encrypted (``store`` is false, so the server keeps nothing); they are
carried in ``reasoning_details`` as ``reasoning.encrypted`` entries of format
``openai-responses-v1`` and sent back as reasoning input items on the next call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from sa_core.errors import ProviderError
from sa_core.providers import (
    FinishReason,
    ProviderMessage,
    ProviderRequest,
    ProviderResponse,
    ProviderToolCall,
    StreamChunk,
    Usage,
    parse_arguments,
)
from sa_providers._chat_completions import cache_key, effort_for, is_reasoning_model
from sa_providers._http import SSEEvent, error_code_from_name, sse_json
from sa_providers._stream import (
    ToolCallBuffer,
    data_url,
    dump_arguments,
    ended_early,
    tool_images_note,
)

FORMAT = "openai-responses-v1"


def _reasoning_items(message: ProviderMessage) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    details = [d for d in message.reasoning_details or [] if d.get("format") == FORMAT]
    for detail in details:
        if detail.get("type") != "reasoning.encrypted" or not detail.get("data"):
            continue
        summaries = [
            {"type": "summary_text", "text": d.get("summary") or ""}
            for d in details
            if d.get("type") == "reasoning.summary" and d.get("id") == detail.get("id")
        ]
        item = {"type": "reasoning", "encrypted_content": detail["data"], "summary": summaries}
        if detail.get("id"):
            item["id"] = detail["id"]
        items.append(item)
    return items


def responses_input(messages: list[ProviderMessage], system_role: str) -> list[dict[str, Any]]:
    """Convert neutral messages to Responses input items."""
    out: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for message in messages:
        if message.role != "tool" and images:
            out.append({"role": "user", "content": images})
            images = []
        if message.role == "system":
            out.append({"role": system_role, "content": message.content or ""})
        elif message.role == "user":
            parts: list[dict[str, Any]] = []
            if message.content:
                parts.append({"type": "input_text", "text": message.content})
            parts.extend(
                {"type": "input_image", "image_url": data_url(image)} for image in message.images
            )
            out.append({"role": "user", "content": parts})
        elif message.role == "assistant":
            out.extend(_reasoning_items(message))
            if message.content:
                out.append({"role": "assistant", "content": message.content})
            out.extend(
                {
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": dump_arguments(call.arguments),
                }
                for call in message.tool_calls
            )
        else:
            out.append(
                {
                    "type": "function_call_output",
                    "call_id": message.tool_call_id,
                    "output": message.content or "",
                }
            )
            if message.images:
                note = tool_images_note(message.tool_name, message.tool_call_id)
                images.append({"type": "input_text", "text": note})
                images.extend(
                    {"type": "input_image", "image_url": data_url(image)}
                    for image in message.images
                )
    if images:
        out.append({"role": "user", "content": images})
    return out


def responses_body(request: ProviderRequest, *, stream: bool) -> dict[str, Any]:
    """Build a Responses request body (``provider_options`` are merged by the caller)."""
    reasoning_model = is_reasoning_model(request.model)
    body: dict[str, Any] = {
        "model": request.model,
        "input": responses_input(request.messages, "developer" if reasoning_model else "system"),
        "store": False,
    }
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
                "strict": tool.strict,
            }
            for tool in request.tools
        ]
        choice = request.tool_choice
        body["tool_choice"] = (
            {"type": "function", "name": choice["name"]} if isinstance(choice, dict) else choice
        )
        if request.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = request.parallel_tool_calls
    if (output := request.output_schema) is not None:
        body["text"] = {
            "format": {
                "type": "json_schema",
                "name": output.name,
                "schema": output.schema,
                "strict": output.strict,
            }
        }
    if request.max_tokens is not None:
        body["max_output_tokens"] = request.max_tokens
    if request.reasoning is not None:
        config: dict[str, Any] = {}
        if effort := effort_for(request.reasoning):
            config["effort"] = effort
        if not request.reasoning.exclude:
            config["summary"] = "auto"
        body["reasoning"] = config
        body["include"] = ["reasoning.encrypted_content"]
    _add_sampling(body, request)
    if request.user:
        body["user"] = request.user
    if (key := cache_key(request)) is not None:
        body["prompt_cache_key"] = key
    if stream:
        body["stream"] = True
    return body


def _add_sampling(body: dict[str, Any], request: ProviderRequest) -> None:
    """A turn's settings the Responses API takes (it has no seed, stop or penalties)."""
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.verbosity is not None:
        body["text"] = {**body.get("text", {}), "verbosity": request.verbosity}


def responses_usage(raw: Any) -> Usage:
    """Read a Responses ``usage`` object."""
    if not isinstance(raw, dict):
        return Usage()
    prompt = int(raw.get("input_tokens") or 0)
    completion = int(raw.get("output_tokens") or 0)
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=int(raw.get("total_tokens") or prompt + completion),
        reasoning_tokens=int((raw.get("output_tokens_details") or {}).get("reasoning_tokens") or 0),
        cached_tokens=int((raw.get("input_tokens_details") or {}).get("cached_tokens") or 0),
    )


def responses_finish(response: dict[str, Any], has_tool_calls: bool) -> FinishReason:
    """Map a response's status (and incomplete reason) to the spec's finish reason."""
    status = response.get("status")
    if status == "incomplete":
        reason = (response.get("incomplete_details") or {}).get("reason")
        return "content_filter" if reason == "content_filter" else "length"
    if status == "failed":
        return "error"
    return "tool_calls" if has_tool_calls else "stop"


def _failure(response: dict[str, Any], provider: str) -> ProviderError:
    error = response.get("error") or {}
    message = error.get("message") or "the response failed"
    code = error_code_from_name(error.get("code") or error.get("type"))
    return ProviderError(f"{provider}: {message}", code, provider=provider)


def _reasoning_of(item: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    texts = [s.get("text", "") for s in item.get("summary") or [] if isinstance(s, dict)]
    texts += [c.get("text", "") for c in item.get("content") or [] if isinstance(c, dict)]
    details: list[dict[str, Any]] = []
    if item.get("encrypted_content"):
        details.append(
            {
                "type": "reasoning.encrypted",
                "id": item.get("id"),
                "data": item["encrypted_content"],
                "format": FORMAT,
            }
        )
    summary = "\n\n".join(s.get("text", "") for s in item.get("summary") or [])
    if summary:
        details.append(
            {"type": "reasoning.summary", "id": item.get("id"), "summary": summary}
            | {"format": FORMAT}
        )
    return [t for t in texts if t], details


def parse_responses_response(data: Any, provider: str) -> ProviderResponse:
    """Read a non-streamed Responses answer."""
    if not isinstance(data, dict) or not isinstance(data.get("output"), list):
        raise ProviderError(f"{provider}: response has no output", "unknown", provider=provider)
    if data.get("status") == "failed":
        raise _failure(data, provider)
    text: list[str] = []
    reasoning: list[str] = []
    details: list[dict[str, Any]] = []
    calls: list[ProviderToolCall] = []
    for item in data["output"]:
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or []:
                text.append(part.get("text") or part.get("refusal") or "")
        elif kind == "function_call":
            calls.append(
                ProviderToolCall(
                    item.get("call_id") or item.get("id") or "",
                    item.get("name", ""),
                    parse_arguments(item.get("arguments")),
                )
            )
        elif kind == "reasoning":
            item_texts, item_details = _reasoning_of(item)
            reasoning.extend(item_texts)
            details.extend(item_details)
    return ProviderResponse(
        content="".join(text) or None,
        tool_calls=calls,
        reasoning="\n\n".join(reasoning) or None,
        reasoning_details=details or None,
        finish_reason=responses_finish(data, bool(calls)),
        usage=responses_usage(data.get("usage")),
        response_id=data.get("id"),
        metadata={"model": data["model"]} if data.get("model") else {},
    )


@dataclass(slots=True)
class _ResponsesStream:
    provider: str
    tools: ToolCallBuffer = field(default_factory=ToolCallBuffer)
    reasoning_open: bool = False
    response_id: str | None = None

    def feed(self, data: dict[str, Any]) -> list[StreamChunk]:
        kind = data.get("type", "")
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            return [StreamChunk("content-delta", delta=data.get("delta") or "")]
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            self.reasoning_open = True
            return [StreamChunk("reasoning-delta", delta=data.get("delta") or "")]
        if kind == "response.reasoning_summary_part.added" and data.get("summary_index", 0) > 0:
            return [StreamChunk("reasoning-delta", delta="\n\n")]
        if kind == "response.function_call_arguments.delta":
            return self.tools.delta(data.get("item_id"), data.get("delta") or "")
        if kind == "response.output_item.added":
            return self._item_added(data.get("item") or {})
        if kind == "response.output_item.done":
            return self._item_done(data.get("item") or {})
        if kind == "response.created":
            self.response_id = (data.get("response") or {}).get("id")
        return []

    def _item_added(self, item: dict[str, Any]) -> list[StreamChunk]:
        if item.get("type") == "function_call":
            return self.tools.start(item.get("id"), item.get("call_id"), item.get("name"))
        return []

    def _item_done(self, item: dict[str, Any]) -> list[StreamChunk]:
        kind = item.get("type")
        if kind == "function_call":
            key = item.get("id")
            out = self.tools.start(key, item.get("call_id"), item.get("name"))
            return out + self.tools.finish(key, item.get("arguments"))
        if kind == "reasoning":
            _, details = _reasoning_of(item)
            self.reasoning_open = False
            return [StreamChunk("reasoning-done", reasoning_details=details or None)]
        if kind == "message":
            return [StreamChunk("content-done")]
        return []

    def finish(self, response: dict[str, Any]) -> list[StreamChunk]:
        out = self.tools.finish_all()
        out.append(
            StreamChunk(
                "finish",
                finish_reason=responses_finish(response, bool(self.tools)),
                usage=responses_usage(response.get("usage")),
                response_id=response.get("id") or self.response_id,
            )
        )
        return out


async def responses_stream_chunks(
    events: AsyncIterator[SSEEvent],
    provider: str,
    bad_event: Callable[[str], ProviderError],
) -> AsyncIterator[StreamChunk]:
    """Turn a Responses event stream into spec chunks."""
    state = _ResponsesStream(provider)
    async for event in events:
        data = sse_json(event, bad_event)
        kind = data.get("type") or event.event
        if kind in ("response.completed", "response.incomplete"):
            for chunk in state.finish(data.get("response") or {}):
                yield chunk
            return
        if kind in ("response.failed", "error"):
            failed = data.get("response") or {"error": data.get("error") or data}
            error = _failure(failed, provider)
            yield StreamChunk("error", error=str(error), code=error.code)
            return
        for chunk in state.feed(data):
            yield chunk
    yield ended_early(provider)
