"""``ThreadState.run_agent`` (seed 004 ``runAgent``): enqueue a flow of an agent on the thread."""

from __future__ import annotations

from typing import Any

import pytest

from sa_core import (
    Pack,
    ThreadTerminatedError,
    define_agent,
    define_model,
    define_prompt,
    define_tool,
)
from sa_core.errors import DefinitionNotFoundError
from sa_core.providers import ProviderRequest
from sa_core.testing import FunctionProvider

MODEL = define_model(name="fast", provider="test", model="m")


async def hand_over(state: Any) -> str:
    await state.run_agent("reviewer")
    return "handed over"


def make_pack(*more_agents: Any) -> Pack:
    main = define_prompt(
        name="main", model="fast", prompt="You help.", include_chat=True, tools=["hand_over"]
    )
    review = define_prompt(name="review", model="fast", prompt="You review.", include_chat=True)
    return Pack(
        name="demo",
        agents=[
            define_agent(name="helper", side_a={"prompt": "main"}),
            define_agent(name="reviewer", side_a={"prompt": "review"}),
            *more_agents,
        ],
        prompts=[main, review],
        models=[MODEL],
        tools=[define_tool(name="hand_over", description="Hand over.", execute=hand_over)],
    )


def answer(request: ProviderRequest) -> Any:
    """Each prompt answers in its own voice; the helper hands over when asked to."""
    system = request.messages[0].content
    last = request.messages[-1]
    if system == "You help." and last.role == "user" and last.content == "hand over":
        return {"tool_calls": [{"name": "hand_over", "arguments": {}}]}
    return f"{system} (after {last.role}: {last.content})"


@pytest.mark.asyncio
async def test_run_agent_on_an_idle_thread_runs_that_agents_flow_and_makes_it_the_owner(
    sa_runtime_factory,
):
    provider = FunctionProvider(answer)
    async with sa_runtime_factory(packs=[make_pack()], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("hello")
        await thread.run_agent("reviewer")
        await rt.wait_idle(timeout=5)
        page = await thread.get_messages(include_silent=True)
        reopened = await rt.get_thread(thread.thread_id)
    # the request is no message: the reviewer's side A answers the conversation as it is
    assert [(m.role, m.content) for m in page.messages] == [
        ("user", "hello"),
        ("assistant", "You help. (after user: hello)"),
        ("assistant", "You review. (after assistant: You help. (after user: hello))"),
    ]
    assert provider.requests[-1].messages[0].content == "You review."
    assert thread.agent_id == reopened.agent_id == "reviewer"


@pytest.mark.asyncio
async def test_run_agent_of_the_owning_agent_runs_another_flow_of_it(sa_runtime_factory):
    provider = FunctionProvider(answer)
    async with sa_runtime_factory(packs=[make_pack()], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("hello")
        await thread.run_agent("helper")
        await rt.wait_idle(timeout=5)
        page = await thread.get_messages()
    assert [m.content for m in page.messages][-1].startswith("You help. (after assistant:")
    assert len(page.messages) == 3 and thread.agent_id == "helper"


@pytest.mark.asyncio
async def test_run_agent_from_a_tool_runs_that_agent_before_the_threads_next_step(
    sa_runtime_factory,
):
    provider = FunctionProvider(answer)
    async with sa_runtime_factory(packs=[make_pack()], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("hand over")
        page = await thread.get_messages()
    assert [(m.role, m.content) for m in page.messages] == [
        ("user", "hand over"),
        ("assistant", None),
        ("tool", "handed over"),
        ("assistant", "You review. (after tool: handed over)"),  # same flow: it sees the call
    ]
    assert [r.messages[0].content for r in provider.requests] == ["You help.", "You review."]
    assert thread.agent_id == "reviewer"


@pytest.mark.asyncio
async def test_run_agent_with_an_unknown_name_names_it_and_lists_the_agents_it_can_run(
    sa_runtime_factory,
):
    async with sa_runtime_factory(
        packs=[make_pack()], providers={"test": FunctionProvider(answer)}
    ) as rt:
        thread = await rt.create_thread("helper")
        with pytest.raises(DefinitionNotFoundError) as info:
            await thread.run_agent("reviwer")
        assert (await thread.get_messages()).total == 0
        assert not await rt.store.list_queue(thread.thread_id)
    message = str(info.value)
    assert message.startswith("Unknown agent 'reviwer' in package 'demo'.")
    assert message.endswith("Known agents: helper, reviewer.")


@pytest.mark.asyncio
async def test_run_agent_on_a_terminated_thread_raises(sa_runtime_factory):
    async with sa_runtime_factory(
        packs=[make_pack()], providers={"test": FunctionProvider(answer)}
    ) as rt:
        thread = await rt.create_thread("helper")
        await thread.terminate()
        with pytest.raises(ThreadTerminatedError):
            await thread.run_agent("reviewer")


def test_sa_pack_takes_in_an_agent_that_packed_code_runs_with_run_agent() -> None:
    from sa_core.packaging.closure import compute_closure

    pack = make_pack(define_agent(name="unused", side_a={"prompt": "review"}))
    closure = compute_closure(pack, "helper")
    assert closure.names()["agents"] == ["helper", "reviewer"]  # hand_over runs "reviewer"
    assert closure.names()["prompts"] == ["main", "review"]
    assert closure.roles == {"reviewer": "handoff"}
