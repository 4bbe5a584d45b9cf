"""A recorded run: each model call's canonical request hash and the provider's full answer.

For every answer the engine uses, :class:`Recorder` builds a
:class:`~sa_core.store.modelcalls.RecordedCall` and stages it with the store, which writes it
with the call's ``llm_call`` log, in the step's own transaction (no write of its own). A replay
(:mod:`sa_core.engine.replaying`) serves the answers from these rows and compares each new
request's hash with the recorded one.

**The canonical request.** The request is hashed in parts: the leading system messages
(``system``), the rest of the conversation (``messages``, one digest per message), each offered
tool (``tools``), the settings (``settings``: tool choice, reasoning, output schema, sampling,
provider options) and the model id. Left out, because they change from run to run without
changing what the model is asked: tool-call ids (calls pair with their results by position),
the thread id the request carries for abuse tracking, the prompt-cache key, and in every text
the ids (UUIDs), tool-call ids, timestamps and attachment file names (replaced by
placeholders, :func:`normalise`). Secret variable values are never in a request (the system
prompt renders them empty, tool results are scrubbed), so they are never in a recording.

**Cheap on the hot path.** A thread's conversation grows by a few messages per step, and the
converter hands the same message objects on: the running hash of the messages seen at the
previous step is kept on the flow's converter and reused when they are still the request's
prefix (a list comparison by identity), so a step hashes only its new messages, and nothing is
kept that the converter does not keep. The
texts of the system messages and tools are stored only when they changed since the thread's
previous recorded call in this process, so a replay can show what changed in words.

Recording is on by default. ``define_model(..., record=False)`` turns it off for one model's
calls, and the environment variable ``STANDARD_AGENTS_RECORD_MODEL_CALLS=0`` (``sa serve
--no-record``) for the whole process; a replay of a thread with unrecorded calls refuses to run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from sa_core.providers import ProviderImage, ProviderResponse, ProviderToolCall, Usage
from sa_core.store.rows import RecordedCall

if TYPE_CHECKING:
    from sa_core.engine.threads import ThreadRef
    from sa_core.providers import ProviderMessage, ProviderRequest, ProviderTool
    from sa_core.spec import Log
    from sa_core.store import Store

RECORD_ENV = "STANDARD_AGENTS_RECORD_MODEL_CALLS"
"""``0`` / ``false`` / ``no`` / ``off``: this process records no model calls."""
KEPT_PARTS = 256
"""Distinct system texts, and distinct settings, whose digests are kept."""
PART_DIGITS = 16
"""Hex digits kept of each part's digest (the request's own hash keeps all 64)."""

_UUID = r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
VOLATILE_ID = re.compile(_UUID)
"""An id in a text (the UUIDs of threads, messages and logs)."""
_VOLATILE = re.compile(
    rf"(?P<id>{_UUID})"
    r"|(?P<call>\b(?:call|queued)_[0-9a-zA-Z]{8,}\b)"
    r"|(?P<time>\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)"
    r"|(?P<date>\b\d{4}-\d{2}-\d{2}\b)"
    r"|(?P<file>/attachments/\d{10,}-[0-9a-f]{8})"
)
_CANONICAL = json.JSONEncoder(
    sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str
)
"""The canonical JSON encoder (built once: ``json.dumps`` with options builds one per call)."""
_PLACEHOLDERS = {
    "id": "<id>",
    "call": "<call>",
    "time": "<time>",
    "date": "<date>",
    "file": "/attachments/<file>",
}


def _placeholder(match: re.Match[str]) -> str:
    return _PLACEHOLDERS[match.lastgroup or "id"]


def normalise(text: str) -> str:
    """``text`` with ids, tool-call ids, timestamps and attachment names as placeholders."""
    return _VOLATILE.sub(_placeholder, text)


def canonical_json(value: Any) -> str:
    """The canonical JSON text of ``value`` (sorted keys, no spaces), normalised."""
    return normalise(_CANONICAL.encode(value))


def _sha(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def message_form(message: ProviderMessage) -> str:
    """What of a provider message counts for the request's hash, as text (normalised).

    Each part is labelled, so no two different messages give the same text; the tool calls'
    arguments are canonical JSON (sorted keys).
    """
    text = f"r:{message.role}\x1ec:{message.content or ''}"
    if message.tool_calls:
        calls = [[c.name, c.arguments] for c in message.tool_calls]
        text += "\x1et:" + _CANONICAL.encode(calls)
    if message.tool_name:
        text += f"\x1en:{message.tool_name}"
    for image in message.images:
        text += "\x1ei:" + hashlib.sha256(image.data.encode()).hexdigest()
    if message.reasoning:
        text += f"\x1eq:{message.reasoning}"
    return _VOLATILE.sub(_placeholder, text)


def message_digest(message: ProviderMessage) -> bytes:
    """The digest of one message of a request."""
    return hashlib.sha256(message_form(message).encode()).digest()


def tool_form(tool: ProviderTool) -> dict[str, Any]:
    """What of an offered tool counts for the request's hash."""
    return {"description": tool.description, "parameters": tool.parameters}


def settings_form(request: ProviderRequest) -> dict[str, Any]:
    """The request's settings that count for its hash (everything but messages and tools).

    Settings left unset (``None``) are left out.
    """
    form = {
        "tool_choice": request.tool_choice,
        "parallel_tool_calls": request.parallel_tool_calls,
        "reasoning": None if request.reasoning is None else asdict(request.reasoning),
        "provider_options": request.provider_options or None,
        "max_tokens": request.max_tokens,
        "output_schema": None if request.output_schema is None else asdict(request.output_schema),
        "temperature": request.temperature,
        "top_p": request.top_p,
        "seed": request.seed,
        "stop": request.stop,
        "frequency_penalty": request.frequency_penalty,
        "presence_penalty": request.presence_penalty,
        "verbosity": request.verbosity,
    }
    return {key: value for key, value in form.items() if value is not None}


def split_head(messages: list[ProviderMessage]) -> int:
    """How many system messages lead the conversation (the prompt, the child registry)."""
    index = 0
    while index < len(messages) and messages[index].role == "system":
        index += 1
    return index


@dataclass(slots=True)
class _Conversation:
    """A thread's conversation as of its last hashed request."""

    messages: list[ProviderMessage] = field(default_factory=list)
    hasher: Any = field(default_factory=hashlib.sha256)
    """The running hash of ``messages``' digests (copied and extended by the next request)."""
    texts_for: str | None = None
    """The parts (``texts_key``) whose words the thread's last recorded call carried."""


@dataclass(slots=True)
class RequestDigest:
    """A request's hash and its parts' hashes.

    Attributes:
        hash: The canonical request's hash (hex).
        parts: ``model``, ``system``, ``messages``, ``count``, ``tools`` (by name),
            ``settings``.
    """

    hash: str
    parts: dict[str, Any]
    conversation: _Conversation | None = None
    """The thread's conversation it was made for (its recording notes the texts it kept)."""
    texts_key: str = ""
    """The system, tools and settings digests together (the words are kept when it changes)."""


class Recorder:
    """Hashes requests and records calls for one runtime (its caches are the runtime's).

    Args:
        store: Where recorded calls are staged (written with their logs).
        enabled: Record calls at all (default: the environment's :data:`RECORD_ENV`).
    """

    def __init__(self, store: Store, enabled: bool | None = None) -> None:
        self.store = store
        self.enabled = record_by_default() if enabled is None else enabled
        self._tools: dict[str, tuple[dict[str, Any], str, str]] = {}
        self._systems: dict[tuple[str | None, ...], str] = {}
        self._settings: dict[str, str] = {}

    @staticmethod
    def _conversation(thread: ThreadRef) -> _Conversation:
        """The running hash of the thread's conversation, kept on its flow's converter.

        It holds the messages the converter holds anyway, and goes when the converter goes; a
        call outside a flow starts from nothing.
        """
        flow = thread.execution
        if flow is None:
            return _Conversation()
        held: _Conversation | None = flow.converter.request_digest
        if held is None:
            held = flow.converter.request_digest = _Conversation()
        return held

    def _tool_digest(self, tool: ProviderTool) -> str:
        """A tool's digest, computed once per tool definition (its schema object)."""
        held = self._tools.get(tool.name)
        if held is not None and held[0] is tool.parameters and held[1] == tool.description:
            return held[2]
        digest = _sha(canonical_json(tool_form(tool))).hex()[:PART_DIGITS]
        if len(self._tools) > 4096:
            self._tools.clear()
        self._tools[tool.name] = (tool.parameters, tool.description, digest)
        return digest

    def digest(self, thread: ThreadRef, request: ProviderRequest) -> RequestDigest:
        """The hash of ``request``, made for ``thread`` (reusing its conversation's digests)."""
        messages = request.messages
        head = split_head(messages)
        rest = messages[head:]
        held = self._conversation(thread)
        known = len(held.messages)
        if known and len(rest) >= known and rest[:known] == held.messages:
            hasher = held.hasher.copy()
            new = rest[known:]
        else:
            hasher = hashlib.sha256()
            new = rest
        for message in new:
            hasher.update(message_digest(message))
        held.messages, held.hasher = rest, hasher
        tools: dict[str, str] = {}
        for tool in request.tools:
            tools[tool.name] = self._tool_digest(tool)
        listed = ",".join([f"{n}={d}" for n, d in sorted(tools.items())]) if tools else ""
        parts: dict[str, Any] = {
            "model": request.model,
            "system": self._system_digest(messages[:head]),
            "messages": hasher.hexdigest()[:PART_DIGITS],
            "count": len(rest),
            "tools": tools,
            "settings": self._settings_digest(request),
        }
        key = f"{parts['system']}|{listed}|{parts['settings']}"
        whole = f"{parts['model']}|{parts['messages']}|{len(rest)}|{key}"
        return RequestDigest(hashlib.sha256(whole.encode()).hexdigest(), parts, held, key)

    def _system_digest(self, head: list[ProviderMessage]) -> str:
        """The digest of the leading system messages (computed once per distinct text)."""
        texts = tuple([m.content for m in head])
        found = self._systems.get(texts)
        if found is None:
            system = hashlib.sha256()
            for message in head:
                system.update(message_digest(message))
            found = system.hexdigest()[:PART_DIGITS]
            _bounded(self._systems)[texts] = found
        return found

    def _settings_digest(self, request: ProviderRequest) -> str:
        """The digest of the request's settings (computed once per distinct settings)."""
        settings = settings_form(request)
        key = repr(settings)
        found = self._settings.get(key)
        if found is None:
            found = _sha(canonical_json(settings)).hex()[:PART_DIGITS]
            _bounded(self._settings)[key] = found
        return found

    def record(
        self,
        thread: ThreadRef,
        request: ProviderRequest,
        response: ProviderResponse,
        log: Log,
        message_id: str | None,
        digest: RequestDigest | None = None,
    ) -> None:
        """Stage the call's recording; it is stored with ``log`` (see the module docstring)."""
        digest = digest or self.digest(thread, request)
        described = dict(digest.parts)
        held = digest.conversation or self._conversation(thread)
        if held.texts_for != digest.texts_key:  # changed since the thread's last call
            described["texts"] = request_texts(request)  # keep the words
            held.texts_for = digest.texts_key
        self.store.stage_model_call(
            RecordedCall(
                thread_id=thread.thread_id,
                log_id=log.id,
                message_id=message_id,
                request_hash=digest.hash,
                request=described,
                response=response_document(response),
                created_at=log.created_at,
            )
        )


def request_texts(request: ProviderRequest) -> dict[str, Any]:
    """The readable parts of a request: its system messages, tools and settings."""
    head = split_head(request.messages)
    return {
        "system": [m.content or "" for m in request.messages[:head]],
        "tools": {t.name: tool_form(t) for t in request.tools},
        "settings": settings_form(request),
    }


def _bounded(cache: dict[Any, str]) -> dict[Any, str]:
    """``cache``, emptied when full (a few entries: prompts and settings change rarely)."""
    if len(cache) >= KEPT_PARTS:
        cache.clear()
    return cache


def record_by_default() -> bool:
    """Whether this process records model calls (:data:`RECORD_ENV`; on unless turned off)."""
    value = os.environ.get(RECORD_ENV, "").strip().lower()
    return value not in ("0", "false", "no", "off")


# -- the response -----------------------------------------------------------------------------


def response_document(response: ProviderResponse) -> dict[str, Any]:
    """The provider's answer as JSON.

    Content, tool calls, finish reason and usage always; reasoning, images, the response id
    and metadata when the answer has them.
    """
    calls = []
    for call in response.tool_calls:
        item = {"id": call.id, "name": call.name, "arguments": call.arguments}
        if call.extra_content is not None:
            item["extra_content"] = call.extra_content
        calls.append(item)
    document: dict[str, Any] = {
        "content": response.content,
        "tool_calls": calls,
        "finish_reason": response.finish_reason,
        "usage": usage_document(response.usage),
    }
    if response.reasoning is not None:
        document["reasoning"] = response.reasoning
    if response.reasoning_details is not None:
        document["reasoning_details"] = response.reasoning_details
    if response.images:
        document["images"] = [asdict(i) for i in response.images]
    if response.response_id is not None:
        document["response_id"] = response.response_id
    if response.metadata:
        document["metadata"] = response.metadata
    return document


def usage_document(usage: Usage) -> dict[str, Any]:
    """A call's usage as JSON."""
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "cached_tokens": usage.cached_tokens,
        "cost": usage.cost,
        "cache_write_tokens": usage.cache_write_tokens,
    }


def response_from_document(document: dict[str, Any]) -> ProviderResponse:
    """The :class:`ProviderResponse` :func:`response_document` recorded."""
    usage = dict(document.get("usage") or {})
    return ProviderResponse(
        content=document.get("content"),
        tool_calls=[
            ProviderToolCall(
                c.get("id") or "",
                c["name"],
                dict(c.get("arguments") or {}),
                c.get("extra_content"),
            )
            for c in document.get("tool_calls") or []
        ],
        reasoning=document.get("reasoning"),
        reasoning_details=document.get("reasoning_details"),
        images=[ProviderImage(**i) for i in document.get("images") or []],
        finish_reason=document.get("finish_reason") or "stop",
        usage=Usage(**{k: v for k, v in usage.items() if k in Usage.__dataclass_fields__}),
        response_id=document.get("response_id"),
        metadata=dict(document.get("metadata") or {}),
    )


__all__ = [
    "RECORD_ENV",
    "Recorder",
    "RequestDigest",
    "VOLATILE_ID",
    "canonical_json",
    "message_digest",
    "normalise",
    "record_by_default",
    "request_texts",
    "response_document",
    "response_from_document",
]
