"""The history a flow starts from, filtered incrementally per thread (``engine/pastcontext``).

The incremental result must always equal filtering the whole history from scratch, whatever
changed since the previous turn; reuse is only an optimisation.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sa_core.engine.model import pastcontext
from sa_core.engine.model.pastcontext import (
    UNSENT,
    excluding,
    filtered_history,
    forget_filtered,
    without_past_tools,
)
from sa_core.spec.records import Message, ToolCall, ToolCallFunction


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    forget_filtered()
    yield
    forget_filtered()


def turn(n: int, *, status: str | None = None) -> list[Message]:
    """A user message, an assistant tool call with text, its tool result and an answer."""
    call = ToolCall(id=f"c{n}", function=ToolCallFunction(name="tick", arguments="{}"))
    base = n * 10
    return [
        Message(id=f"u{n}", role="user", content=f"q{n}", created_at=base + 1),
        Message(id=f"a{n}", role="assistant", content="let me look", tool_calls=[call],
                created_at=base + 2),
        Message(id=f"t{n}", role="tool", content="ok", tool_call_id=f"c{n}", created_at=base + 3),
        Message(id=f"r{n}", role="assistant", content=f"answer {n}", status=status,
                created_at=base + 4),
    ]  # fmt: skip


def from_scratch(history: list[Message]) -> tuple[list[Message], list[Message]]:
    sent = [m for m in history if m.status not in UNSENT]
    return sent, without_past_tools(sent)


def dumps(messages: list[Message]) -> list[dict[str, object]]:
    return [m.model_dump() for m in messages]


def test_a_growing_history_filters_like_from_scratch_and_keeps_its_stripped_copies() -> None:
    history = turn(1)
    sent, stripped = filtered_history("t", history)
    first_copy = stripped[1]
    assert first_copy.tool_calls is None and first_copy.content == "let me look"
    history = history + turn(2, status="failed") + turn(3)
    sent, stripped = filtered_history("t", list(history))
    expected_sent, expected_stripped = from_scratch(history)
    assert dumps(sent) == dumps(expected_sent)
    assert dumps(stripped) == dumps(expected_stripped)
    assert stripped[1] is first_copy  # made once: later turns' conversions find it by identity
    assert "r2" not in [m.id for m in sent]  # a failed answer never reached a model


def test_a_changed_earlier_message_makes_it_filter_again() -> None:
    history = turn(1) + turn(2)
    filtered_history("t", history)
    edited = list(history)
    edited[0] = edited[0].model_copy(update={"content": "edited"})
    sent, stripped = filtered_history("t", edited + turn(3))
    expected_sent, expected_stripped = from_scratch(edited + turn(3))
    assert dumps(sent) == dumps(expected_sent) and sent[0].content == "edited"
    assert dumps(stripped) == dumps(expected_stripped)


def test_a_shorter_history_is_filtered_again() -> None:
    history = turn(1) + turn(2)
    filtered_history("t", history)
    sent, _ = filtered_history("t", turn(1))
    assert [m.id for m in sent] == ["u1", "a1", "t1", "r1"]


def test_threads_are_kept_apart() -> None:
    filtered_history("one", turn(1))
    sent, _ = filtered_history("two", turn(2))
    assert [m.id for m in sent] == ["u2", "a2", "t2", "r2"]


def test_the_kept_histories_are_bounded_by_their_messages_not_only_by_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Long threads must not keep every message they ever had (memory under a long load)."""
    monkeypatch.setattr(pastcontext, "KEPT_MESSAGES", 10)
    history = turn(1) + turn(2)  # 8 messages: this thread alone fits
    _, stripped = filtered_history("old", history)
    _, again = filtered_history("old", list(history))
    assert again[1] is stripped[1]  # kept: the stripped copy is reused
    filtered_history("new", turn(3))  # 8 more: over the bound, the least recent thread goes
    _, after = filtered_history("old", list(history))
    assert after[1] is not stripped[1]  # filtered again from scratch, the result unchanged
    assert dumps(after) == dumps(from_scratch(history)[1])


def test_a_thread_longer_than_the_bound_is_still_filtered_incrementally(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pastcontext, "KEPT_MESSAGES", 2)
    history = turn(1) + turn(2)
    _, stripped = filtered_history("long", history)
    _, again = filtered_history("long", history + turn(3))
    assert again[1] is stripped[1]  # the thread being filtered always stays


def test_excluding_drops_only_the_flows_own_messages() -> None:
    history = turn(1) + turn(2)
    kept = excluding(history, {"u2", "r2"}, since=21)
    assert [m.id for m in kept] == ["u1", "a1", "t1", "r1", "a2", "t2"]
    assert excluding(history, set(), since=None) == history
    assert [m.id for m in excluding(history, {"u1"}, since=None)][0] == "a1"
