"""Approvals across restarts with a blocking parent, and stop/terminate with pending approvals.

A blocking parent waits on a child whose tool call awaits approval; the runtime is closed (or,
in the crash tests, killed with SIGKILL) and reopened on the same database. The child's call
must still be pending, approving it must run the tool once, and the parent's original subagent
call must receive the child's result (no second child, no duplicate notification).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from worker_kill import kill_at_marker

from sa_core import Runtime
from sa_core.engine.tools.approvals import ApprovalNotFoundError
from sa_core.testing import FunctionProvider
from tests.test_approvals import bank_model, bank_pack, delegating_model, delegating_pack

WORKER = Path(__file__).with_name("approval_worker.py")


async def park_child(rt: Runtime) -> tuple[Any, str]:
    """Start the lead's blocking call; return (lead, child id) once the child awaits approval."""
    lead = await rt.create_thread("lead")
    await lead.send_message("pay cy", wait=False)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        await asyncio.sleep(0.01)
        await lead.refresh()
        if lead.children and lead.children[0].status == "awaiting_approval":
            return lead, lead.children[0].reference
    raise AssertionError("the parent's registry never showed awaiting_approval")


async def check_after_restart(
    rt: Runtime, lead_id: str, child_id: str, executed: list[Any]
) -> None:
    """The shared post-restart story: still pending, approve, one tool run, parent answered."""
    lead = await rt.get_thread(lead_id)
    child = await rt.get_thread(child_id)
    assert executed == []
    assert child.row.execution["status"] == "awaiting_approval"
    assert [(p["tool_call_id"], p["status"]) for p in await child.pending_approvals()] == [
        ("w1", "pending")
    ]
    assert [(c.reference, c.status) for c in lead.children] == [(child_id, "awaiting_approval")]
    await child.approve("w1")
    await rt.wait_idle(30)
    await lead.refresh()
    page = await lead.get_messages(limit=1000, include_silent=True)
    child_page = await child.get_messages(limit=1000, include_silent=True)
    assert executed == [("cy", 3)]
    # non-resumable: the child terminated once its result reached the parent
    assert len(lead.children) == 1 and lead.children[0].status == "terminated"
    calls = [c for m in page.messages if m.role == "assistant" for c in (m.tool_calls or [])]
    assert [c.name for c in calls] == ["payer"]
    tools = [m for m in page.messages if m.role == "tool"]
    assert [(m.tool_call_id, m.tool_status) for m in tools] == [(calls[0].id, "success")]
    assert tools[0].subagent_id == child_id
    assert "Sent 3 to cy" in (tools[0].content or "")
    assert not [m for m in page.messages if (m.metadata or {}).get("status_kind")]
    assert page.messages[-1].content.startswith("Parent saw: done: ['Sent 3 to cy']")
    assert [m.content for m in child_page.messages if m.role == "tool"][:1] == ["Sent 3 to cy"]
    assert await child.pending_approvals() == []
    await lead.refresh()
    assert lead.row.execution["status"] == "awaiting_human"


@pytest.mark.asyncio
async def test_blocking_parent_gets_its_child_result_after_a_clean_restart_and_approval(
    sa_runtime_factory,
):
    executed: list[Any] = []
    async with sa_runtime_factory(
        packs=[delegating_pack(executed)], providers={"test": delegating_model()}
    ) as rt:
        lead, child_id = await park_child(rt)
        lead_id = lead.thread_id
    async with sa_runtime_factory(
        packs=[delegating_pack(executed)], providers={"test": delegating_model()}
    ) as rt:
        # not wait_idle: the resumed parent's turn is in flight, blocked on its child
        await check_after_restart(rt, lead_id, child_id, executed)


def kill_while_child_awaits_approval(tmp_path: Path) -> tuple[Path, Path, str]:
    """Run ``approval_worker.py`` until the child parks, SIGKILL it; returns (db, ledger, lead)."""
    database, ledger = tmp_path / "sa.db", tmp_path / "ledger.jsonl"
    return database, ledger, kill_at_marker(WORKER, str(database), str(ledger))


@pytest.mark.asyncio
async def test_blocking_parent_gets_its_child_result_after_a_kill_and_approval(tmp_path):
    database, ledger, lead_id = kill_while_child_awaits_approval(tmp_path)
    assert not ledger.exists()  # the gated tool never ran in the killed process
    executed: list[Any] = []
    runtime = Runtime(
        packs=[delegating_pack(executed)],
        providers={"test": delegating_model()},
        database_url=f"sqlite:///{database}",
        load_entrypoints=False,
    )
    async with runtime:
        lead = await runtime.get_thread(lead_id)
        await check_after_restart(runtime, lead_id, lead.children[0].reference, executed)


# -- stop and terminate ---------------------------------------------------------------------

CANCELLED = "Failed to execute tool: Not run: the thread was {how} before a human decided."


@pytest.mark.asyncio
async def test_stopping_a_thread_cancels_its_pending_approvals_and_the_next_turn_runs(
    sa_runtime_factory,
):
    executed: list[Any] = []
    gated = bank_model()

    def answer(request: Any) -> Any:
        if request.messages[-1].content == "never mind":
            return "Fine, nothing sent."
        return gated.fn(request)

    provider = FunctionProvider(answer)
    async with sa_runtime_factory(packs=[bank_pack(executed)], providers={"test": provider}) as rt:
        thread = await rt.create_thread("teller")
        await thread.send_message("pay bob")
        await rt.wait_idle(60)
        assert [p["tool_call_id"] for p in await thread.pending_approvals()] == ["t1"]
        await thread.stop()
        await thread.refresh()
        assert await thread.pending_approvals() == []
        assert thread.row.execution["status"] == "idle"
        assert thread.row.execution["last_stop_reason"] == "aborted_by_user"
        page = await thread.get_messages()
        tools = [
            (m.tool_call_id, m.tool_status, m.content) for m in page.messages if m.role == "tool"
        ]
        assert tools == [("t1", "error", CANCELLED.format(how="stopped"))]
        with pytest.raises(ApprovalNotFoundError):
            await thread.approve("t1")
        await thread.send_message("never mind")
        await rt.wait_idle(60)
        await thread.refresh()
        page = await thread.get_messages()
    assert executed == []
    assert len(provider.requests) == 2  # the next turn ran: nothing kept it parked
    assert page.messages[-1].content == "Fine, nothing sent."
    assert thread.row.execution["status"] == "awaiting_human"


@pytest.mark.asyncio
async def test_a_decided_call_not_yet_run_is_also_cancelled_by_a_stop(sa_runtime_factory):
    executed: list[Any] = []
    calls = [
        {"name": "transfer", "arguments": {"to": "bob", "amount": 5}, "id": "t1"},
        {"name": "transfer", "arguments": {"to": "eve", "amount": 9}, "id": "t2"},
    ]
    async with sa_runtime_factory(
        packs=[bank_pack(executed)], providers={"test": bank_model(calls)}
    ) as rt:
        thread = await rt.create_thread("teller")
        await thread.send_message("pay")
        await rt.wait_idle(60)
        await thread.approve("t1")  # t2 still undecided: nothing runs yet
        await thread.stop()
        await rt.wait_idle(60)
        page = await thread.get_messages()
        assert await thread.pending_approvals() == []
    assert executed == []
    tools = [(m.tool_call_id, m.content) for m in page.messages if m.role == "tool"]
    assert tools == [
        ("t1", CANCELLED.format(how="stopped")),
        ("t2", CANCELLED.format(how="stopped")),
    ]


@pytest.mark.asyncio
async def test_terminating_a_child_with_pending_approvals_releases_its_blocking_parent(
    sa_runtime_factory,
):
    executed: list[Any] = []
    async with sa_runtime_factory(
        packs=[delegating_pack(executed)], providers={"test": delegating_model()}
    ) as rt:
        lead, child_id = await park_child(rt)
        child = await rt.get_thread(child_id)
        await child.terminate()
        await rt.wait_idle(60)
        await lead.refresh()
        page = await lead.get_messages()
        child_page = await child.get_messages(limit=1000, include_silent=True)
        assert await child.pending_approvals() == []
    assert executed == []
    assert [m.content for m in child_page.messages if m.role == "tool"] == [
        CANCELLED.format(how="terminated")
    ]
    assert [c.status for c in lead.children] == ["terminated"]
    tools = [m for m in page.messages if m.role == "tool"]
    assert len(tools) == 1 and tools[0].subagent_id == child_id
    assert lead.row.execution["status"] == "awaiting_human"


@pytest.mark.asyncio
async def test_stopping_a_blocking_parent_leaves_its_childs_approval_pending(sa_runtime_factory):
    executed: list[Any] = []
    delegating = delegating_model()

    def answer(request: Any) -> Any:
        last = request.messages[-1].content or ""
        if last.startswith("Subagent (reference:"):
            return "Noted."
        return delegating.fn(request)

    async with sa_runtime_factory(
        packs=[delegating_pack(executed)], providers={"test": FunctionProvider(answer)}
    ) as rt:
        lead, child_id = await park_child(rt)
        await lead.stop()
        child = await rt.get_thread(child_id)
        assert [p["status"] for p in await child.pending_approvals()] == ["pending"]
        await child.approve("w1")
        await rt.wait_idle(60)
        page = await lead.get_messages(limit=1000, include_silent=True)
        await lead.refresh()
    assert executed == [("cy", 3)]
    assert len(lead.children) == 1
    tools = [m.content for m in page.messages if m.role == "tool"]
    assert tools == ["Failed to execute tool: Execution stopped by user"]
    reports = [m.content or "" for m in page.messages if m.role == "user"][1:]
    assert len(reports) == 1 and "Sent 3 to cy" in reports[0]  # one notification, no 2nd call
    assert page.messages[-1].content == "Noted."


def test_stop_over_http_clears_pending_approvals(sa_database_url):
    from litestar.testing import TestClient

    from sa_core.server import create_app

    executed: list[Any] = []
    runtime = Runtime(
        packs=[bank_pack(executed)],
        providers={"test": bank_model()},
        database_url=sa_database_url,
        load_entrypoints=False,
    )
    with TestClient(create_app(runtime)) as client:
        key, _ = client.blocking_portal.call(runtime.store.create_api_key, "tests")
        client.headers["Authorization"] = f"Bearer {key}"
        base = "/api/packages/bank/threads"
        thread_id = client.post(base + "/", json={"agent": "teller"}).json()["id"]
        client.post(f"{base}/{thread_id}/messages", json={"content": "pay"})
        client.blocking_portal.call(runtime.wait_idle, 10)
        before = client.get(f"{base}/{thread_id}/approvals").json()
        stopped = client.post(f"{base}/{thread_id}/stop")
        after = client.get(f"{base}/{thread_id}/approvals").json()
        status = client.get(f"{base}/{thread_id}").json()["status"]
        late = client.post(f"{base}/{thread_id}/approvals/t1", json={"approve": True})
    assert [a["status"] for a in before["approvals"]] == ["pending"]
    assert stopped.status_code == 200
    assert after == {"approvals": [], "thread_status": "idle"}
    assert status == "idle"
    assert late.status_code == 404 and late.json()["error"] == "approval_not_found"
    assert executed == []


@pytest.mark.asyncio
async def test_childs_approval_stays_pending_through_a_kill_and_a_second_restart(tmp_path):
    database, ledger, lead_id = kill_while_child_awaits_approval(tmp_path)
    executed: list[Any] = []

    def runtime() -> Runtime:
        return Runtime(
            packs=[delegating_pack(executed)],
            providers={"test": delegating_model()},
            database_url=f"sqlite:///{database}",
            load_entrypoints=False,
        )

    async with runtime() as first:  # resumes the parent, which re-attaches and waits; closed
        lead = await first.get_thread(lead_id)
        child_id = lead.children[0].reference
        child = await first.get_thread(child_id)
        assert [p["status"] for p in await child.pending_approvals()] == ["pending"]
    async with runtime() as second:
        await check_after_restart(second, lead_id, child_id, executed)
    assert not ledger.exists()
