"""Structured output: a prompt's ``output_schema`` and the answers that must match it.

A prompt with an ``output_schema`` ends its turn with JSON that validates against the schema.
Each model call carries the schema (:func:`apply_to_request`): a provider that declares
``supports_structured_output`` (and does not decline the request in
``native_structured_output``) gets it as ``ProviderRequest.output_schema`` and sends it in its
API's native field; any other is offered a ``final_answer`` tool whose arguments are the
schema, and must call it (``tool_choice``). :func:`check_answer` turns the model's answer
(the tool call's arguments, or the text) into the validated value: stored as the assistant
message's ``metadata.output`` with the JSON as its content. An answer that does not validate
is rejected once, with the problems as the error result of the call (a synthetic
``invalid_structured_output`` call when the answer was text), so the model answers again;
a second invalid answer in a row fails the turn with :class:`StructuredOutputError`.

Nothing here runs for prompts without a schema.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel
from pydantic_core import from_json

from sa_core.engine.flowtypes import SIDE_ROLE, SessionOutcome
from sa_core.providers import OutputSchema, ProviderTool
from sa_core.spec.records import ToolCall, ToolCallFunction
from sa_core.spec.schemas import json_schema_of, validate_output

if TYPE_CHECKING:
    from sa_core.engine.flowview import ModelFlow
    from sa_core.providers import Provider, ProviderRequest, StreamChunk
    from sa_core.spec import PromptDefinition, Side
    from sa_core.spec.records import Log

FINAL_TOOL = "final_answer"
"""The tool offered to providers without native structured output."""
RETRY_CALL = "invalid_structured_output"
"""The synthetic call that carries the rejection of a text answer."""
OUTPUT = "output"
"""The assistant message's metadata key holding the validated value."""
OUTPUT_ERROR = "output_error"
"""The metadata key holding the problems of a rejected answer."""
TURN_SCHEMA = "output_schema"
"""The user message's metadata key holding a per-turn schema (``send_message(output_schema=)``)."""

_FINAL_DESCRIPTION = (
    "Give your final answer. Call this exactly once, when you are done; its arguments are "
    "the answer."
)
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*)\n```\s*$", re.DOTALL)


class StructuredOutputError(Exception):
    """A prompt's answer failed its ``output_schema`` twice in a row.

    Attributes:
        prompt: the prompt's name.
        problems: ``"field: message"`` entries of the last answer.
    """

    def __init__(self, prompt: str, problems: list[str]) -> None:
        self.prompt = prompt
        self.problems = problems
        super().__init__(
            f"prompt '{prompt}' answered twice with output that does not match its "
            f"output_schema: {'; '.join(problems)}"
        )


@dataclass(slots=True)
class Answer:
    """A step's answer after the schema check.

    Attributes:
        calls: the tool calls to store and run (the ``final_answer`` call removed when valid).
        content: the message text (the value's JSON when valid).
        metadata: ``{"output": value}`` or ``{"output_error": problems}``; ``None`` when the
            step made tool calls and gave no answer yet.
        rejection: the error text for ``calls[0]`` when the answer was rejected.
    """

    calls: list[Any]
    content: str
    metadata: dict[str, Any] | None = None
    rejection: str | None = None


def output_schema_for(prompt: PromptDefinition) -> OutputSchema:
    """The schema a prompt's model calls carry."""
    schema = json_schema_of(prompt.output_schema)
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", prompt.name)[:64] or "output"
    return OutputSchema(name=name, schema=schema, strict=is_strict(schema))


def with_turn_schema(prompt: PromptDefinition, schema: dict[str, Any]) -> PromptDefinition:
    """``prompt`` answering in the turn's schema (it replaces the prompt's own)."""
    return prompt.model_copy(update={"output_schema": schema})


def is_strict(schema: Any) -> bool:
    """Whether every object in ``schema`` is closed and requires all its properties."""
    if isinstance(schema, list):
        return all(is_strict(s) for s in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        if schema.get("additionalProperties") is not False:
            return False
        if set(schema.get("required") or []) != set(properties):
            return False
    return all(is_strict(v) for k, v in schema.items() if k not in ("enum", "const", "default"))


def apply_to_request(provider: Provider, request: ProviderRequest, output: OutputSchema) -> None:
    """Carry ``output`` on one provider's request: natively, or as a forced final tool.

    A provider without :meth:`~sa_core.providers.BaseProvider.native_structured_output` (a
    plain :class:`~sa_core.providers.Provider`) is asked its ``supports_structured_output``.
    """
    asks = getattr(provider, "native_structured_output", None)
    if asks is not None:
        native = bool(asks(request))
    else:
        native = bool(getattr(provider, "supports_structured_output", False))
    if native:
        request.output_schema = output
        return
    others = request.tools
    request.tools = [*others, ProviderTool(FINAL_TOOL, _FINAL_DESCRIPTION, output.schema)]
    request.tool_choice = "required" if others else {"name": FINAL_TOOL}


def parse_text(text: str) -> tuple[Any, list[str]]:
    """The JSON value of a text answer (a Markdown code fence around it is allowed)."""
    stripped = text.strip()
    if match := _FENCE.match(stripped):
        stripped = match.group(1)
    try:
        return json.loads(stripped), []
    except json.JSONDecodeError as exc:
        return None, [f"(root): the answer is not valid JSON ({exc.msg} at char {exc.pos})"]


async def check_answer(
    flow: ModelFlow, prompt: PromptDefinition, side: Side, calls: list[Any], content: str, log: Log
) -> Answer:
    """Check a step's answer against the prompt's ``output_schema``.

    Args:
        flow: the running flow (its messages tell whether the last answer was rejected).
        prompt: the acting prompt (it has a schema).
        side: the acting side.
        calls: the step's tool calls.
        content: the step's text.
        log: the model call's log row (stored with the failed message on a second failure).

    Returns:
        The answer to store.

    Raises:
        StructuredOutputError: the answer is invalid and the previous one was rejected too.
    """
    final = next((c for c in calls if c.name == FINAL_TOOL), None)
    problems: list[str] = []
    if final is None and calls:
        return Answer(calls, content)  # tools first: not an answer yet
    if final is not None:
        data = final.arguments
    elif content.strip():
        data, problems = parse_text(content)
    else:
        return Answer(calls, content)  # empty: the engine's empty-response path handles it
    if not problems:
        value, problems = validate_output(prompt.output_schema, data)
        if not problems:
            if isinstance(value, BaseModel):
                value = value.model_dump(mode="json")
            text = json.dumps(value, ensure_ascii=False)
            return Answer([], text, {OUTPUT: value})
    if _rejected_before(flow, SIDE_ROLE[side]):
        await flow.kernel.store.insert_log(flow.thread.thread_id, log)
        flow.log_prepared(log.id)  # stored failed, with the error (no answer text: none counts)
        raise StructuredOutputError(prompt.name, problems)
    if final is None:
        final = ToolCall(
            id=f"call_{uuid.uuid4().hex[:8]}",
            function=ToolCallFunction(name=RETRY_CALL, arguments="{}"),
        )
    rejection = (
        f"The answer does not match the output schema of prompt '{prompt.name}': "
        f"{'; '.join(problems)}. Answer again with JSON that matches the schema"
        + (f" (call {FINAL_TOOL} with it)." if final.name == FINAL_TOOL else ", and nothing else.")
    )
    return Answer([final], content, {OUTPUT_ERROR: problems}, rejection)


async def end_child_session(flow: ModelFlow, answer: Answer) -> Literal["session_stop"] | None:
    """End a subagent's session on a validated answer: its JSON is what the parent receives.

    The schema is the child's deliverable, so the first answer that matches it ends the
    session successfully (as a ``session_stop`` would), with the JSON as the payload.
    Top-level threads and subprompt steps are not affected.
    """
    if (
        answer.metadata is None
        or OUTPUT not in answer.metadata
        or flow.thread.row.parent_id is None
        or flow.depth
        or flow.prompt_override is not None
    ):
        return None

    await flow.end_session(SessionOutcome("session_stop", failed=False, content=answer.content))
    return "session_stop"


class PartialOutput:
    """The answer's JSON as it streams, parsed as far as it goes (``output_chunk`` frames).

    Fed the chunks of one model call: the text deltas, or the argument deltas of its
    ``final_answer`` call. :meth:`feed` returns the partial value when a chunk changed it.
    """

    __slots__ = ("_text", "_final", "_last")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._final: str | None = None
        self._last: Any = None

    def reset(self) -> None:
        """Forget a failed attempt's text."""
        self._text.clear()
        self._final = self._last = None

    def feed(self, chunk: StreamChunk) -> Any:
        """Take one chunk; the partial value when it changed, else ``None``."""
        kind = chunk.type
        if kind == "tool-call-start" and chunk.name == FINAL_TOOL:
            self._final, self._text = chunk.id, []
            return None
        if kind == "content-delta" and self._final is None and chunk.delta:
            self._text.append(chunk.delta)
        elif kind == "tool-call-delta" and chunk.id == self._final and chunk.arguments_delta:
            self._text.append(chunk.arguments_delta)
        else:
            return None
        text = "".join(self._text).lstrip()
        if text.startswith("```"):
            text = text.partition("\n")[2]
        try:
            value = from_json(text, allow_partial=True)
        except ValueError:
            return None
        if value == self._last:
            return None
        self._last = value
        return value


def _rejected_before(flow: ModelFlow, role: str) -> bool:
    """Whether the acting side's last message in this flow was a rejected answer."""
    for message in reversed(flow.messages):
        if message.role == role:
            return bool((message.metadata or {}).get(OUTPUT_ERROR))
    return False
