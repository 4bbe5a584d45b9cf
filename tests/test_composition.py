"""Composition through the public API: subprompts, handoffs, and subagents in all four modes."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool
from sa_core.state import thread_of
from sa_core.testing import FunctionProvider

PARENT = define_model(name="parent_model", provider="test", model="parent")
WORKER = define_model(name="worker_model", provider="test", model="worker")
REVIEWER = define_model(name="reviewer_model", provider="test", model="reviewer")
SUB = define_model(name="sub_model", provider="test", model="sub")


class Task(BaseModel):
    task: str
    label: str = ""
    files: list[str] = []


class Summary(BaseModel):
    summary: str
    files: list[str] = []


class Reason(BaseModel):
    reason: str


def ok(state, args):
    return "recorded"


def routed(**queues):
    """A FunctionProvider answering per wire model id from scripted queues (str / dict / callable)."""
    queues = {k: list(v) for k, v in queues.items()}
    seen: dict[str, list] = {k: [] for k in queues}

    def answer(request):
        seen[request.model].append(request)
        queue = queues[request.model]
        if not queue:
            raise AssertionError(f"no scripted answer left for {request.model}")
        item = queue.pop(0)
        return item(request) if callable(item) else item

    provider = FunctionProvider(answer)
    provider.seen = seen
    return provider


def research_pack(subagent_entry, *, parent_prompt_fields=None, extra_tools=(), child_fields=None) -> Pack:
    approve = define_tool(name="approve", description="Approve the research.", args=Summary, execute=ok)
    reject = define_tool(name="reject", description="Reject.", args=Reason, execute=ok)
    status = define_tool(name="report_status", description="Status.", args=Reason, execute=ok)
    coordinator = define_prompt(
        name="coordinator", model="parent_model", prompt="Coordinate.", include_chat=True,
        tools=[subagent_entry, *extra_tools], **(parent_prompt_fields or {}),
    )
    worker = define_prompt(name="worker", model="worker_model", prompt="Research.", include_chat=True, tools=["report_status"], required_schema=Task)
    reviewer = define_prompt(name="reviewer", model="reviewer_model", prompt="Review.", include_chat=True, tools=["approve", "reject"])
    researcher = define_agent(
        name="researcher",
        type="dual_ai",
        expose_as_tool=True,
        tool_description="Researches a topic.",
        max_session_turns=5,
        side_a={"prompt": "worker", "session_status": {"name": "report_status", "message_property": "reason"}},
        side_b={
            "prompt": "reviewer",
            "stop_on_response": False,
            "session_stop": {"name": "approve", "message_property": "summary", "attachments_property": "files"},
            "session_fail": {"name": "reject", "message_property": "reason"},
        },
        **(child_fields or {}),
    )
    lead = define_agent(name="lead", side_a={"prompt": "coordinator"})
    return Pack(
        name="research", agents=[lead, researcher], prompts=[coordinator, worker, reviewer],
        models=[PARENT, WORKER, REVIEWER, SUB], tools=[approve, reject, status],
    )


APPROVE = {"tool_calls": [{"name": "approve", "arguments": {"summary": "Findings: 42"}}]}


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


# -- subagents: resumable -----------------------------------------------------------------------


def resumable_entry(**resumable):
    return {"name": "researcher", "blocking": False, "resumable": {"receives_messages": "side_a", **resumable}}


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
