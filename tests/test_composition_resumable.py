"""Resumable subagents through the public API: lifecycle tools, the registry, attachments, restarts."""

from __future__ import annotations

import asyncio

import pytest
from composition_kit import (
    APPROVE,
    research_pack,
    resumable_entry,
    routed,
)

from sa_core.state import thread_of

# -- subagents: resumable -----------------------------------------------------------------------


@pytest.mark.asyncio
async def test_resumable_subagents_use_lifecycle_tools(sa_runtime_factory):
    pack = research_pack(resumable_entry(maxInstances=1))
    create = {"tool_calls": [{"name": "subagent_create", "arguments": {"agent": "researcher", "name": "alpha", "message": "study A", "attachments": []}}]}
    provider = routed(
        parent=[create, "started", "noted"],
        worker=["A done", "follow-up done"],
        reviewer=[APPROVE, {"tool_calls": [{"name": "approve", "arguments": {"summary": "Follow-up: 43"}}]}],
    )
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("go")
        tools_offered = [t.name for t in provider.seen["parent"][0].tools]
        assert "researcher" not in tools_offered
        assert {"subagent_create", "subagent_message"} <= set(tools_offered)
        await rt.wait_idle(timeout=60)
        await parent.refresh()
        reference = parent.children[0].reference
        assert parent.children[0].resumable is True and parent.children[0].thread_name == "alpha"
        # the cap: a second instance is refused with a hint
        result = await parent.invoke_tool("subagent_create", {"agent": "researcher", "name": "beta", "message": "B", "attachments": []})
        assert result.status == "error" and "Use subagent_message" in result.error and reference in result.error
        # the instance persists and can be messaged
        sent = await parent.invoke_tool("subagent_message", {"referenceId": reference, "message": "one more thing", "attachments": []})
        assert sent.result == f"Message sent to subagent {reference}."
        await rt.wait_idle(timeout=60)
        page = await parent.get_messages(include_silent=True)
    notes = [m.content for m in page.messages if m.silent]
    assert notes == [
        f"Subagent (reference: {reference}) has returned the following result:\n\nFindings: 42",
        f"Subagent (reference: {reference}) has returned the following result:\n\nFollow-up: 43",
    ]


@pytest.mark.asyncio
async def test_subagent_create_requires_a_name(sa_runtime_factory):
    pack = research_pack(resumable_entry())
    async with sa_runtime_factory(packs=[pack], providers={"test": routed(parent=["x"])}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("hi")
        thread_of(parent).prompt = parent.load_prompt("coordinator")  # the engine's handle
        result = await parent.invoke_tool("subagent_create", {"agent": "researcher", "name": " ", "message": "m", "attachments": []})
    assert result.status == "error" and "subagent_create requires name." in result.error


@pytest.mark.asyncio
async def test_blocking_resumable_waits_per_invocation_and_the_child_persists(sa_runtime_factory):
    pack = research_pack({"name": "researcher", "blocking": True, "resumable": {"receives_messages": "side_a", "maxInstances": 1}})
    create = {"tool_calls": [{"name": "subagent_create", "arguments": {"agent": "researcher", "name": "alpha", "message": "study A", "attachments": []}}]}
    again = {"tool_calls": [{"name": "subagent_create", "arguments": {"agent": "researcher", "name": "alpha", "message": "and B", "attachments": []}}]}
    provider = routed(
        parent=[create, "first", again, "second"],
        worker=["A", "B"],
        reviewer=[APPROVE, {"tool_calls": [{"name": "approve", "arguments": {"summary": "B found"}}]}],
    )
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("one")
        await parent.send_message("two")
        page = await parent.get_messages()
        await parent.refresh()
    tool_rows = [m for m in page.messages if m.role == "tool"]
    reference = parent.children[0].reference
    assert len(parent.children) == 1
    assert tool_rows[0].content == f"Findings: 42\n\nReference: {reference}"
    assert tool_rows[1].content == f"B found\n\nReference: {reference}"


@pytest.mark.asyncio
async def test_explicit_parent_communication_suppresses_auto_notification(sa_runtime_factory):
    pack = research_pack(resumable_entry(parentCommunication="explicit"))
    create = {"tool_calls": [{"name": "subagent_create", "arguments": {"agent": "researcher", "name": "a", "message": "go", "attachments": []}}]}
    provider = routed(parent=[create, "ok"], worker=["w"], reviewer=[APPROVE])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("go")
        await rt.wait_idle(timeout=60)
        page = await parent.get_messages(include_silent=True)
        assert not [m for m in page.messages if m.silent]
        await parent.refresh()
        child = await parent.get_child_thread(parent.children[0].reference)
        await child.set_status("halfway")
        await parent.refresh()
        assert parent.children[0].status == "halfway"
        provider_late = routed(parent=["thanks for the note"])
        rt.providers["test"] = provider_late
        await child.notify_parent("I need a decision")
        await rt.wait_idle(timeout=60)
        page = await parent.get_messages(include_silent=True)
    note = [m for m in page.messages if m.silent][0]
    assert note.content == "I need a decision" and note.metadata["subagent_id"] == child.thread_id


@pytest.mark.asyncio
async def test_session_status_updates_the_registry_without_ending(sa_runtime_factory):
    pack = research_pack({"name": "researcher", "initUserMessageProperty": "task"})
    provider = routed(
        parent=[{"tool_calls": [{"name": "researcher", "arguments": {"task": "x"}}]}, "done"],
        worker=[{"tool_calls": [{"name": "report_status", "arguments": {"reason": "collecting sources"}}]}, "finished"],
        reviewer=[APPROVE],
    )
    statuses = []
    original = None
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        original = rt.kernel.threads.update_child

        async def spy(parent_id, reference, **fields):
            statuses.append(fields.get("status"))
            return await original(parent_id, reference, **fields)

        rt.kernel.threads.update_child = spy
        parent = await rt.create_thread("lead")
        await parent.send_message("go")
    assert statuses[0] == "collecting sources" and statuses[-1] == "terminated"


@pytest.mark.asyncio
async def test_registry_system_message_lists_children(sa_runtime_factory):
    pack = research_pack(resumable_entry())
    create = {"tool_calls": [{"name": "subagent_create", "arguments": {"agent": "researcher", "name": "alpha", "message": "m", "attachments": []}}]}
    provider = routed(parent=[create, "ok", "second turn"], worker=["w"], reviewer=[APPROVE])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("go")
        await rt.wait_idle(timeout=60)
        await parent.send_message("status?")
    later = provider.seen["parent"][-1]
    system = [m.content for m in later.messages if m.role == "system"]
    assert any("alpha" in s and "researcher" in s for s in system[1:])


@pytest.mark.asyncio
async def test_optional_branch_is_hidden_unless_its_flag_is_true(sa_runtime_factory):
    pack = research_pack({"name": "researcher", "optional": "RESEARCH_ENABLED"})
    for flag, offered in (("no", False), ("Yes", True)):
        provider = routed(parent=["hi"])
        async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
            parent = await rt.create_thread("lead", env={"RESEARCH_ENABLED": flag})
            await parent.send_message("x")
        assert ("researcher" in [t.name for t in provider.seen["parent"][0].tools]) is offered


@pytest.mark.asyncio
async def test_attachments_are_copied_to_the_child_and_back(sa_runtime_factory):
    pack = research_pack({"name": "researcher", "initUserMessageProperty": "task", "initAttachmentsProperty": "files"})

    async def reviewer(request):
        # the child's own file, written before its reviewer approves it
        (entry,) = await rt.store.list_children(parent.thread_id)
        child = await rt.get_thread(entry.reference)
        await child.write_file("/attachments/report.md", "# Report")
        return {"tool_calls": [{"name": "approve", "arguments": {"summary": "see report", "files": ["/attachments/report.md"]}}]}

    provider = routed(
        parent=[{"tool_calls": [{"name": "researcher", "arguments": {"task": "read it", "files": ["/attachments/brief.txt"]}}]}, "ok"],
        worker=["read"],
        reviewer=[reviewer],
    )
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("lead")
        await parent.write_file("/attachments/brief.txt", "the brief")
        await parent.send_message("go")
        await parent.refresh()
        child = await parent.get_child_thread(parent.children[0].reference)
        child_files = [r.path for r in await child.find_files("/attachments/*")]
        page = await parent.get_messages()
        row = page.messages[2]
        copied_back = [line.strip() for line in row.content.split("\n") if line.startswith("/attachments/report-")]
        assert copied_back and await parent.read_file(copied_back[0]) == b"# Report"
    assert any(p.startswith("/attachments/brief-") for p in child_files)
    # the child's first step sees where its files are, then its task, each once
    seen = [(m.role, m.content) for m in provider.seen["worker"][0].messages[1:]]
    assert [role for role, _ in seen] == ["user", "user"]
    assert seen[0][1].startswith("Initial asset attachment path: /attachments/brief-")
    assert seen[1][1].startswith("read it")


@pytest.mark.asyncio
async def test_terminating_a_child_marks_the_registry_entry(sa_runtime_factory):
    pack = research_pack(resumable_entry())
    create = {"tool_calls": [{"name": "subagent_create", "arguments": {"agent": "researcher", "name": "a", "message": "m", "attachments": []}}]}
    provider = routed(parent=[create, "ok"], worker=["w"], reviewer=[APPROVE])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("go")
        await rt.wait_idle(timeout=60)
        await parent.refresh()
        child = await parent.get_child_thread(parent.children[0].reference)
        await child.terminate()
        await parent.refresh()
        assert parent.children[0].status == "terminated"
        result = await parent.invoke_tool("subagent_message", {"referenceId": child.thread_id, "message": "x", "attachments": []})
    assert result.error == f'Subagent reference "{child.thread_id}" is not active.'


@pytest.mark.asyncio
async def test_a_child_interrupted_by_shutdown_resumes_and_reports_after_restart(sa_runtime_factory):
    pack = research_pack({"name": "researcher", "blocking": False, "initUserMessageProperty": "task"})
    started = asyncio.Event()

    async def hang(request):
        started.set()
        await asyncio.sleep(60)

    first = routed(parent=[{"tool_calls": [{"name": "researcher", "arguments": {"task": "x"}}]}, "waiting"], worker=[hang])
    async with sa_runtime_factory(packs=[pack], providers={"test": first}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("go")
        await asyncio.wait_for(started.wait(), 60)
        reference = parent.children[0].reference
    # the worker was mid-call when the runtime closed; on restart the child's flow resumes
    second = routed(parent=["got it"], worker=["resumed work"], reviewer=[APPROVE])
    async with sa_runtime_factory(packs=[pack], providers={"test": second}) as rt:
        await rt.wait_idle(timeout=60)
        page = await (await rt.get_thread(parent.thread_id)).get_messages(include_silent=True)
        child_page = await (await rt.get_thread(reference)).get_messages()
    notes = [m.content for m in page.messages if m.silent]
    assert notes == [f"Subagent (reference: {reference}) has returned the following result:\n\nFindings: 42"]
    assert page.messages[-1].content == "got it"
    worker_rows = [m for m in child_page.messages if m.role == "assistant"]
    assert [(m.content, m.status) for m in worker_rows] == [(None, "failed"), ("resumed work", "completed")]
