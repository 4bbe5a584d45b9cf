"""The ``google`` provider: Gemini ``generateContent`` / ``streamGenerateContent`` over httpx.

Gemini attaches *thought signatures* to parts. A function call's signature travels in
``ProviderToolCall.extra_content == {"google": {"thought_signature": ...}}`` (the shape
Gemini's OpenAI-compatible endpoint uses) and is sent back with the call; signatures on text
parts travel in ``reasoning_details`` as ``reasoning.encrypted`` entries of format
``google-gemini-v1``. Calls that come without an id get a generated one.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from sa_core.errors import ProviderError
from sa_core.providers import (
    FinishReason,
    ProviderImage,
    ProviderMessage,
    ProviderRequest,
    ProviderResponse,
    ProviderToolCall,
    StreamChunk,
    Usage,
)
from sa_hooks import hookimpl
from sa_providers._embeddings import GeminiEmbeddings
from sa_providers._gemini_schema import function_parameters
from sa_providers._http import SSEEvent, error_code_from_name, sse_json
from sa_providers._stream import closing, ended_early, new_call_id

FORMAT = "google-gemini-v1"
EFFORT_BUDGETS = {"low": 1024, "medium": 8192, "high": 24576}
_FINISH: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "LANGUAGE": "content_filter",
}


def _signature_of(call: ProviderToolCall, message: ProviderMessage) -> str | None:
    google = (call.extra_content or {}).get("google")
    if isinstance(google, dict) and google.get("thought_signature"):
        return str(google["thought_signature"])
    for detail in message.reasoning_details or []:
        if detail.get("format") == FORMAT and detail.get("id") == call.id:
            return str(detail.get("data") or "") or None
    return None


def _model_parts(message: ProviderMessage) -> list[dict[str, Any]]:
    signatures = [
        str(d["data"])
        for d in message.reasoning_details or []
        if d.get("format") == FORMAT and d.get("data") and not d.get("id")
    ]
    parts: list[dict[str, Any]] = []
    if message.content or signatures:
        part: dict[str, Any] = {"text": message.content or ""}
        if signatures:
            part["thoughtSignature"] = signatures[0]
        parts.append(part)
    for call in message.tool_calls:
        wire: dict[str, Any] = {
            "functionCall": {"id": call.id, "name": call.name, "args": call.arguments}
        }
        if signature := _signature_of(call, message):
            wire["thoughtSignature"] = signature
        parts.append(wire)
    return parts


def _inline(message: ProviderMessage) -> list[dict[str, Any]]:
    return [
        {"inlineData": {"mimeType": image.media_type, "data": image.data}}
        for image in message.images
    ]


def gemini_contents(
    messages: list[ProviderMessage],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split neutral messages into system parts and merged same-role ``contents``."""
    system: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for message in messages:
        if message.role == "system":
            system.extend([{"text": message.content}] if message.content else [])
            continue
        if message.role == "assistant":
            role, parts = "model", _model_parts(message)
            names.update({call.id: call.name for call in message.tool_calls})
        elif message.role == "tool":
            call_id = message.tool_call_id or ""
            response = {
                "id": call_id,
                "name": message.tool_name or names.get(call_id, ""),
                "response": {"result": message.content or ""},
            }
            role, parts = "user", [{"functionResponse": response}, *_inline(message)]
        else:
            text = [{"text": message.content}] if message.content else []
            role, parts = "user", text + _inline(message)
        if not parts:
            continue
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    return system, contents


def _thinking_config(request: ProviderRequest) -> dict[str, Any] | None:
    reasoning = request.reasoning
    if reasoning is None:
        return None
    config: dict[str, Any] = {"includeThoughts": not reasoning.exclude}
    if reasoning.max_tokens is not None:
        config["thinkingBudget"] = reasoning.max_tokens
    elif reasoning.effort and request.model.startswith("gemini-3"):
        config["thinkingLevel"] = reasoning.effort.upper()
    elif reasoning.effort:
        config["thinkingBudget"] = EFFORT_BUDGETS[reasoning.effort]
    return config


def _tool_config(request: ProviderRequest) -> dict[str, Any]:
    choice = request.tool_choice
    if isinstance(choice, dict):
        config = {"mode": "ANY", "allowedFunctionNames": [choice["name"]]}
    else:
        config = {"mode": {"required": "ANY"}.get(choice, choice.upper())}
    return {"functionCallingConfig": config}


SAMPLING_FIELDS = (
    ("temperature", "temperature"), ("top_p", "topP"), ("seed", "seed"),
    ("stop", "stopSequences"), ("frequency_penalty", "frequencyPenalty"),
    ("presence_penalty", "presencePenalty"),
)  # fmt: skip
"""A turn's settings generateContent takes, with their ``generationConfig`` names."""


def gemini_body(request: ProviderRequest) -> dict[str, Any]:
    """Build a generateContent body (``provider_options`` are merged by the caller).

    ``parallel_tool_calls`` has no generateContent field (Gemini may answer with several
    function calls either way), so it is not sent. Gemini caches a repeated prefix on its own
    (implicit caching): the system instruction, the tools and the contents come first, built
    the same way on every step, and what may change per step follows them.
    """
    system, contents = gemini_contents(request.messages)
    body: dict[str, Any] = {}
    if system:
        body["systemInstruction"] = {"role": "user", "parts": system}
    if request.tools:
        declarations = []
        for tool in request.tools:
            declaration: dict[str, Any] = {"name": tool.name, "description": tool.description}
            if (parameters := function_parameters(tool.parameters)) is not None:
                declaration["parameters"] = parameters
            declarations.append(declaration)
        body["tools"] = [{"functionDeclarations": declarations}]
    body["contents"] = contents
    if request.tools:
        body["toolConfig"] = _tool_config(request)
    generation: dict[str, Any] = {}
    if request.max_tokens is not None:
        generation["maxOutputTokens"] = request.max_tokens
    if (thinking := _thinking_config(request)) is not None:
        generation["thinkingConfig"] = thinking
    if (output := request.output_schema) is not None:
        generation["responseMimeType"] = "application/json"
        generation["responseJsonSchema"] = output.schema
    for name, wire in SAMPLING_FIELDS:
        if (value := getattr(request, name)) is not None:
            generation[wire] = value
    if generation:
        body["generationConfig"] = generation
    return body


def gemini_usage(raw: Any) -> Usage:
    """Read ``usageMetadata``; thoughts count as completion (they are billed as output).

    ``cachedContentTokenCount`` (prompt tokens served from the implicit or an explicit cache)
    is the cache reads; Gemini reports no cache writes.
    """
    if not isinstance(raw, dict):
        return Usage()
    prompt = int(raw.get("promptTokenCount") or 0)
    thoughts = int(raw.get("thoughtsTokenCount") or 0)
    completion = int(raw.get("candidatesTokenCount") or 0) + thoughts
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=int(raw.get("totalTokenCount") or prompt + completion),
        reasoning_tokens=thoughts,
        cached_tokens=int(raw.get("cachedContentTokenCount") or 0),
    )


def map_finish(reason: str | None, has_tool_calls: bool) -> FinishReason:
    """Map a candidate's ``finishReason`` to the spec's finish reason."""
    if has_tool_calls and reason in (None, "STOP"):
        return "tool_calls"
    if reason is None:
        return "stop"
    return _FINISH.get(reason, "error")


def body_error(data: Any, provider: str) -> ProviderError | None:
    """Return the error a response body reports, if any."""
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return None
    status = error.get("code") if isinstance(error.get("code"), int) else None
    code = error_code_from_name(error.get("status"))
    return ProviderError(f"{provider}: {error.get('message', error)}", code, status)


@dataclass(slots=True)
class _Reader:
    """Reads response chunks (one for generate, many for streams) into spec chunks."""

    show_reasoning: bool = True
    calls: list[ProviderToolCall] = field(default_factory=list)
    images: list[ProviderImage] = field(default_factory=list)
    details: list[dict[str, Any]] = field(default_factory=list)
    reasoning_open: bool = False
    has_text: bool = False
    finish: str | None = None
    blocked: bool = False
    usage: Usage = field(default_factory=Usage)
    response_id: str | None = None

    def feed(self, data: dict[str, Any]) -> list[StreamChunk]:
        self.response_id = data.get("responseId") or self.response_id
        if data.get("usageMetadata"):
            self.usage = gemini_usage(data["usageMetadata"])
        if (data.get("promptFeedback") or {}).get("blockReason"):
            self.blocked = True
        out: list[StreamChunk] = []
        for candidate in (data.get("candidates") or [])[:1]:
            for part in (candidate.get("content") or {}).get("parts") or []:
                out.extend(self._part(part))
            self.finish = candidate.get("finishReason") or self.finish
        return out

    def _part(self, part: dict[str, Any]) -> list[StreamChunk]:
        signature = part.get("thoughtSignature")
        if part.get("thought"):
            self.reasoning_open = True
            text = part.get("text") or ""
            return (
                [StreamChunk("reasoning-delta", delta=text)] if text and self.show_reasoning else []
            )
        out = self._close_reasoning()
        if "functionCall" in part:
            call = part["functionCall"]
            extra = {"google": {"thought_signature": signature}} if signature else None
            tool = ProviderToolCall(
                call.get("id") or new_call_id(), call.get("name", ""), call.get("args") or {}, extra
            )
            self.calls.append(tool)
            return out + [
                StreamChunk("tool-call-start", id=tool.id, name=tool.name),
                StreamChunk(
                    "tool-call-delta", id=tool.id, arguments_delta=json.dumps(tool.arguments)
                ),
                StreamChunk(
                    "tool-call-done",
                    id=tool.id,
                    name=tool.name,
                    arguments=tool.arguments,
                    extra_content=extra,
                ),
            ]
        if signature:
            self.details.append(
                {"type": "reasoning.encrypted", "data": signature, "format": FORMAT}
            )
        if "inlineData" in part:
            inline = part["inlineData"]
            self.images.append(ProviderImage(inline.get("data", ""), inline.get("mimeType", "")))
        if part.get("text"):
            self.has_text = True
            out.append(StreamChunk("content-delta", delta=part["text"]))
        return out

    def _close_reasoning(self) -> list[StreamChunk]:
        if not self.reasoning_open:
            return []
        self.reasoning_open = False
        return [StreamChunk("reasoning-done")]

    def finish_reason(self) -> FinishReason:
        return "content_filter" if self.blocked else map_finish(self.finish, bool(self.calls))

    def close(self) -> list[StreamChunk]:
        out = self._close_reasoning()
        if self.details:
            out.append(StreamChunk("reasoning-done", reasoning_details=self.details))
        if self.has_text:
            out.append(StreamChunk("content-done"))
        out.append(
            StreamChunk(
                "finish",
                finish_reason=self.finish_reason(),
                usage=self.usage,
                response_id=self.response_id,
            )
        )
        return out


def parse_gemini_response(
    data: Any, provider: str, *, show_reasoning: bool = True
) -> ProviderResponse:
    """Read a non-streamed generateContent answer."""
    if (error := body_error(data, provider)) is not None:
        raise error
    if not isinstance(data, dict):
        raise ProviderError(f"{provider}: unexpected response", "unknown", provider=provider)
    reader = _Reader(show_reasoning)
    chunks = reader.feed(data)
    text = "".join(c.delta or "" for c in chunks if c.type == "content-delta")
    reasoning = "".join(c.delta or "" for c in chunks if c.type == "reasoning-delta")
    return ProviderResponse(
        content=text or None,
        tool_calls=reader.calls,
        reasoning=reasoning or None,
        reasoning_details=reader.details or None,
        images=reader.images,
        finish_reason=reader.finish_reason(),
        usage=reader.usage,
        response_id=reader.response_id,
        metadata={"model": data["modelVersion"]} if data.get("modelVersion") else {},
    )


async def gemini_stream_chunks(
    events: AsyncIterator[SSEEvent],
    provider: str,
    bad_event: Callable[[str], ProviderError],
    *,
    show_reasoning: bool = True,
) -> AsyncIterator[StreamChunk]:
    """Turn a streamGenerateContent event stream into spec chunks."""
    reader = _Reader(show_reasoning)
    async for event in events:
        data = sse_json(event, bad_event)
        if (error := body_error(data, provider)) is not None:
            yield StreamChunk("error", error=str(error), code=error.code)
            return
        for chunk in reader.feed(data):
            yield chunk
    if reader.finish is None and not reader.blocked:
        yield ended_early(provider)
        return
    for chunk in reader.close():
        yield chunk


class GoogleProvider(GeminiEmbeddings):
    """Google's Gemini API over httpx (embedding models through ``batchEmbedContents``)."""

    name = "google"
    key_variable = "GOOGLE_API_KEY"
    default_base_url = "https://generativelanguage.googleapis.com/v1beta"
    supports_structured_output = True

    def native_structured_output(self, request: ProviderRequest) -> bool:
        """Native only without function declarations.

        The API refuses ``responseMimeType: application/json`` together with function calling,
        so a prompt with tools gets the engine's ``final_answer`` tool instead.
        """
        return not request.tools

    def auth_headers(self, key: str | None) -> dict[str, str]:
        """Authenticate with ``x-goog-api-key`` (never in the URL, so never in errors)."""
        return {"x-goog-api-key": key} if key else {}

    def classify(self, status: int, text: str) -> str:
        """Gemini answers a bad key with HTTP 400 ``API_KEY_INVALID``."""
        return "auth_error" if "API_KEY_INVALID" in text else super().classify(status, text)

    def _path(self, request: ProviderRequest, method: str) -> str:
        return f"/models/{request.model.removeprefix('models/')}:{method}"

    async def generate(self, request: ProviderRequest) -> ProviderResponse:
        """One generateContent call."""
        endpoint = self.endpoint(request)
        body = self.passthrough(gemini_body(request), request)
        data = await self.post_json(endpoint, self._path(request, "generateContent"), body)
        show = request.reasoning is None or not request.reasoning.exclude
        return parse_gemini_response(data, self.name, show_reasoning=show)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamChunk]:
        """One streamGenerateContent call (``alt=sse``)."""
        endpoint = self.endpoint(request)
        body = self.passthrough(gemini_body(request), request)
        path = self._path(request, "streamGenerateContent") + "?alt=sse"
        show = request.reasoning is None or not request.reasoning.exclude
        bad = partial(self.bad_response, endpoint)
        async with (
            closing(self.post_sse(endpoint, path, body)) as events,
            closing(gemini_stream_chunks(events, self.name, bad, show_reasoning=show)) as chunks,
        ):
            async for chunk in chunks:
                yield chunk

    async def list_models(self, env: Callable[[str], str | None] | None = None) -> list[str]:
        """Model ids from ``GET /v1beta/models`` (all pages), without the ``models/`` prefix."""
        endpoint = self.endpoint(self.listing_request(env))
        ids: list[str] = []
        params = {"pageSize": "1000"}
        for _ in range(50):
            data = await self.get_json(endpoint, "/models", params)
            for model in data.get("models") or []:
                ids.append(str(model.get("name", "")).removeprefix("models/"))
            if not data.get("nextPageToken"):
                break
            params = {"pageSize": "1000", "pageToken": str(data["nextPageToken"])}
        return sorted(i for i in ids if i)


@hookimpl
def sa_register_providers(register: Callable[..., None]) -> None:
    """Register the ``google`` provider."""
    register(GoogleProvider())


__all__ = ["GoogleProvider", "sa_register_providers"]
