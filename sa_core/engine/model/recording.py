"""A recorded run: each model call's canonical request hash and the provider's full answer.

For every answer the engine uses, :class:`Recorder` stages its recording with the store, which
writes it in the call's ``llm_call`` log row, in the step's own transaction (no write of its
own; :mod:`sa_core.store.modelcalls`). A replay (:mod:`sa_core.engine.model.replaying`) serves the
answers from these rows and compares each new request's hash with the recorded one.

**The canonical request.** The request is hashed in parts: the leading system messages
(``system``), the rest of the conversation (``messages``, each message's canonical text in
turn), each offered tool (``tools``), the settings (``settings``: tool choice, reasoning, output
schema, sampling, provider options) and the model id. Left out, because they change from run
to run without changing what the model is asked: tool-call ids (calls pair with their results
by position), the thread id the request carries for abuse tracking, the prompt-cache key, and
in every text the ids (UUIDs), tool-call ids, timestamps and attachment file names (replaced by
placeholders, :func:`normalise`). Secret variable values are never in a request (the system
prompt renders them empty, tool results are scrubbed), so they are never in a recording.

**Cheap on the hot path.** A call costs a few microseconds:

- the conversation grows by a few messages per step and the converter hands the same message
  objects on, so the running hash of the messages of the previous request is kept on the
  flow's converter and reused when they are still the request's prefix (a list comparison by
  identity): a step hashes only its new messages, all in one pass;
- the system prompt, tools and settings rarely change: the thread's previous request's are
  kept with their :class:`~sa_core.store.rows.RequestParts` (and the last few of any thread),
  so a request that sends the same is one comparison, and their digests and words are stored
  once per distinct content (a ``request_parts`` row written with the first log that needs it
  in this process), not with each call;
- the recording itself is a short list, ``["<messages>.<count>.<parts>", text, [[id, name,
  arguments], ...]]``, with a dict of extras only for what the call's log does not already
  hold (:func:`sa_core.store.modelcalls.unpacked` reads it back): JSON encoding costs by the
  item, so a step's recording is a handful of items, not a document.

Recording is on by default. ``STANDARD_AGENTS_RECORD_MODEL_CALLS=0`` (``sa serve
--no-record``) turns it off for the whole process, and ``define_model(..., record=False)`` keeps
one model's calls out of it; a replay of a thread with unrecorded calls refuses to run.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from sa_core.jsontext import dumps_canonical
from sa_core.providers import ProviderImage, ProviderResponse, ProviderToolCall, Usage
from sa_core.store.recordkeys import MAX_STAGED, PART_DIGITS, parts_key, request_hash
from sa_core.store.rows import RequestParts

if TYPE_CHECKING:
    from sa_core.engine.flowview import ModelFlow
    from sa_core.engine.threads import ThreadRef
    from sa_core.providers import ProviderMessage, ProviderRequest, ProviderTool
    from sa_core.spec import Log
    from sa_core.store import Store

RECORD_ENV = "STANDARD_AGENTS_RECORD_MODEL_CALLS"
"""``0`` / ``false`` / ``no`` / ``off``: this process records no model calls (on by default)."""
KEPT_PARTS = 256
"""Distinct system texts, settings and request parts whose digests are kept."""

_UUID = r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
VOLATILE_ID = re.compile(_UUID)
"""An id in a text (the UUIDs of threads, messages and logs)."""
_VOLATILE = re.compile(
    r"-(?P<id>(?<=\b[0-9a-fA-F]{8}-)[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b)"
    r"|-(?P<time>(?<=\b\d{4}-)\d{2}-\d{2}[T ]\d{2}:\d{2}"
    r"(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)"
    r"|-(?P<date>(?<=\b\d{4}-)\d{2}-\d{2}\b)"
    r"|_(?P<call>(?<=\bcall_)[0-9a-zA-Z]{8,}\b)"
    r"|_(?P<queued>(?<=\bqueued_)[0-9a-zA-Z]{8,}\b)"
    r"|/(?P<file>attachments/\d{10,}-[0-9a-f]{8})"
)
"""The volatile values :func:`normalise` replaces, each found at a dash, an underscore or a
slash (every alternative starts with one of them, so the regular-expression engine skips to
those characters at C speed instead of trying every alternative at every character: 20-40
times faster on prose); what comes before that character is checked by a look-behind."""
_BEHIND = {"id": 8, "time": 4, "date": 4, "call": 4, "queued": 6, "file": 0}
"""How many characters of each kind of value come before the character it is found at."""
_PLACEHOLDERS = {
    "id": "<id>",
    "time": "<time>",
    "date": "<date>",
    "call": "<call>",
    "queued": "<call>",
    "file": "/attachments/<file>",
}


def normalise(text: str) -> str:
    """``text`` with ids, tool-call ids, timestamps and attachment names as placeholders."""
    if _VOLATILE.search(text) is None:
        return text
    pieces: list[str] = []
    end = 0
    for match in _VOLATILE.finditer(text):
        kind = match.lastgroup or "id"
        start = max(match.start() - _BEHIND[kind], end)
        pieces += (text[end:start], _PLACEHOLDERS[kind])
        end = match.end()
    pieces.append(text[end:])
    return "".join(pieces)


def canonical_json(value: Any) -> str:
    """The canonical JSON text of ``value`` (sorted keys, no spaces), normalised."""
    return normalise(dumps_canonical(value))


def _sha(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def conversation_text(messages: list[ProviderMessage]) -> bytes:
    """What of a request's messages counts for its hash, as bytes (normalised).

    Each message starts with a separator and each of its parts is labelled, so no two
    different conversations give the same text; the tool calls' arguments are canonical JSON.
    The text of a list is the texts of its parts run together, so a running hash can take a
    conversation's messages a few at a time.
    """
    forms = []
    for message in messages:
        text = f"\x1dr:{message.role}\x1ec:{message.content or ''}"
        if message.tool_calls:
            text += "\x1et:" + dumps_canonical([[c.name, c.arguments] for c in message.tool_calls])
        if message.tool_name:
            text += f"\x1en:{message.tool_name}"
        for image in message.images:
            text += "\x1ei:" + hashlib.sha256(image.data.encode()).hexdigest()
        if message.reasoning:
            text += f"\x1eq:{message.reasoning}"
        forms.append(text)
    text = "".join(forms)
    return (text if _VOLATILE.search(text) is None else normalise(text)).encode()


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


@dataclass(slots=True, eq=False)
class _Conversation:
    """A thread's conversation as of its last hashed request."""

    request: list[ProviderMessage] = field(default_factory=list)
    """The last hashed request's messages (never changed once sent)."""
    head: int = 0
    """How many leading system messages it has (not part of the conversation)."""
    count: int = 0
    """How many messages of the conversation were hashed (``request[head:]``)."""
    generation: int = -1
    """The converter's conversion those messages are, unchanged (-1: not known to be one)."""
    hasher: Any = None
    """The running hash of those messages (extended in place by the next request that
    continues them; a request that does not starts a hash of its own). None before the
    first request (``count`` is 0)."""
    signature: list[Any] | None = None
    """What the last request's parts were made of, and those parts (``parts``)."""
    parts: RequestParts | None = None


@dataclass(slots=True)
class RequestDigest:
    """A request's hash and its parts' hashes.

    Attributes:
        hash: The canonical request's hash (hex).
        model: The model id asked.
        messages: The conversation's digest (after the leading system messages).
        count: How many messages that is.
        request_parts: The unchanging parts (system prompt, tools, settings: digests, words).
    """

    hash: str
    model: str
    messages: str
    count: int
    request_parts: RequestParts

    @property
    def parts(self) -> dict[str, Any]:
        """``model``, ``system``, ``messages``, ``count``, ``tools`` (by name), ``settings``."""
        held = self.request_parts.parts
        return {
            "model": self.model,
            "system": held["system"],
            "messages": self.messages,
            "count": self.count,
            "tools": dict(held["tools"]),
            "settings": held["settings"],
        }


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
        self._by_key: dict[str, RequestParts] = {}
        """One object per distinct parts (so all know once their row is stored)."""
        self._recent: dict[tuple[Any, ...], tuple[list[Any], RequestParts]] = {}
        """The last parts of each model and first system text (any thread's), by those."""

    def digest(self, thread: ThreadRef, request: ProviderRequest) -> RequestDigest:
        """The hash of ``request``, made for ``thread`` (reusing its conversation's digests)."""
        conversation, count, parts = self._hash(thread, request)
        whole = request_hash(request.model, conversation, count, parts.key)
        return RequestDigest(whole, request.model, conversation, count, parts)

    def _hash(self, thread: ThreadRef, request: ProviderRequest) -> tuple[str, int, RequestParts]:
        """The digest of ``request``'s conversation, its length, and the request's parts."""
        messages = request.messages
        r = request  # what the unchanging parts are made of (equal values give equal parts)
        signed: list[Any] = [
            r.model, r.tool_choice, r.parallel_tool_calls, r.reasoning, r.provider_options,
            r.max_tokens, r.output_schema, r.temperature, r.top_p, r.seed, r.stop,
            r.frequency_penalty, r.presence_penalty, r.verbosity, *r.tools,
        ]  # fmt: skip  (a request's tools are its offered tools' own objects: equal by identity)
        head = 0
        for message in messages:  # the leading system messages
            if message.role != "system":
                break
            m = message
            signed += (m.content, m.images, m.tool_calls, m.tool_name, m.reasoning)
            head += 1
        flow: ModelFlow | None = thread.execution  # type: ignore[assignment]  # (a Flow)
        converter = None if flow is None else flow.converter
        held = None if converter is None else converter.request_digest
        if held is None:
            held = _Conversation()
            if converter is not None:
                converter.request_digest = held
        known = held.count
        if (  # the converter's output unchanged, extending the last hashed request (no compare)
            converter is not None
            and messages is converter.sent
            and held.generation == converter.generation - 1
            and converter.reused == known
            and converter.size == len(messages) - head
        ):
            held.generation = converter.generation
            hasher = held.hasher
            if converter.size > known:
                hasher.update(conversation_text(messages[head + known :]))
        else:
            hasher = self._conversation(held, converter, messages, head)
            held.hasher = hasher
        held.request, held.head, held.count = messages, head, len(messages) - head
        parts = held.parts
        if parts is None or signed != held.signature:
            held.signature, held.parts = signed, self._parts(signed, request, head)
            parts = held.parts
        return hasher.hexdigest()[:PART_DIGITS], held.count, parts

    @staticmethod
    def _conversation(
        held: _Conversation, converter: Any, messages: list[ProviderMessage], head: int
    ) -> Any:
        """The running hash of ``messages[head:]``, extending ``held``'s where it can.

        Used when the request is not the flow converter's next output with nothing rewritten
        (``converter.sent``; then :meth:`_hash` extends the running hash with the new
        messages, the converter knowing how many it carried over: ``converter.reused``): the
        previous request's messages are compared with this one's (a list comparison, by
        identity first).
        """
        known = held.count
        fresh = converter is not None and messages is converter.sent
        held.generation = converter.generation if fresh else -1
        if known and messages[head : head + known] == held.request[held.head : held.head + known]:
            hasher = held.hasher
        else:
            return hashlib.sha256(conversation_text(messages[head:]))
        if len(messages) - head > known:
            hasher.update(conversation_text(messages[head + known :]))
        return hasher

    def _parts(self, signed: list[Any], request: ProviderRequest, head: int) -> RequestParts:
        """The unchanging parts of ``request``: a recent request's, else digested."""
        hint = (request.model, request.messages[0].content if head else None, len(signed))
        recent = self._recent.get(hint)
        if recent is not None and recent[0] == signed:
            return recent[1]
        tools = {tool.name: self._tool_digest(tool) for tool in request.tools}
        system = self._system_digest(request.messages[:head])
        settings = self._settings_digest(request)
        key = parts_key(system, tools, settings)
        parts = self._by_key.get(key)
        if parts is None:
            body = {"system": system, "tools": tools, "settings": settings}
            body["texts"] = request_texts(request)
            parts = RequestParts(key, body)
            if len(self._by_key) >= KEPT_PARTS:
                self._by_key.clear()
            self._by_key[key] = parts
        if len(self._recent) >= KEPT_PARTS:
            self._recent.clear()
        self._recent[hint] = (signed, parts)
        return parts

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

    def _system_digest(self, head: list[ProviderMessage]) -> str:
        """The digest of the leading system messages (computed once per distinct text)."""
        texts = tuple([m.content for m in head])
        found = self._systems.get(texts)
        if found is None:
            found = hashlib.sha256(conversation_text(head)).hexdigest()[:PART_DIGITS]
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
        if digest is None:
            messages, count, parts = self._hash(thread, request)
        else:  # a replay's call, hashed already
            messages, count, parts = digest.messages, digest.count, digest.request_parts
        recording: list[Any] = [
            f"{messages}.{count}.{parts.key}",
            response.content,
            [
                [c.id, c.name, c.arguments]
                if c.extra_content is None
                else [c.id, c.name, c.arguments, c.extra_content]
                for c in response.tool_calls
            ],
        ]
        data, usage = log.data, response.usage
        if not (  # what the log holds already, and an answer of text and tool calls only
            request.model == data.get("model")
            and message_id == data.get("message_id")
            and response.finish_reason == data.get("finish_reason")
            and usage.cost is None
            and usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
            and response.reasoning is None
            and response.reasoning_details is None
            and not response.images
            and response.response_id is None
            and not response.metadata
        ):
            recording.append(_extra(response, data, request.model, message_id))
        staged = self.store.staged_calls  # held for the log's write (ModelCallsMixin)
        staged[log.id] = (recording, None if parts.stored else parts)
        if len(staged) > MAX_STAGED:
            del staged[next(iter(staged))]


def _extra(
    response: ProviderResponse, data: dict[str, Any], model: str, message_id: str | None
) -> dict[str, Any]:
    """What of a call a compact recording keeps besides its request, text and tool calls.

    Only what the call's ``llm_call`` log does not hold already (its model, message, finish
    reason and token counts) and what the answer has beyond text and tool calls; usually
    nothing (:meth:`Recorder.record` checks that first).
    """
    extra: dict[str, Any] = {}
    if model != data.get("model"):
        extra["model"] = model
    if message_id != data.get("message_id"):
        extra["message_id"] = message_id
    if response.finish_reason != data.get("finish_reason"):
        extra["finish_reason"] = response.finish_reason
    usage = response.usage
    if (
        usage.cost is not None
        or usage.total_tokens != usage.prompt_tokens + usage.completion_tokens
    ):
        extra["usage"] = {"total_tokens": usage.total_tokens, "cost": usage.cost}  # usage_kept
    if response.reasoning is not None:
        extra["reasoning"] = response.reasoning
    if response.reasoning_details is not None:
        extra["reasoning_details"] = response.reasoning_details
    if response.images:
        extra["images"] = [asdict(i) for i in response.images]
    if response.response_id is not None:
        extra["response_id"] = response.response_id
    if response.metadata:
        extra["metadata"] = response.metadata
    return extra


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


def response_from_document(document: dict[str, Any]) -> ProviderResponse:
    """The :class:`ProviderResponse` of a recorded answer in its long form.

    The form :func:`sa_core.store.modelcalls.unpacked` gives (and an export carries):
    ``content``, ``tool_calls`` (``id``, ``name``, ``arguments``, ``extra_content``),
    ``finish_reason``, ``usage``, and ``reasoning``, ``reasoning_details``, ``images``,
    ``response_id`` and ``metadata`` when the answer had them.
    """
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
    "conversation_text",
    "normalise",
    "record_by_default",
    "request_texts",
    "response_from_document",
]
