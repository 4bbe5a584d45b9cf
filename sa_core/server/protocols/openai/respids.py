"""Response and conversation ids that carry the thread they belong to.

A response id encodes the thread's id and the id of the user message that started the turn
(``resp_`` + base64url of both), and for a response that went on with client tool results, the
id of the assistant message whose calls they answered; a conversation id encodes the thread's id
(``conv_`` + ...).
Nothing else is stored: the thread and its messages are the record, so the ids stay valid
across restarts and on every worker. An id that does not decode, or whose thread or message is
missing or belongs to another model, is answered as not found.
"""

from __future__ import annotations

import base64
import binascii

from sa_core.server.protocols.openai.errors import OpenAIError

RESPONSE = "resp_"
CONVERSATION = "conv_"


def encode(prefix: str, *parts: str) -> str:
    """``prefix`` plus the parts, newline-separated, in unpadded base64url."""
    raw = "\n".join(parts).encode()
    return prefix + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(value: str, prefix: str, count: int | tuple[int, ...], param: str) -> list[str]:
    """The parts of an id made by :func:`encode`; a 404 naming ``param`` when it is not one.

    ``count``: how many parts it has (or the numbers it may have).
    """
    parts: list[str] = []
    if value.startswith(prefix):
        body = value[len(prefix) :]
        try:
            text = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
            parts = text.split("\n")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            parts = []
    counts = count if isinstance(count, tuple) else (count,)
    if len(parts) not in counts or not all(parts):
        raise not_found(value, param)
    return parts


def not_found(value: str, param: str) -> OpenAIError:
    """The 404 of an id that names nothing this model may see."""
    kind = "conversation" if param == "conversation" else "response"
    return OpenAIError(
        404, f"No {kind} with id '{value}' was found.", param=param, code="not_found"
    )


def response_id(thread_id: str, message_id: str, anchor: str | None = None) -> str:
    """The id of the response to the user message ``message_id`` of ``thread_id``.

    ``anchor``: for a response that went on with client tool results, the assistant message
    whose calls they answered (a third part).
    """
    if anchor is not None:
        return encode(RESPONSE, thread_id, message_id, anchor)
    return encode(RESPONSE, thread_id, message_id)


def conversation_id(thread_id: str) -> str:
    """The id of the conversation that is the thread ``thread_id``."""
    return encode(CONVERSATION, thread_id)
