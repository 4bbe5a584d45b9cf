"""Compaction: a long history is replaced, in the requests, by a marker message and its tail.

A step calls :func:`compact_history` with the history it is about to send. The history is first
seen through the newest markers (:func:`compacted_view`): the newest ``summarize`` marker stands
for every message up to its cut (``metadata.compaction.through``), and the newest
``drop_tool_results`` marker replaces the results of tool calls up to its cut by a short stub.
When the request built from that view would exceed the prompt's trigger (or the model's context
window), a new marker is written: one transaction holds the marker and the ``llm_call`` logs of
the summarizer calls, so a crash before it commits leaves nothing and the next step (after a
restart, the resumed flow's) compacts again; once it committed the view already holds it, so a
compaction is never stored twice. The compacted messages stay stored and listed by the API.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from sa_core import jsontext
from sa_core.engine.messages import announce_created, new_id, new_message, prepare_message
from sa_core.engine.model.compaction_summary import PURPOSE, summarize
from sa_core.errors import SAError

if TYPE_CHECKING:
    from sa_core.engine.flowview import ModelFlow
    from sa_core.engine.tools.tools import OfferedTool
    from sa_core.providers import ProviderMessage, ProviderTool
    from sa_core.spec import Log, Message, ModelDefinition, PromptDefinition

MARKER = "compaction"
"""Metadata key of a marker message: ``{"strategy", "through", "through_id", "messages",
"estimated_tokens", "trigger_tokens", "model"?}`` (``through``: ``created_at`` of the last
message the marker stands for)."""
DEFAULT_KEEP_LAST = 12
"""Messages kept verbatim by the compaction the context window imposes (none declared)."""
DEFAULT_TRIGGER_SHARE = 0.85
"""Share of the window (less the model's ``max_tokens``) at which that compaction starts."""
CHARS_PER_TOKEN = 4
"""The estimate: one token per four characters of text, tool-call arguments and tool schemas."""
CALIBRATE_SHARE = 0.25
"""Above this share of the trigger, the provider's last reported prompt tokens are read too."""
STUB = "[Result of {name} removed to save context ({chars} characters); call it again if needed.]"
"""What ``drop_tool_results`` sends instead of an old tool result."""
MAX_ROUNDS = 8
"""Rounds one step may take to get under the context window (``keep_last`` halves)."""
Strategy = Literal["summarize", "drop_tool_results"]


class ContextWindowExceededError(SAError):
    """The request would exceed the model's context window even after compaction."""


# ---------------------------------------------------------------------------------------------
# The view: the history as the markers say it is sent
# ---------------------------------------------------------------------------------------------


def marker_info(message: Message) -> dict[str, Any] | None:
    """The ``metadata.compaction`` of a marker message, else ``None``."""
    metadata = message.metadata
    if not metadata:
        return None
    info = metadata.get(MARKER)
    return info if isinstance(info, dict) else None


def is_marker(message: Message) -> bool:
    """Whether a stored message is a compaction marker."""
    return marker_info(message) is not None


class View(NamedTuple):
    """A history as it is sent: the active summary marker first, then what came after it.

    A named tuple (immutable), built on every model step: cheaper than a frozen dataclass.
    """

    messages: list[Message]
    newest_marker_at: int
    """``created_at`` of the newest marker in the history (0 without one)."""


def compacted_view(history: list[Message]) -> View:
    """Apply the newest markers of ``history`` (oldest first) to it."""
    summary: Message | None = None
    dropped: Message | None = None
    newest = 0
    for message in reversed(history):
        info = marker_info(message)
        if info is None:
            continue
        newest = max(newest, message.created_at)
        if info.get("strategy") == "drop_tool_results":
            dropped = dropped or message
        else:
            summary = message
            break
    if summary is None and dropped is None:
        return View(history, 0)
    skip_to = _through(summary)
    stub_to = _through(dropped)
    out: list[Message] = [summary] if summary is not None else []
    for message in history:
        if message.created_at <= skip_to or is_marker(message):
            continue
        if message.role == "tool" and message.created_at <= stub_to:
            message = _stubbed(message)
        out.append(message)
    return View(out, newest)


@dataclass(slots=True)
class _Scan:
    """How far a thread's history was searched for markers (it only grows at its end)."""

    first: Message | None
    seen: int = 0
    last: Message | None = None
    found: bool = False


SCANNED_THREADS = 4096
"""Threads whose marker search is remembered, at most (the most recently stepped)."""

_SCANS: OrderedDict[tuple[str, bool, bool], _Scan] = OrderedDict()


def _has_markers(flow: ModelFlow, prompt: PromptDefinition, history: list[Message]) -> bool:
    """Whether ``history`` holds a marker, searching only what earlier steps did not.

    The history a thread's steps send only grows at its end (for one kind of prompt), so a
    thread that never compacted costs each step a look at its new messages, not a walk over
    the whole history. A history that starts elsewhere, got shorter or changed within what
    was searched (a deleted message) is searched again.
    """
    key = (flow.thread.thread_id, prompt.include_chat, prompt.include_past_tools)
    first = history[0] if history else None
    scan = _SCANS.pop(key, None)
    seen = scan.seen if scan is not None else 0
    if (
        scan is None
        or scan.first is not first
        or seen > len(history)
        or (seen and history[seen - 1] is not scan.last)
    ):
        scan = _Scan(first)
    _SCANS[key] = scan
    if len(_SCANS) > SCANNED_THREADS:
        _SCANS.popitem(last=False)
    if not scan.found:
        for message in islice(history, scan.seen, None):
            if message.role == "system" and is_marker(message):
                scan.found = True
                break
        scan.seen, scan.last = len(history), first and history[-1]
    return scan.found


def _through(marker: Message | None) -> int:
    info = marker_info(marker) if marker is not None else None
    return int(info.get("through", -1)) if info is not None else -1


_stubs: OrderedDict[str, tuple[Message, Message]] = OrderedDict()
STUBS_KEPT = 4096


def _stubbed(message: Message) -> Message:
    """The tool message with its result replaced by :data:`STUB` (one copy per message)."""
    found = _stubs.get(message.id)
    if found is not None and (found[0] is message or found[1] is message):
        return found[1]
    text = STUB.format(name=message.name or "the tool", chars=len(message.content or ""))
    copy = message.model_copy(update={"content": text, "attachments": None})
    _stubs[message.id] = (message, copy)
    while len(_stubs) > STUBS_KEPT:
        _stubs.popitem(last=False)
    return copy


def _is_stub(message: Message) -> bool:
    found = _stubs.get(message.id)
    return found is not None and found[1] is message


# ---------------------------------------------------------------------------------------------
# Estimates
# ---------------------------------------------------------------------------------------------


def message_chars(message: Message) -> int:
    """Characters a stored message adds to a request (text, reasoning, tool calls)."""
    chars = len(message.content or "") + len(message.reasoning_content or "")
    for call in message.tool_calls or []:
        chars += len(call.function.name) + len(call.function.arguments)
    return chars


def tool_chars(name: str, description: str, parameters: Any) -> int:
    """Characters a tool definition adds to a request."""
    return len(name) + len(description) + len(jsontext.dumps_compact(parameters))


def tokens(chars: int) -> int:
    """The token estimate for ``chars`` characters."""
    return (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def estimate_request_tokens(
    messages: Sequence[ProviderMessage], tools: Sequence[ProviderTool] = ()
) -> int:
    """Estimated input tokens of a built request (the estimate compaction decides with)."""
    chars = 0
    for message in messages:
        chars += len(message.content or "") + len(message.reasoning or "")
        for call in message.tool_calls:
            chars += len(call.name) + len(jsontext.dumps_compact(call.arguments))
    for tool in tools:
        chars += tool_chars(tool.name, tool.description, tool.parameters)
    return tokens(chars)


# ---------------------------------------------------------------------------------------------
# The plan: when to compact, how, and the ceiling
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Plan:
    """The compaction a step applies."""

    strategy: Strategy
    trigger: int
    keep_last: int
    ceiling: int | None
    """The most input tokens the model takes (its window less its ``max_tokens``)."""
    model: str
    """The model definition that writes summaries."""


def plan_for(prompt: PromptDefinition, model: ModelDefinition) -> Plan | None:
    """The prompt's compaction, bounded by the model's window; ``None`` when neither is set."""
    window = model.capabilities.max_context_tokens
    ceiling = max(1, window - (model.max_tokens or 0)) if window else None
    config = prompt.compaction
    if config is None:
        if ceiling is None:
            return None
        trigger = max(1, int(ceiling * DEFAULT_TRIGGER_SHARE))
        return Plan("summarize", trigger, DEFAULT_KEEP_LAST, ceiling, prompt.model)
    trigger = config.trigger_tokens if ceiling is None else min(config.trigger_tokens, ceiling)
    return Plan(config.strategy, trigger, config.keep_last, ceiling, config.model or prompt.model)


# ---------------------------------------------------------------------------------------------
# The step's entry point
# ---------------------------------------------------------------------------------------------


async def compact_history(
    flow: ModelFlow,
    prompt: PromptDefinition,
    model: ModelDefinition,
    system_text: str,
    offered: dict[str, OfferedTool],
    history: list[Message],
) -> list[Message]:
    """The history a step sends: compacted through the markers, compacting now if it must.

    Args:
        flow: The flow whose step builds the request.
        prompt: The step's prompt (its ``compaction``).
        model: The step's model (its context window).
        system_text: The rendered system prompt (counted in the estimate).
        offered: The tools offered (counted in the estimate).
        history: The stored messages the step would send, oldest first.

    Raises:
        ContextWindowExceededError: nothing left to compact and still over the window.
    """
    view = compacted_view(history) if _has_markers(flow, prompt, history) else View(history, 0)
    plan = plan_for(prompt, model)
    if plan is None:
        return view.messages
    fixed = len(system_text) + sum(
        tool_chars(t.name, t.description, t.parameters) for t in offered.values()
    )
    estimate = await _estimate(flow, view, fixed, plan.trigger)
    if estimate <= plan.trigger:
        return view.messages
    strategy, keep = plan.strategy, plan.keep_last
    for _ in range(MAX_ROUNDS):
        compacted = await _compact_once(flow, plan, strategy, view, keep, estimate)
        if compacted is not None:
            view = compacted
            estimate = tokens(fixed + sum(message_chars(m) for m in view.messages))
        elif strategy == "drop_tool_results":
            strategy = "summarize"  # nothing left to stub: summarize to get under the window
            continue
        if plan.ceiling is None or estimate <= plan.ceiling or keep == 1:
            break
        keep = max(1, keep // 2)  # still over the window: keep fewer messages verbatim
    if plan.ceiling is not None and estimate > plan.ceiling:
        raise ContextWindowExceededError(
            f"prompt '{prompt.name}': the request needs about {estimate} input tokens, more than "
            f"model '{model.name}' takes ({plan.ceiling}: max_context_tokens less max_tokens), "
            "and nothing older is left to compact."
        )
    return view.messages


async def _estimate(flow: ModelFlow, view: View, fixed: int, trigger: int) -> int:
    """Estimated tokens of the request, raised to what the provider last reported plus the new.

    The provider's count is read only when the estimate is near the trigger (one read of the
    thread's newest logs), and only from a call made since the newest marker.
    """
    chars = fixed + sum(message_chars(m) for m in view.messages)
    estimate = tokens(chars)
    if estimate < trigger * CALIBRATE_SHARE:
        return estimate
    reported = await _reported_tokens(flow, view)
    return max(estimate, reported or 0)


async def _reported_tokens(flow: ModelFlow, view: View) -> int | None:
    """The last step's reported prompt tokens plus the estimate of what came after its call."""
    logs, _ = await flow.kernel.store.list_logs(flow.thread.thread_id, limit=8)
    positions = {m.id: i for i, m in enumerate(view.messages) if m.role != "tool"}
    for log in logs:
        data = log.data or {}
        if log.created_at <= view.newest_marker_at:
            return None  # older than the compaction: it measured another request
        if log.type != "llm_call" or data.get("error") or data.get("purpose") == PURPOSE:
            continue
        index = positions.get(str(data.get("message_id")))
        reported = int(data.get("input_tokens") or 0)
        if index is None or reported <= 0:
            return None
        return reported + tokens(sum(message_chars(m) for m in view.messages[index:]))
    return None


def choose_cut(messages: list[Message], keep_last: int, strategy: Strategy) -> int | None:
    """Where the kept tail starts in a view, or ``None`` when nothing new would be compacted.

    The tail never starts with a tool result: a call stays with its results.
    """
    start = 1 if messages and is_marker(messages[0]) else 0
    cut = max(start, len(messages) - keep_last)
    while cut > start and messages[cut].role == "tool":
        cut -= 1
    if cut <= start:
        return None
    if strategy == "drop_tool_results" and not any(
        m.role == "tool" and not _is_stub(m) for m in messages[start:cut]
    ):
        return None
    return cut


async def _compact_once(
    flow: ModelFlow, plan: Plan, strategy: Strategy, view: View, keep: int, estimate: int
) -> View | None:
    """Write one marker for ``view`` and return the new view; ``None`` if nothing to compact."""
    messages = view.messages
    cut = choose_cut(messages, keep, strategy)
    if cut is None:
        return None
    last = messages[cut - 1]
    marker_id = new_id()
    info: dict[str, Any] = {
        "strategy": strategy,
        "through": last.created_at,
        "through_id": last.id,
        "messages": cut - (1 if is_marker(messages[0]) else 0),
        "estimated_tokens": estimate,
        "trigger_tokens": plan.trigger,
    }
    logs: list[Log] = []
    if strategy == "summarize":
        summarizer = flow.scope.model(plan.model)
        content, logs = await summarize(flow, summarizer, messages[:cut], marker_id, plan.trigger)
        info["model"] = summarizer.name
    else:
        content = "Results of earlier tool calls were replaced by stubs to save context."
    marker = new_message(
        flow.thread.thread_id,
        "system",
        content,
        id=marker_id,
        depth=flow.depth,
        parent_id=flow.parent_message_id,
        log_id=logs[-1].id if logs else None,
        metadata={MARKER: info},
    )
    marker = await prepare_message(flow.kernel, flow.thread, marker)
    store = flow.kernel.store
    async with store.transaction() as tx:  # the marker and its model calls commit together
        for log in logs:
            await store.insert_log(flow.thread.thread_id, log, tx=tx)
        await store.insert_messages([marker], tx=tx)
    await announce_created(flow.kernel, flow.thread, [marker])
    flow.remember(marker)
    return compacted_view([*messages, marker])
