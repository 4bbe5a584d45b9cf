"""Conversions kept per thread stay exact and bounded; the usage estimate reuses message sizes
without drifting.
"""

from __future__ import annotations

from typing import Any

import pytest
from cache_kit import chat_pack, empty_turn_counts, sqlite_store

from sa_core import Pack, define_agent, define_model, define_prompt
from sa_core.cachepolicy import ThreadUse
from sa_core.engine.model.context import converter_for, forget_converted
from sa_core.providers import ProviderMessage, ProviderRequest
from sa_core.spec.records import Message
from sa_core.testing import FunctionProvider, TestProvider

store = sqlite_store()
counted_turns = empty_turn_counts()


# -- conversions kept per thread -----------------------------------------------------------------


@pytest.mark.asyncio
async def test_every_turn_of_a_long_thread_sees_its_whole_history_in_order(sa_runtime_factory):
    pack, provider = chat_pack()
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as runtime:
        thread = await runtime.create_thread("chatter")
        for turn in range(12):
            await thread.send_message(f"question {turn}")
        converter = converter_for(thread.thread_id)
        await thread.send_message("last")
        assert converter_for(thread.thread_id) is converter  # kept across turns
    seen = [(m.role, m.content) for m in provider.requests[-1].messages]
    expected: list[tuple[str, str | None]] = [("system", "Chat.")]
    for turn in range(12):
        expected += [("user", f"question {turn}"), ("assistant", f"answer {2 * turn + 2}")]
    assert seen == [*expected, ("user", "last")]


@pytest.mark.asyncio
async def test_a_turn_is_counted_once_when_it_ends_however_many_steps_it_took(
    sa_runtime_factory: Any, counted_turns: ThreadUse
):
    from pydantic import BaseModel

    from sa_core import define_tool

    class Nothing(BaseModel):
        pass

    look = define_tool(name="look", description="Look.", args=Nothing, execute=lambda s, a: "ok")
    prompt = define_prompt(name="chat", model="fast", prompt="Chat.", include_chat=True,
                           tools=["look"])  # fmt: skip
    agent = define_agent(name="chatter", side_a={"prompt": "chat"})
    model = define_model(name="fast", provider="test", model="m")
    pack = Pack(name="p", agents=[agent], prompts=[prompt], models=[model], tools=[look])

    def answer(request: ProviderRequest) -> Any:
        if request.messages[-1].role == "user":  # two tool steps, then the answer
            return {"tool_calls": [{"name": "look", "arguments": {}}]}
        looked = sum(1 for message in request.messages if message.role == "tool")
        return {"tool_calls": [{"name": "look", "arguments": {}}]} if looked < 2 else "seen"

    provider = FunctionProvider(answer)
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as runtime:
        thread = await runtime.create_thread("chatter")
        counted = []
        for turn in range(2):
            await thread.send_message(f"look {turn}")
            counted.append(counted_turns.turns(thread.thread_id))
    assert provider.call_count == 6  # three steps a turn
    assert counted == [1, 2]


@pytest.mark.asyncio
async def test_a_kept_conversion_is_not_reused_when_the_history_changed_underneath():
    converter = converter_for("thread-x")
    try:
        one = Message(id="1", role="user", content="hello")
        two = Message(id="2", role="assistant", content="hi")
        first = await converter.convert([one, two], acting="a")
        assert [m.content for m in first] == ["hello", "hi"]
        edited = one.model_copy(update={"content": "HELLO"})
        again = await converter.convert([edited, two], acting="a")
        assert [m.content for m in again] == ["HELLO", "hi"]
        as_b = await converter.convert([edited, two], acting="b")
        assert [m.role for m in as_b] == ["assistant", "user"]
    finally:
        forget_converted("thread-x")


@pytest.mark.asyncio
async def test_kept_conversions_are_bounded_by_threads_and_messages(monkeypatch):
    from sa_core.engine.model import context

    monkeypatch.setattr(context, "CONVERTED_THREADS", 2)
    monkeypatch.setattr(context, "CONVERTED_MESSAGES", 3)
    forget_converted()
    try:
        first = converter_for("a")
        await first.convert([Message(id=str(i), role="user", content="x") for i in range(3)],
                            acting="a")  # fmt: skip
        converter_for("b")
        converter_for("c")
        assert list(context._converters) == ["b", "c"]  # "a": the least recently used
        big = converter_for("b")
        await big.convert([Message(id=f"b{i}", role="user", content="y") for i in range(4)],
                          acting="a")  # fmt: skip
        converter_for("c")
        assert list(context._converters) == ["c"]  # "b" held more than the bound
    finally:
        forget_converted()


@pytest.mark.asyncio
async def test_the_usage_estimate_is_the_same_when_message_sizes_are_reused():
    from sa_core.providers import ProviderResponse
    from sa_core.testing.answers import estimated_usage

    provider = TestProvider()
    history = [ProviderMessage("system", "S" * 40), ProviderMessage("user", "u" * 400)]
    for turn in range(3):
        request = ProviderRequest(model="m", messages=list(history), user="thread-1")
        answer = await provider.generate(request)
        expected = estimated_usage(request, ProviderResponse(content=answer.content))
        assert answer.usage.prompt_tokens == expected.prompt_tokens
        history[0] = ProviderMessage("system", "S" * 100 * (turn + 2))  # a new system prompt
        history += [
            ProviderMessage("assistant", answer.content),
            ProviderMessage("user", "x" * turn),
        ]


@pytest.mark.asyncio
async def test_the_usage_estimate_is_exact_when_history_grows_or_an_earlier_message_changes():
    from sa_core.providers import ProviderResponse
    from sa_core.testing.answers import estimated_usage

    provider = TestProvider()
    history = [ProviderMessage("system", "S" * 40), ProviderMessage("user", "u" * 400)]

    async def estimate_matches() -> None:
        request = ProviderRequest(model="m", messages=list(history), user="thread-1")
        answer = await provider.generate(request)
        expected = estimated_usage(request, ProviderResponse(content=answer.content))
        assert answer.usage.prompt_tokens == expected.prompt_tokens
        history.extend([ProviderMessage("assistant", answer.content), ProviderMessage("user", "v")])

    for _ in range(3):  # the previous request's messages, then new ones
        await estimate_matches()
    history[1] = ProviderMessage("user", "w" * 4000)  # an earlier message replaced
    await estimate_matches()
    history[:] = history[:3]  # a shorter request (the context trimmed)
    await estimate_matches()


def test_the_usage_estimate_keeps_message_sizes_within_its_bounds(
    monkeypatch: pytest.MonkeyPatch, counted_turns: ThreadUse
) -> None:
    from sa_core.testing.answers import PromptSizes

    monkeypatch.setattr(PromptSizes, "MESSAGES", 10)
    sizes = PromptSizes()
    two = [ProviderMessage("user", "u" * 10), ProviderMessage("assistant", "a" * 5)]
    for index in range(10):  # new threads: each taken in, the least recent going
        assert sizes.chars(ProviderRequest(model="m", messages=two, user=f"u-{index}")) == 15
    assert sizes._held == 10 and list(sizes._last) == [f"u-{index}" for index in range(5, 10)]
    for index in range(10):
        counted_turns.used(f"u-{index}")
    sizes.chars(ProviderRequest(model="m", messages=two, user="u-0"))
    assert "u-0" not in sizes._last  # as many turns as the least recent one kept: not taken in
    counted_turns.used("u-0")
    sizes.chars(ProviderRequest(model="m", messages=two, user="u-0"))
    assert "u-0" in sizes._last and "u-5" not in sizes._last and sizes._held == 10
