"""The ``summarize`` strategy: a transcript of the compacted messages, summarized by a model.

The calls go through the engine's model path (:meth:`ModelCaller.call`: retries,
fallbacks, usage and cost), each returning its unsaved ``llm_call`` log, marked
``data.purpose == "compaction"``; the caller stores those logs with the marker. A transcript
longer than the summarizer can read is summarized in parts, each folding into the summary so far.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sa_core.errors import SAError
from sa_core.providers import ProviderMessage

if TYPE_CHECKING:
    from sa_core.engine.flowview import FlowPlace
    from sa_core.spec import Log, Message, ModelDefinition

SUMMARY_PREFIX = "Summary of the earlier conversation (the messages it replaces stay stored):\n"
"""How a summary marker's content starts."""
SUMMARY_INSTRUCTIONS = (
    "You compact a conversation between a user, an assistant and its tools. Write a concise "
    "summary that lets the assistant continue the conversation: the user's goals and "
    "requests, decisions made, facts and numbers learned from tools, open questions and the "
    "current state of the work. Keep names, identifiers, file paths and figures exactly. "
    "Answer with the summary only."
)
"""The system prompt of every summarizer call (a scripted test model can recognise it)."""
PURPOSE = "compaction"
"""``data.purpose`` of the ``llm_call`` log of a summarizer call."""
MIN_PART_TOKENS = 4000
"""The smallest part of a transcript one summarizer call reads, in estimated tokens."""
RESULT_CHARS = 4000
"""Characters of one tool result kept in the transcript."""


class CompactionError(SAError):
    """The summarizer gave no summary."""


def transcript_lines(messages: list[Message]) -> list[str]:
    """One line per message: who said what, calls with their arguments, results."""
    lines = []
    for message in messages:
        text = message.content or ""
        if message.role == "tool":
            result = text if len(text) <= RESULT_CHARS else text[:RESULT_CHARS] + " [...]"
            lines.append(f"[result of {message.name or 'tool'}]: {result}")
            continue
        if message.role == "system":
            lines.append(f"[system]: {text}")
            continue
        if text:
            lines.append(f"{message.role}: {text}")
        for call in message.tool_calls or []:
            name, arguments = call.function.name, call.function.arguments
            lines.append(f"{message.role} called {name} with {arguments}")
    return lines


def _parts(lines: list[str], budget_chars: int) -> list[list[str]]:
    """Split lines into parts of at most ``budget_chars`` (a longer line is cut)."""
    parts: list[list[str]] = [[]]
    size = 0
    for line in lines:
        line = line[:budget_chars]
        if parts[-1] and size + len(line) > budget_chars:
            parts.append([])
            size = 0
        parts[-1].append(line)
        size += len(line) + 1
    return [part for part in parts if part]


def _request(summary: str | None, part: list[str]) -> list[ProviderMessage]:
    body = "\n".join(part)
    if summary:
        body = f"Summary so far:\n{summary}\n\nConversation since:\n{body}"
    else:
        body = f"Conversation:\n{body}"
    return [ProviderMessage("system", SUMMARY_INSTRUCTIONS), ProviderMessage("user", body)]


async def summarize(
    flow: FlowPlace,
    model: ModelDefinition,
    messages: list[Message],
    marker_id: str,
    trigger_tokens: int,
) -> tuple[str, list[Log]]:
    """Summarize ``messages`` (a leading summary marker is folded in) with ``model``.

    Args:
        flow: The flow compacting (its thread is billed for the calls).
        model: The summarizer.
        messages: The messages the marker will stand for, oldest first.
        marker_id: The marker's id (the calls' ``message_id``).
        trigger_tokens: The trigger; a part never exceeds it nor half the summarizer's window.

    Returns:
        The marker's content and the calls' unsaved ``llm_call`` logs.
    """
    summary: str | None = None
    if (
        messages
        and messages[0].role == "system"
        and (messages[0].content or "").startswith(SUMMARY_PREFIX)
    ):
        summary = (messages[0].content or "")[len(SUMMARY_PREFIX) :]
        messages = messages[1:]
    window = model.capabilities.max_context_tokens
    budget = max(MIN_PART_TOKENS, trigger_tokens)
    if window:
        budget = min(budget, max(1, window // 2))
    logs: list[Log] = []
    for part in _parts(transcript_lines(messages), budget * 4):
        response, log = await flow.kernel.models.call(
            flow.kernel,
            flow.thread,
            model,
            _request(summary, part),
            [],
            message_id=marker_id,
            depth=flow.depth,
        )
        log.data["purpose"] = PURPOSE
        logs.append(log)
        summary = (response.content or "").strip()
        if not summary:
            raise CompactionError(f"model '{model.name}' returned an empty summary")
    return SUMMARY_PREFIX + (summary or ""), logs
