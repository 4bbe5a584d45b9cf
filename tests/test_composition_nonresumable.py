"""Non-resumable subagents run once and terminate; only resumable ones can be messaged.

Seed 003: "non-resumable + blocking: parent waits, child completes, child terminates"; seed
001: non-resumable subagents have "no persistent addressing", and a terminated child's
registry entry says ``terminated``.
"""

from __future__ import annotations

import asyncio

import pytest

from sa_core.errors import ThreadTerminatedError
from tests.test_composition import APPROVE, research_pack, routed

CALL = {"tool_calls": [{"name": "researcher", "arguments": {"task": "find 42"}}]}
LIFECYCLE = {"subagent_create", "subagent_message", "subagents"}


@pytest.mark.asyncio
async def test_a_blocking_non_resumable_child_terminates_and_cannot_be_messaged(sa_runtime_factory):
    pack = research_pack({"name": "researcher", "blocking": True, "initUserMessageProperty": "task"})
    provider = routed(parent=[CALL, "Summarized"], worker=["found it"], reviewer=[APPROVE])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("research please")
        await parent.refresh()
        reference = parent.children[0].reference
        child = await rt.get_thread(reference)
        sent = await parent.invoke_tool(
            "subagent_message", {"referenceId": reference, "message": "again", "attachments": []}
        )
        with pytest.raises(ThreadTerminatedError):
            await child.send_message("anyone there?")
        await rt.wait_idle(timeout=10)
    assert parent.children[0].status == "terminated"
    assert child.terminated is not None
    # the parent's step after the call is offered no lifecycle tool for the finished child
    later = provider.seen["parent"][1]
    assert not LIFECYCLE & {t.name for t in later.tools}
    listing = next(m.content for m in later.messages if "Subagent instances" in (m.content or ""))
    assert f"{reference}: researcher (agent researcher) — terminated" in listing
    assert "subagent_message" not in listing
    assert sent.status == "error" and sent.error_code == "subagent_not_resumable"
    assert sent.error == (
        f'Subagent reference "{reference}" is a non-resumable researcher subagent: it ran once '
        "for the call that created it and cannot be messaged. Call researcher again for a new run."
    )
    assert len(provider.seen["worker"]) == 1  # nothing reran


@pytest.mark.asyncio
async def test_a_non_blocking_non_resumable_child_terminates_after_its_report(sa_runtime_factory):
    pack = research_pack({"name": "researcher", "blocking": False, "initUserMessageProperty": "task"})
    gate = asyncio.Event()

    async def worker_reply(request):
        await gate.wait()
        return "work done"

    provider = routed(parent=[CALL, "Waiting", "Got it"], worker=[worker_reply], reviewer=[APPROVE])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("go")
        assert parent.children[0].status == "running"
        gate.set()
        await rt.wait_idle(timeout=10)
        await parent.refresh()
        reference = parent.children[0].reference
        child = await rt.get_thread(reference)
        page = await parent.get_messages(include_silent=True)
    notes = [m.content for m in page.messages if m.silent]
    assert notes == [f"Subagent (reference: {reference}) has returned the following result:\n\nFindings: 42"]
    assert parent.children[0].status == "terminated" and child.terminated is not None
    assert not LIFECYCLE & {t.name for t in provider.seen["parent"][2].tools}


@pytest.mark.asyncio
async def test_a_non_resumable_child_stopped_by_a_limit_reports_that_limit(sa_runtime_factory):
    # no terminal tool: the result names the limit, not the termination that follows it
    pack = research_pack({"name": "researcher", "initUserMessageProperty": "task"})
    pack.agents[1].side_a.max_steps = 1
    status_call = {"tool_calls": [{"name": "report_status", "arguments": {"reason": "still looking"}}]}
    provider = routed(parent=[CALL, "ok"], worker=[status_call])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("go")
        await parent.refresh()
        row = (await parent.get_messages()).messages[2]
    assert row.tool_status == "error"
    assert row.content.startswith(
        "Failed to execute tool: Subagent execution stopped before completion (max_side_steps)."
    )
    assert parent.children[0].status == "terminated"
