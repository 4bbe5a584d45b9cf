"""What a subagent reports to its parent: results, limits, attachments, relationships, stops."""

from __future__ import annotations

import asyncio

import pytest
from composition_kit import (
    APPROVE,
    Reason,
    research_pack,
    resumable_entry,
    routed,
)

from sa_core import Pack, define_agent, define_prompt, define_tool


@pytest.mark.asyncio
async def test_receives_messages_side_b_delivers_parent_messages_to_the_reviewer(sa_runtime_factory):
    pack = research_pack({"name": "researcher", "blocking": False, "resumable": {"receives_messages": "side_b"}})
    create = {"tool_calls": [{"name": "subagent_create", "arguments": {"agent": "researcher", "name": "r", "message": "check this draft", "attachments": []}}]}
    provider = routed(parent=[create, "sent", "ok"], reviewer=[APPROVE])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("go")
        await rt.wait_idle(timeout=60)
        child = await parent.get_child_thread(parent.children[0].reference)
        page = await child.get_messages()
    assert page.messages[0].role == "assistant" and page.messages[0].content == "check this draft"
    assert "worker" not in provider.seen  # side B acted first; the worker was never called
    assert provider.seen["reviewer"][0].messages[-1].role == "user"


@pytest.mark.asyncio
async def test_blocking_child_that_hits_max_session_turns_reports_the_spec_text(sa_runtime_factory):
    pack = research_pack({"name": "researcher", "initUserMessageProperty": "task"}, child_fields=None)
    pack.agents[1].max_session_turns = 2  # one turn of each side
    provider = routed(
        parent=[{"tool_calls": [{"name": "researcher", "arguments": {"task": "x"}}]}, "ok"],
        worker=["draft"],
        reviewer=["no tool, just talk"],
    )
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("go")
        row = (await parent.get_messages()).messages[2]
    assert row.tool_status == "error"
    assert row.content.startswith(
        "Failed to execute tool: Subagent execution stopped before completion (max_session_turns). "
        "It did not call a terminal session tool (sessionStop/sessionFail).\n\nReference: "
    )


@pytest.mark.asyncio
async def test_blocking_result_with_attachments_lists_them_once_and_ends_with_the_reference(sa_runtime_factory):
    pack = research_pack({"name": "researcher", "initUserMessageProperty": "task"})

    async def approve_with_file(request):
        # the child's own file, written before its reviewer approves it
        (entry,) = await rt.store.list_children(parent.thread_id)
        child = await rt.get_thread(entry.reference)
        await child.write_file("/attachments/out.md", "# out")
        return {"tool_calls": [{"name": "approve", "arguments": {"summary": "done", "files": ["/attachments/out.md"]}}]}

    provider = routed(parent=[{"tool_calls": [{"name": "researcher", "arguments": {"task": "x"}}]}, "ok"], worker=["w"], reviewer=[approve_with_file])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("go")
        row = (await parent.get_messages()).messages[2]
        reference = parent.children[0].reference
    assert row.content.endswith(f"\n\nReference: {reference}")
    assert row.content.count("/attachments/out-") == 1
    assert row.attachments and row.attachments[0].path.startswith("/attachments/out-")


@pytest.mark.asyncio
async def test_blocking_resumable_child_terminated_mid_invocation_is_not_its_previous_result(sa_runtime_factory):
    pack = research_pack({"name": "researcher", "blocking": True, "resumable": {"receives_messages": "side_a", "maxInstances": 1}})
    create = {"tool_calls": [{"name": "subagent_create", "arguments": {"agent": "researcher", "name": "alpha", "message": "study A", "attachments": []}}]}
    again = {"tool_calls": [{"name": "subagent_create", "arguments": {"agent": "researcher", "name": "alpha", "message": "and B", "attachments": []}}]}
    entered, never = asyncio.Event(), asyncio.Event()

    async def hang(request):
        entered.set()
        await never.wait()

    provider = routed(parent=[create, "first", again, "second"], worker=["A", hang], reviewer=[APPROVE])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("one")
        second = asyncio.ensure_future(parent.send_message("two"))
        await asyncio.wait_for(entered.wait(), 60)
        await parent.refresh()
        child = await parent.get_child_thread(parent.children[0].reference)
        await child.terminate()
        await asyncio.wait_for(second, 60)
        page = await parent.get_messages()
        await parent.refresh()
    tool_rows = [m for m in page.messages if m.role == "tool"]
    assert tool_rows[0].content.startswith("Findings: 42") and tool_rows[0].tool_status == "success"
    assert tool_rows[1].tool_status == "error" and "Findings: 42" not in tool_rows[1].content
    assert "(terminated)" in tool_rows[1].content
    assert parent.children[0].status == "terminated"


@pytest.mark.asyncio
async def test_subagent_message_uses_the_relationship_that_created_the_child(sa_runtime_factory):
    # Another prompt lists the same agent as a blocking relationship that talks to side B; a
    # message to this parent's (non-blocking, side A) child must keep this parent's settings.
    base = research_pack(resumable_entry())
    director = define_prompt(name="director", model="sub_model", prompt="Direct.", include_chat=True,
                             tools=[{"name": "researcher", "blocking": True, "resumable": {"receives_messages": "side_b"}}])
    boss = define_agent(name="boss", side_a={"prompt": "director"})
    pack = Pack(name="research", agents=[*base.agents, boss], prompts=[*base.prompts, director], models=base.models, tools=base.tools)
    create = {"tool_calls": [{"name": "subagent_create", "arguments": {"agent": "researcher", "name": "a", "message": "m", "attachments": []}}]}
    provider = routed(parent=[create, "started", "noted", "noted again"], worker=["w", "w2"], reviewer=[APPROVE, APPROVE], sub=["hello"])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        other = await rt.create_thread("boss")
        await other.send_message("hi")  # the director's tool table is now the first one built
        parent = await rt.create_thread("lead")
        await parent.send_message("go")
        await rt.wait_idle(timeout=60)
        await parent.refresh()
        reference = parent.children[0].reference
        sent = await parent.invoke_tool("subagent_message", {"referenceId": reference, "message": "one more thing", "attachments": []})
        await rt.wait_idle(timeout=60)
        child = await parent.get_child_thread(reference)
        page = await child.get_messages()
    assert sent.result == f"Message sent to subagent {reference}."
    delivered = [m for m in page.messages if m.content == "one more thing"]
    assert delivered[0].role == "user"  # side A receives it


@pytest.mark.asyncio
async def test_a_stopped_child_is_no_longer_running_in_the_parent_registry(sa_runtime_factory):
    pack = research_pack(resumable_entry())
    create = {"tool_calls": [{"name": "subagent_create", "arguments": {"agent": "researcher", "name": "a", "message": "m", "attachments": []}}]}
    entered, never = asyncio.Event(), asyncio.Event()

    async def hang(request):
        entered.set()
        await never.wait()

    provider = routed(parent=[create, "ok"], worker=[hang], reviewer=[APPROVE])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("go")
        await asyncio.wait_for(entered.wait(), 60)
        await parent.refresh()
        assert parent.children[0].status == "running"
        child = await parent.get_child_thread(parent.children[0].reference)
        await child.stop()
        await rt.wait_idle(timeout=60)
        await parent.refresh()
    assert parent.children[0].status == "idle"


@pytest.mark.asyncio
async def test_a_child_that_stops_itself_is_no_longer_running_in_the_parent_registry(sa_runtime_factory):
    async def stop_here(state, args):
        await state.stop()
        return "stopping"

    pack = research_pack(resumable_entry())
    pack.tools[:] = [t for t in pack.tools if t.name != "report_status"] + [
        define_tool(name="report_status", description="Status.", args=Reason, execute=stop_here)
    ]
    create = {"tool_calls": [{"name": "subagent_create", "arguments": {"agent": "researcher", "name": "a", "message": "m", "attachments": []}}]}
    provider = routed(
        parent=[create, "ok"],
        worker=[{"tool_calls": [{"name": "report_status", "arguments": {"reason": "pausing"}}]}],
        reviewer=[APPROVE],
    )
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("go")
        await rt.wait_idle(timeout=60)
        await parent.refresh()
    assert parent.children[0].status == "idle"
