"""Readable diffs of a replay's divergences: what a changed request or result says in words."""

from __future__ import annotations

import difflib
import json
from typing import TYPE_CHECKING, Any

from sa_core.engine.model.recording import normalise, request_texts, split_head

if TYPE_CHECKING:
    from sa_core.engine.model.recording import RequestDigest
    from sa_core.engine.model.replay_record import RecordedThread
    from sa_core.providers import ProviderMessage, ProviderRequest
    from sa_core.spec import Message


def unified(recorded: str, replayed: str, what: str = "") -> str:
    """A unified diff from the recorded text to the replayed one (normalised, 2 lines around)."""
    lines = difflib.unified_diff(
        normalise(recorded).splitlines(),
        normalise(replayed).splitlines(),
        f"recorded{' ' + what if what else ''}",
        f"replay{' ' + what if what else ''}",
        lineterm="",
        n=2,
    )
    return "\n".join(lines)


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def recorded_texts(recorded: RecordedThread, index: int) -> dict[str, Any] | None:
    """The texts of call ``index``'s request: carried by it, or by the last call before it."""
    for call in reversed(recorded.calls[: index + 1]):
        texts = call.request.get("texts")
        if texts is not None:
            return dict(texts)
    return None


def request_diff(
    recorded: RecordedThread,
    index: int,
    digest: RequestDigest,
    request: ProviderRequest,
) -> tuple[str, str]:
    """What changed between recorded call ``index`` and the replay's request: (summary, diff)."""
    was = recorded.calls[index].request
    now = digest.parts
    texts = recorded_texts(recorded, index) or {}
    current = request_texts(request)
    summaries: list[str] = []
    diffs: list[str] = []
    if was.get("model") != now["model"]:
        summaries.append(f"the model changed from {was.get('model')!r} to {now['model']!r}")
    if was.get("system") != now["system"]:
        summaries.append("the system prompt changed")
        diffs.append(
            unified("\n\n".join(texts.get("system", [])), "\n\n".join(current["system"]), "system")
        )
    summaries += _tools_diff(was.get("tools") or {}, now["tools"], texts, current, diffs)
    if was.get("settings") != now["settings"]:
        summaries.append("the request's settings changed")
        diffs.append(
            unified(_pretty(texts.get("settings")), _pretty(current["settings"]), "settings")
        )
    if was.get("messages") != now["messages"]:
        summaries.append(
            f"the conversation differs ({was.get('count')} messages recorded, {now['count']} now)"
        )
        diffs.append(_messages_diff(recorded, index, request))
    return "; ".join(summaries) or "the request changed", "\n".join(d for d in diffs if d)


def _tools_diff(
    was: dict[str, str],
    now: dict[str, str],
    texts: dict[str, Any],
    current: dict[str, Any],
    diffs: list[str],
) -> list[str]:
    summaries = []
    added = sorted(set(now) - set(was))
    removed = sorted(set(was) - set(now))
    changed = sorted(name for name in set(was) & set(now) if was[name] != now[name])
    if added:
        summaries.append("tools offered now that were not: " + ", ".join(added))
    if removed:
        summaries.append("tools no longer offered: " + ", ".join(removed))
    for name in changed:
        summaries.append(f"tool '{name}' changed (description or schema)")
        before = (texts.get("tools") or {}).get(name)
        diffs.append(unified(_pretty(before), _pretty(current["tools"].get(name)), f"tool {name}"))
    return summaries


def render_message(role: str, content: str | None, calls: list[tuple[str, Any]]) -> str:
    """One message as text for a diff: ``role: content`` and a line per tool call."""
    lines = [f"{role}: {content or ''}"]
    lines += [f"  -> {name}({_compact(arguments)})" for name, arguments in calls]
    return "\n".join(lines)


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def render_stored(message: Message) -> str:
    """A stored message as text for a diff."""
    calls = [(c.name, c.arguments) for c in message.tool_calls or []]
    return render_message(message.role, message.content, calls)


def render_sent(message: ProviderMessage) -> str:
    """A message of a request as text for a diff."""
    calls = [(c.name, c.arguments) for c in message.tool_calls]
    return render_message(message.role, message.content, calls)


def _messages_diff(recorded: RecordedThread, index: int, request: ProviderRequest) -> str:
    """The messages since the previous call: as recorded, and as the replay sends them."""
    calls = recorded.calls
    previous = calls[index - 1].request.get("count", 0) if index else 0
    by_id = {m.id: m for m in recorded.messages}
    answer = by_id.get(calls[index].message_id or "")
    before = by_id.get(calls[index - 1].message_id or "") if index else None
    depth = answer.depth if answer is not None else 0
    start = before.created_at if before is not None else -1
    end = answer.created_at if answer is not None else None
    was = [
        m
        for m in recorded.messages
        if m.depth == depth
        and m.status != "pending"
        and m.created_at >= start
        and (end is None or m.created_at < end)
    ]
    now = request.messages[split_head(request.messages) + int(previous) :]
    return unified(
        "\n".join(render_stored(m) for m in was),
        "\n".join(render_sent(m) for m in now),
        "messages",
    )


__all__ = ["recorded_texts", "render_sent", "render_stored", "request_diff", "unified"]
