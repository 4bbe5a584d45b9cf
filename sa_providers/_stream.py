"""Stream assembly shared by the provider codecs.

Every wire protocol streams tool calls as pieces keyed by something (a choice index, a content
block index, an output item id). :class:`ToolCallBuffer` turns those pieces into the spec's
``tool-call-start`` / ``tool-call-delta`` / ``tool-call-done`` chunks. The other helpers here
are small conversions every codec needs.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sa_core.providers import ProviderImage, StreamChunk, parse_arguments

T = TypeVar("T")


@contextlib.asynccontextmanager
async def closing(iterator: AsyncIterator[T]) -> AsyncGenerator[AsyncIterator[T], None]:
    """Close an async iterator (an async generator) when the block ends, however it ends.

    ``async for`` does not close what it iterates when the loop body raises or the consumer
    stops early; a generator left open is finalised later by the garbage collector in another
    task, which prints tracebacks about a generator that is "already running". Every layer of a
    provider stream (SSE lines, events, chunks) is iterated inside one of these.
    """
    try:
        yield iterator
    finally:
        close = getattr(iterator, "aclose", None)
        if close is not None:
            await close()


def new_call_id() -> str:
    """Return a fresh tool-call id, for wire protocols whose calls may come without one."""
    return f"call_{uuid.uuid4().hex[:24]}"


def data_url(image: ProviderImage) -> str:
    """Return an image as a ``data:`` URL."""
    return f"data:{image.media_type};base64,{image.data}"


def dump_arguments(arguments: dict[str, Any]) -> str:
    """Serialise tool-call arguments for wire protocols that carry them as a JSON string."""
    raw = arguments.get("_raw") if len(arguments) == 1 else None
    return raw if isinstance(raw, str) else json.dumps(arguments, ensure_ascii=False)


def tool_images_note(tool_name: str | None, call_id: str | None) -> str:
    """Return the text that introduces tool-result images re-sent as a user message."""
    return f"Images returned by tool {tool_name or 'call'} ({call_id or 'unknown id'}):"


def ended_early(provider: str) -> StreamChunk:
    """Return the error chunk for a stream that closed before the model finished."""
    return StreamChunk(
        "error",
        error=f"{provider}: the stream ended before the model finished",
        code="server_error",
    )


@dataclass(slots=True)
class _PendingCall:
    id: str
    name: str
    parts: list[str] = field(default_factory=list)
    extra: dict[str, Any] | None = None
    done: bool = False


@dataclass(slots=True)
class ToolCallBuffer:
    """Collects streamed tool-call pieces by wire key and emits spec chunks."""

    _calls: dict[Any, _PendingCall] = field(default_factory=dict)
    _last_key: Any = None

    def __bool__(self) -> bool:
        return bool(self._calls)

    def start(
        self,
        key: Any,
        call_id: str | None,
        name: str | None,
        extra: dict[str, Any] | None = None,
    ) -> list[StreamChunk]:
        """Open a call (or update its name/id when the key is known); returns chunks to emit."""
        self._last_key = key
        call = self._calls.get(key)
        if call is None:
            call = _PendingCall(call_id or new_call_id(), name or "", extra=extra)
            self._calls[key] = call
            return [StreamChunk("tool-call-start", id=call.id, name=call.name)]
        if name and not call.name:
            call.name = name
        if extra:
            call.extra = {**(call.extra or {}), **extra}
        return []

    def id_of(self, key: Any) -> str | None:
        """Return the id of the call open under ``key``, if any."""
        call = self._calls.get(key)
        return call.id if call is not None else None

    def has(self, key: Any) -> bool:
        """Whether a call is open under ``key``."""
        return key in self._calls

    @property
    def last_key(self) -> Any:
        """The key of the most recently started call."""
        return self._last_key

    def delta(self, key: Any, text: str) -> list[StreamChunk]:
        """Append an argument fragment."""
        call = self._calls.get(key)
        if call is None or not text:
            return []
        call.parts.append(text)
        return [StreamChunk("tool-call-delta", id=call.id, arguments_delta=text)]

    def set_extra(self, key: Any, extra: dict[str, Any]) -> None:
        """Attach round-trip data to an open call."""
        call = self._calls.get(key)
        if call is not None:
            call.extra = {**(call.extra or {}), **extra}

    def finish(self, key: Any, arguments: str | dict[str, Any] | None = None) -> list[StreamChunk]:
        """Close one call; ``arguments`` (complete) wins over the collected fragments."""
        call = self._calls.get(key)
        if call is None or call.done:
            return []
        call.done = True
        raw: str | dict[str, Any] = "".join(call.parts) if arguments is None else arguments
        return [
            StreamChunk(
                "tool-call-done",
                id=call.id,
                name=call.name,
                arguments=parse_arguments(raw),
                extra_content=call.extra,
            )
        ]

    def finish_all(self) -> list[StreamChunk]:
        """Close every open call, in the order they started."""
        chunks: list[StreamChunk] = []
        for key in list(self._calls):
            chunks.extend(self.finish(key))
        return chunks
