"""Checking request bodies: what this server serves, and one 400 naming every problem otherwise.

The agent decides how it answers: its own prompt, model and tools. So fields that would change
that (``n`` above 1, audio, the legacy ``functions``, ...) are refused with a 400 naming the field
rather than silently ignored. Client ``tools`` are offered beside the agent's own, unless the
agent turns them off (:mod:`sa_core.server.protocols.openai.toolcalls`). Sampling and length
settings (``temperature``, ``max_tokens``, ...) follow the agent's serving policy
(:mod:`sa_core.server.protocols.openai.settings`). Fields with no meaning here (``store``,
``service_tier``, ``prompt_cache_key``, ...) are accepted; ``metadata`` is kept on the thread.
Every refused or invalid field of a request is named in the one 400
(:class:`~sa_core.server.protocols.openai.errors.Problems`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sa_core.server.protocols.openai.errors import OpenAIError, Problems, invalid, unsupported
from sa_core.server.protocols.openai.models import Model
from sa_core.server.protocols.openai.settings import (
    CHAT_SETTINGS,
    ClientSettings,
    asked_settings,
    client_settings,
)
from sa_core.server.protocols.openai.toolcalls import (
    ClientTools,
    assistant_turn,
    chat_calls,
    chat_choice,
    chat_tools,
    check_answered,
    output_text,
    tool_turn,
)
from sa_core.spec.agents import ClientSettingsPolicy
from sa_core.spec.schemas import check_schema

Turn = tuple[str, str]
"""A message as this API keeps it: ``(role, text)``, role ``system``, ``user``, ``assistant``
or ``tool`` (tool calls and results as :mod:`~sa_core.server.protocols.openai.toolcalls` keeps
them)."""

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
CLIENT_TOOLS = ("functions", "function_call")
"""The legacy function calling fields (``tools`` and ``tool_choice`` are served)."""
UNMEANING = {"user", "store", "service_tier", "safety_identifier", "prompt_cache_key",
             "prompt_cache_retention", "stream_options", "parallel_tool_calls", "metadata",
             "logprobs", "top_logprobs"}  # fmt: skip
"""Fields both APIs accept that change nothing here (:func:`common_fields` checks some)."""
METADATA_LIMITS = (16, 64, 512)
"""OpenAI's bounds on ``metadata``: pairs, characters of a key, characters of a value."""


def require_object(body: Any) -> dict[str, Any]:
    """The request body as a JSON object."""
    if not isinstance(body, dict):
        raise OpenAIError(400, "The request body must be a JSON object.")
    return body


def refuse_fields(
    body: Mapping[str, Any], served: set[str], empty_ok: set[str], problems: Problems
) -> None:
    """Record every field outside ``served``; those in ``empty_ok`` only when set to something.

    ``null`` is always accepted (clients send it for "unset").
    """
    for name, value in body.items():
        if name in served or value is None:
            continue
        if name in empty_ok and value in ([], {}, False, "none", "auto", "disabled"):
            continue
        if name in CLIENT_TOOLS:
            problems.add(unsupported(name, "the legacy function calling is not served; "
                                     "declare 'tools' instead."))  # fmt: skip
        else:
            problems.add(unsupported(name, "the agent's definition decides this."))


@dataclass
class CommonFields:
    """What both APIs read from the fields with no effect on the answer."""

    user: str
    """Whose conversation this is (``user``, else ``safety_identifier``), part of its digest."""
    metadata: dict[str, str] | None
    """The request's ``metadata``, kept on the thread."""


def common_fields(body: Mapping[str, Any], problems: Problems) -> CommonFields:
    """Check the accepted fields that must hold a particular value, and read the rest."""
    if body.get("logprobs") not in (None, False):
        problems.add(unsupported("logprobs", "no log probabilities are returned."))
    if body.get("top_logprobs") not in (None, 0):
        problems.add(unsupported("top_logprobs", "no log probabilities are returned."))
    metadata = problems.attempt(metadata_of, body.get("metadata"), default=None)
    user = body.get("user") or body.get("safety_identifier") or ""
    return CommonFields(user=str(user), metadata=metadata)


def metadata_of(value: Any) -> dict[str, str] | None:
    """``metadata``: up to 16 string values under keys of up to 64 characters."""
    if value is None or value == {}:
        return None
    pairs, key_chars, value_chars = METADATA_LIMITS
    if not isinstance(value, dict) or len(value) > pairs:
        raise invalid("metadata", f"expected an object of at most {pairs} string values.")
    for key, item in value.items():
        if len(key) > key_chars or not isinstance(item, str) or len(item) > value_chars:
            raise invalid(f"metadata.{key}", f"expected a string of at most {value_chars} "
                          f"characters under a key of at most {key_chars}.")  # fmt: skip
    return dict(value)


def text_of(content: Any, param: str, part_types: tuple[str, ...]) -> str:
    """The text of a message's content: a string, or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        for index, part in enumerate(content):
            where = f"{param}[{index}]"
            if not isinstance(part, dict) or part.get("type") not in part_types:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise unsupported(
                    where, f"content parts of type {kind!r} are not served; send text."
                )
            text = part.get("text")
            if not isinstance(text, str):
                raise invalid(f"{where}.text", "expected a string.")
            texts.append(text)
        return "".join(texts)
    raise invalid(param, "expected a string or a list of text parts.")


def role_of(value: Any, param: str) -> str:
    """A message role, with ``developer`` taken as ``system``."""
    if value in ("tool", "function"):
        raise unsupported(param, "tool results are 'tool' messages after the assistant "
                          "message with the calls (chat completions), or function_call_output "
                          "items (Responses).")  # fmt: skip
    if value not in ROLES:
        raise invalid(param, f"expected one of {', '.join(ROLES)}, got {value!r}.")
    return ROLES[value]


@dataclass
class ChatRequest:
    """A checked ``POST /v1/chat/completions`` body."""

    messages: list[Turn]
    stream: bool
    include_usage: bool
    user: str
    output_schema: dict[str, Any] | None = None
    """The JSON Schema ``response_format`` asks for, if any."""
    settings: ClientSettings = field(default_factory=ClientSettings)
    """The sampling and length settings, as the serving policy took them."""
    metadata: dict[str, str] | None = None
    client: ClientTools = field(default_factory=ClientTools)
    """The client tools and ``tool_choice`` the request declares."""


CHAT_FIELDS = {"model", "messages", "stream", "response_format", "n", "modalities", "tools",
               "tool_choice", *UNMEANING, *CHAT_SETTINGS}  # fmt: skip
CHAT_EMPTY_OK = {*CLIENT_TOOLS, "logit_bias"}


def chat_request(body: dict[str, Any], policy: ClientSettingsPolicy, model: Model) -> ChatRequest:
    """Check a chat completions request for ``model`` (see the module's docstring).

    Raises:
        OpenAIError: a 400 naming every refused or invalid field.
    """
    problems = Problems()
    refuse_fields(body, CHAT_FIELDS, CHAT_EMPTY_OK, problems)
    if body.get("n") not in (None, 1):
        problems.add(unsupported("n", "one choice per request (n=1)."))
    if body.get("modalities") not in (None, ["text"]):
        problems.add(unsupported("modalities", "text only."))
    common = common_fields(body, problems)
    asked = asked_settings(body, CHAT_SETTINGS)
    settings = client_settings(asked, CHAT_SETTINGS, policy, model, problems)
    output_schema = problems.attempt(
        text_format, body.get("response_format"), "response_format", True, default=None
    )
    messages = chat_messages(body.get("messages"), problems)
    client = ClientTools(
        chat_tools(body.get("tools"), problems.add),
        problems.attempt(chat_choice, body.get("tool_choice"), default=None),
    )
    stream = problems.attempt(flag, body, "stream", default=False)
    usage = problems.attempt(include_usage, body.get("stream_options"), default=False)
    problems.raise_any()
    return ChatRequest(
        messages=messages,
        stream=stream,
        include_usage=usage,
        user=common.user,
        output_schema=output_schema,
        settings=settings,
        metadata=common.metadata,
        client=client,
    )


def chat_messages(raw: Any, problems: Problems) -> list[Turn]:
    """The ``messages``, each checked (every bad one recorded).

    The last must be a user's (the agent answers it) or the results of the calls of the
    assistant message before them (the turn that made them goes on).
    """
    if not isinstance(raw, list) or not raw:
        problems.add(invalid("messages", "expected a non-empty list of messages."))
        return []
    try:  # every message at once; on a problem, again one by one to name each bad one
        messages = [chat_message(message, index) for index, message in enumerate(raw)]
    except OpenAIError:
        messages = [
            problems.attempt(chat_message, message, index, default=("", ""))
            for index, message in enumerate(raw)
        ]
    if messages[-1][0] not in ("user", "tool", ""):
        problems.add(invalid(f"messages[{len(messages) - 1}].role", "the last message must be "
                             "a user message (the agent answers it) or tool results."))  # fmt: skip
    check_answered(messages, problems.add, lambda index: f"messages[{index}]")
    return messages


def chat_message(message: Any, index: int) -> Turn:
    """One chat message as ``(role, text)`` (a tool result or calls as ``toolcalls`` keeps them)."""
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise invalid(where, "expected an object.")
    role = message.get("role")
    if role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise invalid(f"{where}.tool_call_id", "expected the id of the call it answers.")
        return tool_turn(call_id, output_text(message.get("content"), f"{where}.content"))
    role = role_of(role, f"{where}.role")
    for name in ("audio", "function_call"):
        if message.get(name) is not None:
            raise unsupported(f"{where}.{name}")
    content = message.get("content")
    text = (
        ""
        if content is None and role == "assistant"
        else text_of(content, f"{where}.content", ("text", "input_text", "output_text"))
    )
    if message.get("tool_calls"):
        if role != "assistant":
            raise invalid(f"{where}.tool_calls", "only an assistant message makes tool calls.")
        return assistant_turn(text, chat_calls(message["tool_calls"], f"{where}.tool_calls"))
    return role, text


def flag(body: Mapping[str, Any], name: str, param: str | None = None) -> bool:
    """A boolean field (``null`` or missing: false)."""
    value = body.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise invalid(param or name, "expected true or false.")
    return value


def include_usage(options: Any) -> bool:
    """``stream_options.include_usage`` (its other options change nothing here)."""
    if options is None:
        return False
    if not isinstance(options, dict):
        raise invalid("stream_options", "expected an object.")
    return flag(options, "include_usage", "stream_options.include_usage")


def text_format(value: Any, param: str, nested: bool) -> dict[str, Any] | None:
    """The JSON Schema a ``response_format`` / ``text.format`` asks the answer to follow.

    ``text`` (or nothing): ``None``. ``json_object``: any JSON object. ``json_schema``: its
    ``schema``, under ``json_schema`` in chat completions (``nested``), beside ``type`` in
    responses. The turn's answer is then structured output in that shape
    (``thread.send_message(..., output_schema=...)``), replacing the agent's own schema.
    """
    if value is None:
        return None
    if not isinstance(value, dict):
        raise invalid(param, 'expected an object such as {"type": "text"}.')
    kind = value.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind != "json_schema":
        raise unsupported(
            f"{param}.type", f"expected 'text', 'json_object' or 'json_schema', got {kind!r}."
        )
    where = f"{param}.json_schema" if nested else param
    spec = value.get("json_schema") if nested else value
    if not isinstance(spec, dict):
        raise invalid(where, "expected an object with 'name' and 'schema'.")
    schema = spec.get("schema")
    if not isinstance(schema, dict):
        raise invalid(f"{where}.schema", "expected a JSON Schema object.")
    try:
        check_schema(schema)
    except ValueError as exc:
        raise invalid(f"{where}.schema", f"{exc}.") from None
    return schema
