"""Composition through the public API: subprompts, handoffs, and subagents that are not resumable
(resumable ones: test_composition_resumable.py; what children report: test_composition_child_reports.py).
"""

from __future__ import annotations

import asyncio

import pytest
from composition_kit import (
    APPROVE,
    PARENT,
    SUB,
    Task,
    research_pack,
    routed,
)

from sa_core import Pack, define_agent, define_prompt, define_tool

# -- subprompts -------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_subprompt_runs_one_step_with_its_own_model_and_stays_out_of_context(sa_runtime_factory):
    summarize = define_prompt(
        name="summarize", model="sub_model", prompt="Summarize.", tool_description="Summarize text.",
        required_schema=Task, tools=[],
    )
    main = define_prompt(name="main", model="parent_model", prompt="Main.", include_chat=True,
                         tools=[{"name": "summarize", "initUserMessageProperty": "task"}])
    agent = define_agent(name="helper", side_a={"prompt": "main"})
    pack = Pack(name="p", agents=[agent], prompts=[main, summarize], models=[PARENT, SUB])
    provider = routed(
        parent=[{"tool_calls": [{"name": "summarize", "arguments": {"task": "long text"}}]}, "Done"],
        sub=["short text"],
    )
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("go")
        top = await thread.get_messages()
        everything = await thread.get_messages(max_depth=None)
    sub_request = provider.seen["sub"][0]
    assert sub_request.messages[0].content == "Summarize."
    assert [(m.role, m.content) for m in sub_request.messages[1:]] == [("user", "long text")]
    assert top.messages[2].content == "short text"  # the tool result the parent sees
    assert all(m.depth == 0 for m in top.messages)
    nested = [m for m in everything.messages if m.depth == 1]
    assert [m.role for m in nested] == ["user", "assistant"] and nested[0].parent_id == top.messages[2].id
    parent_second = provider.seen["parent"][1]
    assert "long text" not in [m.content for m in parent_second.messages if m.role == "user"]


@pytest.mark.asyncio
async def test_subprompt_with_chat_but_without_past_tools_sees_no_tool_traffic(sa_runtime_factory):
    tick = define_tool(name="tick", description="Tick.", execute=lambda state: "ticked")
    summarize = define_prompt(
        name="summarize", model="sub_model", prompt="Summarize.", tool_description="Summarize the chat.",
        include_chat=True, include_past_tools=False, tools=[],
    )
    main = define_prompt(name="main", model="parent_model", prompt="Main.", include_chat=True, tools=["tick", "summarize"])
    agent = define_agent(name="helper", side_a={"prompt": "main"})
    pack = Pack(name="p", agents=[agent], prompts=[main, summarize], models=[PARENT, SUB], tools=[tick])
    provider = routed(
        parent=[{"tool_calls": [{"name": "tick", "arguments": {}}]}, "one", {"tool_calls": [{"name": "summarize", "arguments": {}}]}, "two"],
        sub=["a summary"],
    )
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("first")
        await thread.send_message("second")
    sub_view = provider.seen["sub"][0].messages
    assert [(m.role, m.content) for m in sub_view[1:]] == [("user", "first"), ("assistant", "one"), ("user", "second")]


@pytest.mark.asyncio
async def test_subprompt_errors_are_reported_in_the_result(sa_runtime_factory):
    def broken(state, args):
        raise RuntimeError("quota exceeded")

    tool = define_tool(name="fetch", description="x", execute=broken)
    sub = define_prompt(name="sub", model="sub_model", prompt="S.", tools=["fetch"])
    main = define_prompt(name="main", model="parent_model", prompt="M.", tools=["sub"])
    pack = Pack(name="p", agents=[define_agent(name="a", side_a={"prompt": "main"})], prompts=[main, sub], models=[PARENT, SUB], tools=[tool])
    provider = routed(parent=[{"tool_calls": [{"name": "sub", "arguments": {}}]}, "ok"], sub=[{"tool_calls": [{"name": "fetch", "arguments": {}}]}])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("a")
        await thread.send_message("go")
        page = await thread.get_messages()
    assert page.messages[2].content == "Failed to execute tool: Sub-prompt failed with 1 error(s):\n  fetch: quota exceeded"


# -- handoffs ---------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_handoff_transfers_the_thread_and_keeps_history(sa_runtime_factory):
    triage = define_prompt(name="triage", model="parent_model", prompt="Triage.", include_chat=True,
                           tools=[{"name": "billing", "initUserMessageProperty": "summary"}])
    billing_prompt = define_prompt(name="billing_main", model="sub_model", prompt="Billing.", include_chat=True)
    front = define_agent(name="front", side_a={"prompt": "triage"})
    billing = define_agent(name="billing", side_a={"prompt": "billing_main"}, expose_as_tool=True, tool_description="Billing questions.")
    pack = Pack(name="desk", agents=[front, billing], prompts=[triage, billing_prompt], models=[PARENT, SUB])
    provider = routed(
        parent=[{"tool_calls": [{"name": "billing", "arguments": {"summary": "refund for order 7"}}]}],
        sub=["I can help with the refund.", "Anything else?"],
    )
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("front")
        await thread.send_message("I want my money back")
        assert thread.agent_id == "billing"
        await thread.send_message("thanks")
        reopened = await rt.get_thread(thread.thread_id)
        assert reopened.agent_id == "billing"
        page = await thread.get_messages()
    assert page.messages[2].content == "Handoff complete"
    first_billing = provider.seen["sub"][0]
    assert first_billing.messages[0].content == "Billing."
    contents = [m.content for m in first_billing.messages]
    assert "I want my money back" in contents and "refund for order 7" in contents
    assert len(provider.seen["parent"]) == 1


# -- subagents: blocking, non-resumable --------------------------------------------------------


@pytest.mark.asyncio
async def test_blocking_subagent_returns_the_session_stop_payload(sa_runtime_factory):
    pack = research_pack({"name": "researcher", "blocking": True, "initUserMessageProperty": "task", "initAgentNameProperty": "label"})
    provider = routed(
        parent=[{"tool_calls": [{"name": "researcher", "arguments": {"task": "find 42", "label": "deep dive"}}]}, "Summarized"],
        worker=["Here is what I found"],
        reviewer=[APPROVE],
    )
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("research please")
        await parent.refresh()
        page = await parent.get_messages()
        entry = parent.children[0]
        child = await parent.get_child_thread(entry.reference)
        assert child is not None and (await child.get_parent_thread()).thread_id == parent.thread_id
        assert "name:deep dive" in child.tags
        child_page = await child.get_messages()
    tool_row = page.messages[2]
    assert tool_row.content == f"Findings: 42\n\nReference: {entry.reference}"
    assert tool_row.subagent_id == entry.reference
    # non-resumable: the child completed, so it terminated (seed 003)
    assert entry.name == "researcher" and entry.blocking is True and entry.status == "terminated"
    assert child.terminated is not None
    assert child_page.messages[0].content == "find 42"
    assert provider.seen["worker"][0].messages[-1].content == "find 42"
    assert page.messages[-1].content == "Summarized"


@pytest.mark.asyncio
async def test_blocking_subagent_failure_is_an_error_result(sa_runtime_factory):
    pack = research_pack({"name": "researcher", "initUserMessageProperty": "task"})
    provider = routed(
        parent=[{"tool_calls": [{"name": "researcher", "arguments": {"task": "x"}}]}, "ok"],
        worker=["attempt"],
        reviewer=[{"tool_calls": [{"name": "reject", "arguments": {"reason": "sources are unreliable"}}]}],
    )
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("go")
        await parent.refresh()
        page = await parent.get_messages()
    row = page.messages[2]
    assert row.tool_status == "error"
    assert row.content.startswith("Failed to execute tool: sources are unreliable\n\nReference: ")
    assert parent.children[0].status == "terminated"  # the failure is the call's result


# -- subagents: non-blocking, non-resumable ----------------------------------------------------


@pytest.mark.asyncio
async def test_non_blocking_subagent_notifies_the_parent_with_a_silent_message(sa_runtime_factory):
    pack = research_pack({"name": "researcher", "blocking": False, "initUserMessageProperty": "task"})
    gate = asyncio.Event()

    async def worker_reply(request):
        await gate.wait()
        return "work done"

    provider = routed(
        parent=[{"tool_calls": [{"name": "researcher", "arguments": {"task": "x"}}]}, "Waiting for research", "Got the result"],
        worker=[worker_reply],
        reviewer=[APPROVE],
    )
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("go")
        page = await parent.get_messages()
        reference = parent.children[0].reference
        assert page.messages[2].content == f"The subagent was initiated successfully. Reference: {reference}"
        assert page.messages[-1].content == "Waiting for research"
        gate.set()
        await rt.wait_idle(timeout=60)
        page = await parent.get_messages(include_silent=True)
    notification = [m for m in page.messages if m.silent][0]
    assert notification.content == f"Subagent (reference: {reference}) has returned the following result:\n\nFindings: 42"
    assert notification.role == "user" and notification.metadata["subagent_id"] == reference
    assert page.messages[-1].content == "Got the result"
    third = provider.seen["parent"][2]
    assert notification.content in [m.content for m in third.messages]
