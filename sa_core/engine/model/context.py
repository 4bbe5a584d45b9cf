"""Context assembly: the system prompt, the history a step sees, and the side perspective.

Stored roles encode sides: side A writes ``assistant``, side B (or the human) writes ``user``.
Each acting side sees itself as ``assistant`` and the other side as ``user``; the other side's
tool calls and their results are hidden from it.
"""

from __future__ import annotations

import base64
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from sa_core import jsontext
from sa_core.cachepolicy import cached_messages
from sa_core.providers import ProviderImage, ProviderMessage, ProviderToolCall
from sa_core.spec import EnvPart, IncludePart, Message, PromptDefinition, Side, TextPart

MISSING_RESULT = (
    'Tool result missing from conversation history for prior call "{name}". '
    "Treat this as a failed tool call."
)


# ---------------------------------------------------------------------------------------------
# System prompt
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """A prompt with includes resolved: literal strings and env names, in order.

    Built once per prompt; rendering per step only looks up env values.
    """

    pieces: tuple[str | EnvPart, ...]

    @property
    def env_names(self) -> list[str]:
        """The variables the template reads."""
        return [p.property for p in self.pieces if isinstance(p, EnvPart)]

    def render(self, lookup: Callable[[str], str | None]) -> str:
        """Concatenate the pieces, resolving env parts (a missing value renders empty)."""
        out: list[str] = []
        for piece in self.pieces:
            out.append(piece if isinstance(piece, str) else (lookup(piece.property) or ""))
        return "".join(out)


def compile_prompt(
    prompt: PromptDefinition, prompts: Callable[[str], PromptDefinition | None]
) -> PromptTemplate:
    """Resolve includes recursively (a missing prompt renders ``[Prompt not found: X]``)."""
    pieces: list[str | EnvPart] = []

    def walk(definition: PromptDefinition, trail: tuple[str, ...]) -> None:
        for part in definition.parts:
            if isinstance(part, TextPart):
                pieces.append(part.content)
            elif isinstance(part, EnvPart):
                pieces.append(part)
            elif isinstance(part, IncludePart):
                target = prompts(part.prompt)
                if target is None:
                    pieces.append(f"[Prompt not found: {part.prompt}]")
                elif part.prompt in trail:
                    pieces.append(f"[Prompt include cycle: {' -> '.join((*trail, part.prompt))}]")
                else:
                    walk(target, (*trail, part.prompt))

    walk(prompt, (prompt.name,))
    merged: list[str | EnvPart] = []
    for piece in pieces:
        if isinstance(piece, str) and merged and isinstance(merged[-1], str):
            merged[-1] = merged[-1] + piece
        else:
            merged.append(piece)
    return PromptTemplate(tuple(merged))


# ---------------------------------------------------------------------------------------------
# Perspective and provider messages
# ---------------------------------------------------------------------------------------------


def author_side(message: Message) -> Side | None:
    """Which side wrote a stored message (``None`` for system and tool rows)."""
    if message.role == "assistant":
        return "a"
    if message.role == "user":
        return "b"
    return None


FileReader = Callable[[str], Awaitable[bytes | None]]


async def to_provider_messages(
    messages: Sequence[Message],
    *,
    acting: Side,
    images_allowed: bool = True,
    recent_image_threshold: int = 10,
    read_file: FileReader | None = None,
    cache: dict[tuple[str, Side], tuple[Message, ProviderMessage]] | None = None,
) -> list[ProviderMessage]:
    """Turn stored messages into provider messages from the acting side's perspective.

    - The acting side's messages become ``assistant`` (with their tool calls), the other side's
      ``user`` (tool calls stripped, their tool results hidden).
    - Tool results without a visible call are dropped; calls without a result get a synthetic
      failed result right after them, so every call block is followed by its results.
    - Image attachments of recent ``user`` messages become image parts (when the model takes
      images); older ones and other files are described in text.

    ``cache`` (one per flow) keeps the conversion of stored messages without attachments, so a
    message is converted, and its tool-call JSON parsed, once. An entry is reused only for the
    same message (or an equal one): the same id can arrive edited by ``filter_messages`` or with
    its tool calls stripped (``include_past_tools=False`` after a handoff).
    """
    memo: dict[tuple[str, Side], tuple[Message, ProviderMessage]] = {} if cache is None else cache

    def cached(source: Message) -> ProviderMessage | None:
        entry = memo.get((source.id, acting))
        if entry is not None and (entry[0] is source or entry[0] == source):
            return entry[1]
        return None

    results = _own_call_results(messages, acting)
    image_floor = len(messages) - recent_image_threshold
    out: list[ProviderMessage] = []
    for index, message in enumerate(messages):
        role = message.role
        if role == "tool":
            continue  # emitted right after the call that owns it
        if role == "system":
            out.append(ProviderMessage("system", message.content or ""))
            continue
        if author_side(message) == acting:
            converted = cached(message)
            if converted is None:
                converted = _assistant_message(message)
                memo[(message.id, acting)] = (message, converted)
            out.append(converted)
            for provider_call in converted.tool_calls:
                result = results.get(provider_call.id)
                if result is None:
                    out.append(_missing_result(provider_call))
                    continue
                tool_message = cached(result)
                if tool_message is None:
                    tool_message = ProviderMessage(
                        "tool",
                        result.content or "",
                        tool_call_id=provider_call.id,
                        tool_name=provider_call.name,
                        images=await _images(result, images_allowed, read_file),
                    )
                    if not result.attachments:
                        memo[(result.id, acting)] = (result, tool_message)
                out.append(tool_message)
            continue
        if not message.attachments:
            converted = cached(message)
            if converted is None:
                converted = ProviderMessage("user", message.content or "")
                memo[(message.id, acting)] = (message, converted)
            if converted.content:
                out.append(converted)
            continue
        images, content = await _user_attachments(
            message, message.content or "", index >= image_floor and images_allowed, read_file
        )
        if content or images or message.tool_calls:
            out.append(ProviderMessage("user", content, images=images))
    return out


def _assistant_message(message: Message) -> ProviderMessage:
    """An acting side's message as the model sees its own: ``assistant``, with its calls."""
    return ProviderMessage(
        "assistant",
        message.content,
        tool_calls=[
            ProviderToolCall(c.id, c.name, c.arguments, c.extra_content)
            for c in (message.tool_calls or [])
        ],
        reasoning=message.reasoning_content,
        reasoning_details=message.reasoning_details,
    )


def _own_call_results(messages: Sequence[Message], acting: Side) -> dict[str, Message]:
    """The stored result of each tool call the acting side made, by call id."""
    own_calls: dict[str, str] = {}
    for message in messages:
        if message.tool_calls and author_side(message) == acting:
            for call in message.tool_calls:
                own_calls[call.id] = call.name
    results: dict[str, Message] = {}
    for message in messages:
        if message.role == "tool" and message.tool_call_id in own_calls:
            results[message.tool_call_id] = message
    return results


def _missing_result(call: ProviderToolCall) -> ProviderMessage:
    """The failed result given to a call that has none, right after it."""
    return ProviderMessage(
        "tool",
        MISSING_RESULT.format(name=call.name),
        tool_call_id=call.id,
        tool_name=call.name,
    )


class IncrementalConverter:
    """Per-flow conversion that only converts what is new since the previous step.

    A step's input is usually the previous step's input plus the messages that step created.
    When the old input is a prefix of the new one (the same messages, or equal ones, for the
    same acting side) and converting it neither synthesised a missing tool result nor depended
    on image recency, the previous output is reused and only the suffix is converted.
    """

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._output: list[ProviderMessage] = []
        self._acting: Side | None = None
        self._reusable = False
        self.cache: dict[tuple[str, Side], tuple[Message, ProviderMessage]] = {}
        self.kept = False
        """Whether :func:`converter_for` keeps it (its cache then counts towards the bound)."""
        self.counted = 0
        """How many of its cached conversions the bound's running total includes."""

    async def convert(
        self,
        messages: Sequence[Message],
        *,
        acting: Side,
        images_allowed: bool = True,
        recent_image_threshold: int = 10,
        read_file: FileReader | None = None,
    ) -> list[ProviderMessage]:
        """Like :func:`to_provider_messages`, reusing the previous result where it can."""
        current = list(messages)
        known = len(self._messages)
        options = {
            "acting": acting,
            "images_allowed": images_allowed,
            "recent_image_threshold": recent_image_threshold,
            "read_file": read_file,
            "cache": self.cache,
        }
        # list equality compares by identity first, so unchanged messages cost no field compare
        try:
            if (
                self._reusable
                and acting == self._acting
                and known
                and current[:known] == self._messages
            ):
                suffix = messages[known:]
                converted = await to_provider_messages(suffix, **options)  # type: ignore[arg-type]
                output = self._output + converted
                reusable = _self_contained(suffix, acting, converted)
            else:
                output = await to_provider_messages(messages, **options)  # type: ignore[arg-type]
                reusable = _self_contained(messages, acting, output)
        finally:
            if self.kept:
                _held[0] += len(self.cache) - self.counted
                self.counted = len(self.cache)
        self._messages, self._output, self._acting, self._reusable = (
            current,
            output,
            acting,
            reusable,
        )
        return list(output)


CONVERTED_THREADS = 256
"""Threads whose converted history :func:`converter_for` keeps at most."""
CONVERTED_MESSAGES = cached_messages()
"""Converted messages :func:`converter_for` keeps at most over every thread
(``STANDARD_AGENTS_CACHED_MESSAGES``)."""
_converters: OrderedDict[str, IncrementalConverter] = OrderedDict()
_held = [0]
"""Converted messages held over every kept converter (kept up to date by ``convert``)."""


def converter_for(thread_id: str, *, keep: bool = True) -> IncrementalConverter:
    """The thread's :class:`IncrementalConverter`, kept across its turns (bounded LRU).

    A turn's context is the previous turn's plus the messages written since, so keeping the
    converter per thread makes a turn convert only what is new instead of the whole history.
    Reuse is safe: :meth:`IncrementalConverter.convert` reuses its previous output only when the
    old input is still a prefix of the new one (same or equal messages, same acting side).
    Only top-level flows should share it (sub-flows see other messages).

    Args:
        thread_id: The thread.
        keep: Whether to keep it: the engine keeps a thread's conversion while the store
            keeps its history (:meth:`~sa_core.store.Store.keeps_history`), so that both hold
            the same threads and share their messages. ``False`` forgets a kept one and gives
            a converter of its own.
    """
    if not keep:
        forget_converted(thread_id)
        return IncrementalConverter()
    converter = _converters.get(thread_id)
    if converter is None:
        converter = _converters[thread_id] = IncrementalConverter()
        converter.kept = True
        while len(_converters) > CONVERTED_THREADS:
            _release(_converters.popitem(last=False)[1])
    else:
        _converters.move_to_end(thread_id)
    while _held[0] > CONVERTED_MESSAGES and len(_converters) > 1:
        _release(_converters.popitem(last=False)[1])
    return converter


def _release(converter: IncrementalConverter) -> None:
    """Stop counting an evicted or forgotten converter."""
    if converter.kept:
        converter.kept = False
        _held[0] -= converter.counted
        converter.counted = 0


def forget_converted(thread_id: str | None = None) -> None:
    """Drop a thread's kept conversion (every thread's without an id)."""
    if thread_id is None:
        for converter in _converters.values():
            _release(converter)
        _converters.clear()
    else:
        dropped = _converters.pop(thread_id, None)
        if dropped is not None:
            _release(dropped)


def _self_contained(
    messages: Sequence[Message], acting: Side, output: Sequence[ProviderMessage]
) -> bool:
    """Whether a converted range can be kept as a prefix of later steps.

    Not when it has attachments (image recency moves with every step) or a synthesised missing
    result (a late result would change it).
    """
    if any(m.attachments for m in messages):
        return False
    return not any(
        m.role == "tool"
        and m.content is not None
        and m.content.startswith("Tool result missing from conversation history")
        for m in output
    )


def _is_image(mime: str) -> bool:
    return mime.startswith("image/")


async def _images(
    message: Message, allowed: bool, read_file: FileReader | None
) -> list[ProviderImage]:
    if not allowed or not message.attachments or read_file is None:
        return []
    images = []
    for ref in message.attachments:
        if _is_image(ref.mime_type):
            data = await read_file(ref.path)
            if data is not None:
                images.append(
                    ProviderImage(
                        base64.b64encode(data).decode(), ref.mime_type, ref.name, ref.path
                    )
                )
    return images


async def _user_attachments(
    message: Message, content: str, inline_images: bool, read_file: FileReader | None
) -> tuple[list[ProviderImage], str]:
    images: list[ProviderImage] = []
    described: list[str] = []
    others: list[str] = []
    for ref in message.attachments or []:
        if _is_image(ref.mime_type):
            data = await read_file(ref.path) if (inline_images and read_file) else None
            if data is not None:
                images.append(
                    ProviderImage(
                        base64.b64encode(data).decode(), ref.mime_type, ref.name, ref.path
                    )
                )
            else:
                size = f" ({ref.width}x{ref.height})" if ref.width and ref.height else ""
                text = f"[Image: {ref.name}{size}]"
                described.append(f"{text} {ref.description}" if ref.description else text)
        else:
            others.append(f"{ref.name} ({ref.path})")
    extra = [*described]
    if others:
        extra.append(f"[Attached files: {', '.join(others)}]")
    if extra:
        content = "\n".join([content, *extra]) if content else "\n".join(extra)
    return images, content


def registry_system_message(children: Sequence[object]) -> str | None:
    """The registry listing shown to an orchestrator that has children (``None`` if none)."""
    if not children:
        return None
    lines = ["Subagent instances of this thread (reference, name, status):"]
    for entry in children:
        ref = getattr(entry, "reference", "")
        name = getattr(entry, "thread_name", None) or getattr(entry, "name", "")
        agent = getattr(entry, "name", "")
        status = getattr(entry, "status", "")
        resumable = " resumable" if getattr(entry, "resumable", False) else ""
        lines.append(f"- {ref}: {name} (agent {agent}{resumable}) — {status}")
    if any(getattr(entry, "resumable", False) for entry in children):  # else not offered
        lines.append("Use subagent_message with a reference to message a resumable instance.")
    return "\n".join(lines)


def dumps_compact(value: object) -> str:
    """JSON with stable, compact separators (tool-call arguments on the wire)."""
    return jsontext.dumps_compact(value)
