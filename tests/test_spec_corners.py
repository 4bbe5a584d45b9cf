"""Spec corners: the repeated-error stop message (reference.md 6.2 step 13), the ``subagents``
listing (6.8), child-only ThreadState calls on a top-level thread (seed 004)."""

from __future__ import annotations

import pytest
from composition_kit import APPROVE, research_pack, resumable_entry, routed
from pydantic import BaseModel

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool
from sa_core.errors import NoParentThreadError
from sa_core.testing import TestProvider, TestScript

MODEL = define_model(name="fast", provider="test", model="test-model")


class Query(BaseModel):
    q: str


def failing_pack(calls: list[str]) -> Pack:
    def execute(state, args: Query) -> str:
        calls.append(args.q)
        raise RuntimeError("database is down")

    lookup = define_tool(name="lookup", description="Look up.", args=Query, execute=execute)
    prompt = define_prompt(name="main", model="fast", prompt="Help.", tools=["lookup"])
    agent = define_agent(name="helper", side_a={"prompt": "main"})
    return Pack(name="demo", agents=[agent], prompts=[prompt], models=[MODEL], tools=[lookup])


@pytest.mark.asyncio
async def test_the_same_tool_error_8_times_in_a_row_stops_with_a_message(sa_runtime_factory):
    calls: list[str] = []
    script = TestScript()
    for _ in range(9):
        script.add_tool_call_response([{"name": "lookup", "arguments": {"q": "x"}}])
    provider = TestProvider(script)
    async with sa_runtime_factory(packs=[failing_pack(calls)], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("find x")
        page = await thread.get_messages(limit=100)
    assert len(calls) == 8  # the ninth scripted call never ran
    errors = [m for m in page.messages if m.role == "tool"]
    assert len(errors) == 8 and all(m.tool_status == "error" for m in errors)
    last = page.messages[-1]
    assert last.role == "assistant" and not last.tool_calls
    assert last.content is not None
    assert last.content.startswith(
        "I've stopped because the same error kept happening 8 times in a row. The last error was: "
    )
    assert errors[-1].content is not None and errors[-1].content in last.content


@pytest.mark.asyncio
async def test_subagents_lists_the_relationship_name_not_the_instance_name(sa_runtime_factory):
    pack = research_pack(resumable_entry())
    create = {
        "tool_calls": [
            {
                "name": "subagent_create",
                "arguments": {
                    "agent": "researcher",
                    "name": "alpha instance",
                    "message": "study A",
                    "attachments": [],
                },
            }
        ]
    }
    provider = routed(parent=[create, "started", "ok"], worker=["A done"], reviewer=[APPROVE])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("go")
        await rt.wait_idle(timeout=60)
        await parent.refresh()
        entry = parent.children[0]
        listing = await parent.invoke_tool("subagents", {})
    assert entry.thread_name == "alpha instance"
    assert listing.result == (
        "Active subagent instances:\n"
        f"- {entry.reference}: researcher — {entry.status} ({entry.description})\n"
        "Message one with subagent_message(referenceId, message)."
    )


@pytest.mark.asyncio
async def test_notify_parent_and_set_status_without_a_parent_raise(sa_runtime_factory):
    async with sa_runtime_factory(packs=[failing_pack([])]) as rt:
        thread = await rt.create_thread("helper")
        with pytest.raises(NoParentThreadError) as notified:
            await thread.notify_parent("done")
        with pytest.raises(NoParentThreadError) as status:
            await thread.set_status("halfway")
    assert str(notified.value).startswith(
        f"notify_parent needs a parent thread, but thread {thread.thread_id} has none"
    )
    assert str(status.value).startswith("set_status needs a parent thread")
