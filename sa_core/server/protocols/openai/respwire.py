"""Response objects and the streamed Responses events, as the official SDK parses them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sa_core.engine.model.usage import UsageTotals
from sa_core.server.protocols.openai.respids import conversation_id, response_id
from sa_core.server.protocols.openai.toolcalls import function_call_item

Calls = Sequence[Mapping[str, str]]


def response_usage(usage: UsageTotals) -> dict[str, Any]:
    """Usage in the Responses API's shape."""
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


def text_part(text: str) -> dict[str, Any]:
    """An ``output_text`` content part."""
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def message_item(item_id: str, text: str | None, status: str) -> dict[str, Any]:
    """The assistant message output item (no content yet while ``text`` is ``None``)."""
    content = [] if text is None else [text_part(text)]
    return {
        "type": "message", "id": item_id, "status": status, "role": "assistant",
        "content": content,
    }  # fmt: skip


def item_id(message_id: str) -> str:
    """The output item's id: from the id of the message that started the turn."""
    return f"msg_{message_id}"


def response_object(
    thread_id: str,
    message_id: str,
    model: str,
    created: int,
    status: str,
    text: str,
    usage: UsageTotals | None,
    previous: str | None,
    error: dict[str, Any] | None = None,
    calls: Calls = (),
    anchor: str | None = None,
) -> dict[str, Any]:
    """A response object (``status``: ``in_progress``, ``completed`` or ``failed``).

    ``calls``: the client tool calls it returns (``function_call`` items after the text);
    ``anchor``: for a turn that went on with client tool results, the id of the assistant
    message whose calls they answered (part of the response's id).
    """
    output = [message_item(item_id(anchor or message_id), text, "completed")] if text else []
    output += [function_call_item(call) for call in calls]
    return {
        "id": response_id(thread_id, message_id, anchor),
        "object": "response",
        "created_at": created,
        "status": status,
        "model": model,
        "output": output,
        "error": error,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
        "temperature": None,
        "top_p": None,
        "previous_response_id": previous,
        "conversation": {"id": conversation_id(thread_id)},
        "text": {"format": {"type": "text"}},
        "store": True,
        "usage": None if usage is None else response_usage(usage),
    }


class EventWriter:
    """The numbered events of one streamed response."""

    def __init__(
        self,
        thread_id: str,
        message_id: str,
        model: str,
        created: int,
        previous: str | None,
        anchor: str | None = None,
    ) -> None:
        self.ids = (thread_id, message_id)
        self.anchor = anchor
        self.model = model
        self.created = created
        self.previous = previous
        self.item = item_id(anchor or message_id)
        self.sequence = 0
        self.opened = False
        self.text = ""

    def _event(self, kind: str, **fields: Any) -> str:
        payload = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return f"event: {kind}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n"

    def _response(
        self,
        status: str,
        text: str,
        usage: UsageTotals | None,
        error: Any = None,
        calls: Calls = (),
    ) -> dict[str, Any]:
        return response_object(
            *self.ids, self.model, self.created, status, text, usage, self.previous, error,
            calls, self.anchor,
        )  # fmt: skip

    def _where(self) -> dict[str, Any]:
        return {"item_id": self.item, "output_index": 0, "content_index": 0}

    def start(self) -> list[str]:
        """``response.created`` and ``response.in_progress``."""
        response = self._response("in_progress", "", None)
        return [
            self._event("response.created", response=response),
            self._event("response.in_progress", response=response),
        ]

    def _open(self) -> list[str]:
        if self.opened:
            return []
        self.opened = True
        return [
            self._event(
                "response.output_item.added",
                output_index=0,
                item=message_item(self.item, None, "in_progress"),
            ),
            self._event("response.content_part.added", **self._where(), part=text_part("")),
        ]

    def delta(self, text: str) -> list[str]:
        """``response.output_text.delta`` (after the item and part were added)."""
        self.text += text
        return [
            *self._open(),
            self._event("response.output_text.delta", **self._where(), delta=text, logprobs=[]),
        ]

    def finish(self, text: str, usage: UsageTotals, calls: Calls = ()) -> list[str]:
        """The closing events, ending with ``response.completed``.

        ``calls``: the client tool calls the turn paused on, each a ``function_call`` item
        after the text (with no text, the only items).
        """
        lines: list[str] = []
        if text or self.text or not calls:
            lines += [] if self.text else self.delta(text)
            text = self.text
            lines += [
                self._event("response.output_text.done", **self._where(), text=text, logprobs=[]),
                self._event("response.content_part.done", **self._where(), part=text_part(text)),
                self._event(
                    "response.output_item.done",
                    output_index=0,
                    item=message_item(self.item, text, "completed"),
                ),
            ]
        first = 1 if self.opened else 0
        for index, call in enumerate(calls, first):
            lines += self._function_call(index, call)
        response = self._response("completed", text, usage, calls=calls)
        return [*lines, self._event("response.completed", response=response)]

    def _function_call(self, index: int, call: Mapping[str, str]) -> list[str]:
        """The events of one ``function_call`` output item, its arguments in one delta."""
        item = function_call_item(call)
        where = {"item_id": item["id"], "output_index": index}
        return [
            self._event(
                "response.output_item.added",
                output_index=index,
                item=function_call_item(call, "in_progress"),
            ),
            self._event("response.function_call_arguments.delta", **where, delta=item["arguments"]),
            self._event(
                "response.function_call_arguments.done",
                **where,
                name=item["name"],
                arguments=item["arguments"],
            ),
            self._event("response.output_item.done", output_index=index, item=item),
        ]

    def failed(self, message: str) -> str:
        """``response.failed`` with the reason."""
        error = {"code": "server_error", "message": message}
        return self._event("response.failed", response=self._response("failed", "", None, error))
