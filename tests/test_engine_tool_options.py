"""A prompt's tools entry ``{"name": ..., "options": {...}}`` reaches its tool as ``tool_options``.

Seed 002, PromptToolConfig.options: "Static options for this tool. Passed to the tool handler at
execution time."
"""

from __future__ import annotations

from typing import Any

import pytest

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool
from sa_core.testing import FunctionProvider

MODEL = define_model(name="fast", provider="test", model="test-model")
SUB_MODEL = define_model(name="sub_model", provider="test", model="sub")
CALL_LOOKUP = {"tool_calls": [{"name": "lookup", "arguments": {}}]}


def lookup_tool(seen: list[Any], body: Any = None) -> Any:
    """A tool that records the options it was given (then runs ``body``, if any)."""

    def lookup(state):
        seen.append(dict(state.tool_options))
        if body is not None:
            body(state)
        return "looked up"

    return define_tool(name="lookup", description="Look something up.", execute=lookup)


def call_once_then_answer(request) -> Any:
    """Ask for the lookup tool, then answer once its result is in."""
    return "done" if request.messages[-1].role == "tool" else CALL_LOOKUP


@pytest.mark.asyncio
async def test_the_same_tool_on_two_prompts_sees_each_prompts_options(sa_runtime_factory):
    seen: list[Any] = []
    eu = {"name": "lookup", "options": {"region": "eu", "limits": {"max": 3}}}
    us = {"name": "lookup", "options": {"region": "us"}, "env": {"DESK": "us"}}
    prompts = [
        define_prompt(name="eu", model="fast", prompt="EU desk.", tools=[eu]),
        define_prompt(name="us", model="fast", prompt="US desk.", tools=[us]),
        define_prompt(name="plain", model="fast", prompt="No options.", tools=["lookup"]),
    ]
    agents = [define_agent(name=f"{p.name}_agent", side_a={"prompt": p.name}) for p in prompts]
    pack = Pack(name="desks", agents=agents, prompts=prompts, models=[MODEL],
                tools=[lookup_tool(seen)])
    provider = FunctionProvider(call_once_then_answer)
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        for agent in ("eu_agent", "us_agent", "plain_agent"):
            thread = await rt.create_thread(agent)
            await thread.send_message("look it up")
            assert (await thread.get_messages()).messages[-1].content == "done"
            assert thread.tool_options == {}  # outside a tool call
    assert seen == [{"region": "eu", "limits": {"max": 3}}, {"region": "us"}, {}]


@pytest.mark.asyncio
async def test_a_subprompt_listing_the_tool_gives_its_own_options_and_the_caller_gets_its_back(
    sa_runtime_factory,
):
    seen: list[Any] = []
    main = define_prompt(name="main", model="fast", prompt="Main.", include_chat=True,
                         tools=[{"name": "lookup", "options": {"by": "main"}}, "second_opinion"])
    second = define_prompt(name="second_opinion", model="sub_model", prompt="Check again.",
                           tool_description="Ask for a second opinion.",
                           tools=[{"name": "lookup", "options": {"by": "second_opinion"}}])
    pack = Pack(name="p", agents=[define_agent(name="helper", side_a={"prompt": "main"})],
                prompts=[main, second], models=[MODEL, SUB_MODEL], tools=[lookup_tool(seen)])
    answers = {
        "test-model": [CALL_LOOKUP, {"tool_calls": [{"name": "second_opinion", "arguments": {}}]},
                       CALL_LOOKUP, "done"],
        "sub": [CALL_LOOKUP, "confirmed"],
    }
    provider = FunctionProvider(lambda request: answers[request.model].pop(0))
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("go")
        assert (await thread.get_messages()).messages[-1].content == "done"
    assert seen == [{"by": "main"}, {"by": "second_opinion"}, {"by": "main"}]


@pytest.mark.asyncio
async def test_tool_options_are_read_only(sa_runtime_factory):
    seen: list[Any] = []
    errors: list[str] = []

    def meddle(state):
        try:
            state.tool_options["region"] = "us"
        except TypeError as exc:
            errors.append(str(exc))

    prompt = define_prompt(name="main", model="fast", prompt="Main.", include_chat=True,
                           tools=[{"name": "lookup", "options": {"region": "eu"}}])
    pack = Pack(name="p", agents=[define_agent(name="helper", side_a={"prompt": "main"})],
                prompts=[prompt], models=[MODEL], tools=[lookup_tool(seen, meddle)])
    provider = FunctionProvider(call_once_then_answer)
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        for _ in range(2):
            thread = await rt.create_thread("helper")
            await thread.send_message("go")
    assert seen == [{"region": "eu"}] * 2
    assert len(errors) == 2 and "does not support item assignment" in errors[0]
