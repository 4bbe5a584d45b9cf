"""Human approval of tool calls through the public API, over HTTP, across restarts and subagents."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from pydantic import BaseModel

from sa_core import Pack, Runtime, define_agent, define_model, define_prompt, define_tool
from sa_core.engine.tools.approvals import (
    ApprovalArgumentsError,
    ApprovalConflictError,
    ApprovalNotFoundError,
)
from sa_core.testing import FunctionProvider

MODEL = define_model(name="fast", provider="test", model="fast")
WORKER = define_model(name="worker_model", provider="test", model="worker")


class Transfer(BaseModel):
    to: str
    amount: int


def bank_pack(executed: list[Any], *, gate_in_prompt: bool = False) -> Pack:
    def transfer(state: Any, args: Transfer) -> str:
        executed.append((args.to, args.amount))
        return f"Sent {args.amount} to {args.to}"

    def balance(state: Any) -> str:
        executed.append("balance")
        return "Balance: 100"

    tools = [
        define_tool(
            name="transfer",
            description="Send money.",
            args=Transfer,
            execute=transfer,
            requires_approval=not gate_in_prompt,
        ),
        define_tool(name="balance", description="Read the balance.", execute=balance),
    ]
    entries: list[Any] = ["balance"]
    entries.append(
        {"name": "transfer", "requires_approval": True} if gate_in_prompt else "transfer"
    )
    prompt = define_prompt(name="main", model="fast", prompt="Bank.", tools=entries)
    agent = define_agent(name="teller", side_a={"prompt": "main"})
    return Pack(name="bank", agents=[agent], prompts=[prompt], models=[MODEL], tools=tools)


def bank_model(calls: list[dict[str, Any]] | None = None) -> FunctionProvider:
    """Calls ``transfer`` (and whatever else is given) once, then reports the last tool result."""
    calls = calls or [{"name": "transfer", "arguments": {"to": "bob", "amount": 5}, "id": "t1"}]

    def answer(request: Any) -> Any:
        if any(m.role == "tool" for m in request.messages):
            return "Result: " + str([m.content for m in request.messages if m.role == "tool"])
        return {"tool_calls": calls}

    return FunctionProvider(answer)


async def start(rt: Runtime) -> Any:
    thread = await rt.create_thread("teller")
    await thread.send_message("pay bob")
    await rt.wait_idle(60)
    await thread.refresh()
    return thread


@pytest.mark.asyncio
async def test_gated_call_parks_the_thread_until_approved(sa_runtime_factory):
    executed: list[Any] = []
    provider = bank_model()
    async with sa_runtime_factory(packs=[bank_pack(executed)], providers={"test": provider}) as rt:
        thread = await start(rt)
        assert executed == []
        assert thread.row.execution["status"] == "awaiting_approval"
        assert thread.row.execution["last_stop_reason"] == "awaiting_approval"
        pending = await thread.pending_approvals()
        assert [(p["tool_call_id"], p["name"], p["arguments"], p["status"]) for p in pending] == [
            ("t1", "transfer", {"to": "bob", "amount": 5}, "pending")
        ]
        assert len(provider.requests) == 1
        await thread.approve("t1")
        await rt.wait_idle(60)
        await thread.refresh()
        page = await thread.get_messages()
        assert await thread.pending_approvals() == []
    assert executed == [("bob", 5)]
    tool = [m for m in page.messages if m.role == "tool"][0]
    assert (tool.tool_call_id, tool.content, tool.tool_status) == ("t1", "Sent 5 to bob", "success")
    assert page.messages[-1].content == "Result: ['Sent 5 to bob']"
    assert thread.row.execution["status"] == "awaiting_human"


@pytest.mark.asyncio
async def test_approval_with_edited_arguments_is_validated_against_the_tool(sa_runtime_factory):
    executed: list[Any] = []
    async with sa_runtime_factory(
        packs=[bank_pack(executed)], providers={"test": bank_model()}
    ) as rt:
        thread = await start(rt)
        with pytest.raises(ApprovalArgumentsError) as caught:
            await thread.approve("t1", arguments={"to": "bob", "amount": "lots"})
        assert "amount" in str(caught.value)
        with pytest.raises(ApprovalNotFoundError):
            await thread.approve("nope")
        await thread.approve("t1", arguments={"to": "bob", "amount": 2})
        with pytest.raises(ApprovalConflictError):
            await thread.deny("t1", "too late")
        await rt.wait_idle(60)
    assert executed == [("bob", 2)]


@pytest.mark.asyncio
async def test_denied_call_stores_a_failed_result_the_model_sees(sa_runtime_factory):
    executed: list[Any] = []
    provider = bank_model()
    async with sa_runtime_factory(packs=[bank_pack(executed)], providers={"test": provider}) as rt:
        thread = await start(rt)
        await thread.deny("t1", "bob is not a known payee")
        await rt.wait_idle(60)
        page = await thread.get_messages()
    assert executed == []
    tool = [m for m in page.messages if m.role == "tool"][0]
    assert tool.tool_status == "error"
    assert tool.content == "Failed to execute tool: A human denied this tool call: bob is not a known payee"
    assert "bob is not a known payee" in str(provider.requests[-1].messages[-1].content)


@pytest.mark.asyncio
async def test_prompt_config_gates_a_tool_and_ungated_calls_of_the_step_run_at_once(
    sa_runtime_factory,
):
    executed: list[Any] = []
    calls = [
        {"name": "balance", "arguments": {}, "id": "b1"},
        {"name": "transfer", "arguments": {"to": "amy", "amount": 1}, "id": "t1"},
    ]
    pack = bank_pack(executed, gate_in_prompt=True)
    async with sa_runtime_factory(packs=[pack], providers={"test": bank_model(calls)}) as rt:
        thread = await start(rt)
        assert executed == ["balance"]
        assert [p["tool_call_id"] for p in await thread.pending_approvals()] == ["t1"]
        await thread.approve("t1")
        await rt.wait_idle(60)
        page = await thread.get_messages()
    assert executed == ["balance", ("amy", 1)]
    assert page.messages[-1].content == "Result: ['Balance: 100', 'Sent 1 to amy']"


@pytest.mark.asyncio
async def test_a_new_message_while_awaiting_approval_keeps_the_thread_parked(sa_runtime_factory):
    executed: list[Any] = []
    provider = bank_model()
    async with sa_runtime_factory(packs=[bank_pack(executed)], providers={"test": provider}) as rt:
        thread = await start(rt)
        await thread.send_message("hurry up")
        await rt.wait_idle(60)
        await thread.refresh()
        assert len(provider.requests) == 1
        assert thread.row.execution["status"] == "awaiting_approval"
        await thread.approve("t1")
        await rt.wait_idle(60)
    assert executed == [("bob", 5)] and len(provider.requests) == 2


@pytest.mark.asyncio
async def test_pending_approval_survives_a_restart(sa_runtime_factory):
    executed: list[Any] = []
    async with sa_runtime_factory(
        packs=[bank_pack(executed)], providers={"test": bank_model()}
    ) as rt:
        thread_id = (await start(rt)).thread_id
    async with sa_runtime_factory(
        packs=[bank_pack(executed)], providers={"test": bank_model()}
    ) as rt:
        await rt.wait_idle(60)
        thread = await rt.get_thread(thread_id)
        assert executed == []
        assert thread.row.execution["status"] == "awaiting_approval"
        assert [p["tool_call_id"] for p in await thread.pending_approvals()] == ["t1"]
        await thread.approve("t1")
        await rt.wait_idle(60)
        page = await thread.get_messages()
    assert executed == [("bob", 5)]
    assert page.messages[-1].content == "Result: ['Sent 5 to bob']"


# -- subagents ------------------------------------------------------------------------------


def delegating_pack(executed: list[Any]) -> Pack:
    bank = bank_pack(executed)

    class Job(BaseModel):
        job: str

    def finish(state: Any, args: Job) -> str:
        return "ok"

    done = define_tool(name="finish", description="Finish.", args=Job, execute=finish)
    worker = define_prompt(
        name="worker", model="worker_model", prompt="Pay.", tools=["transfer", "finish"]
    )
    payer = define_agent(
        name="payer",
        type="dual_ai",
        expose_as_tool=True,
        tool_description="Pays people.",
        max_session_turns=2,
        side_a={
            "prompt": "worker",
            "stop_on_response": False,
            "session_stop": {"name": "finish", "message_property": "job"},
        },
        side_b={"prompt": "worker", "stop_on_response": False},
    )
    coordinator = define_prompt(
        name="coordinator",
        model="fast",
        prompt="Delegate.",
        tools=[{"name": "payer", "blocking": True, "initUserMessageProperty": "job"}],
    )
    lead = define_agent(name="lead", side_a={"prompt": "coordinator"})
    return Pack(
        name="bank",
        agents=[lead, payer],
        prompts=[coordinator, worker],
        models=[MODEL, WORKER],
        tools=[*bank.tools, done],
    )


def delegating_model() -> FunctionProvider:
    def answer(request: Any) -> Any:
        results = [m.content for m in request.messages if m.role == "tool"]
        if request.model == "worker":
            if not results:
                return {
                    "tool_calls": [
                        {"name": "transfer", "arguments": {"to": "cy", "amount": 3}, "id": "w1"}
                    ]
                }
            return {"tool_calls": [{"name": "finish", "arguments": {"job": f"done: {results}"}}]}
        if not results:
            return {"tool_calls": [{"name": "payer", "arguments": {"job": "pay cy"}}]}
        return "Parent saw: " + str(results[-1])

    return FunctionProvider(answer)


@pytest.mark.asyncio
async def test_blocking_parent_waits_for_an_approval_inside_its_child(sa_runtime_factory):
    executed: list[Any] = []
    async with sa_runtime_factory(
        packs=[delegating_pack(executed)], providers={"test": delegating_model()}
    ) as rt:
        lead = await rt.create_thread("lead")
        send = asyncio.create_task(lead.send_message("pay cy"))
        child_id = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            await asyncio.sleep(0.01)
            await lead.refresh()
            if lead.children and lead.children[0].status == "awaiting_approval":
                child_id = lead.children[0].reference
                break
        assert child_id is not None, "the parent's registry never showed awaiting_approval"
        child = await rt.get_thread(child_id)
        assert child.row.execution["status"] == "awaiting_approval"
        assert rt.is_running(lead.thread_id)  # the blocking parent still waits
        await child.approve("w1")
        await send
        await rt.wait_idle(60)
        page = await lead.get_messages()
        await lead.refresh()
    assert executed == [("cy", 3)]
    assert page.messages[-1].content.startswith("Parent saw: done: ['Sent 3 to cy']")
    assert lead.children[0].status == "terminated"  # non-resumable: done once it reported


# -- HTTP -----------------------------------------------------------------------------------


def test_approvals_over_http(sa_database_url):
    from litestar.testing import TestClient

    from sa_core.server import create_app

    executed: list[Any] = []
    calls = [
        {"name": "transfer", "arguments": {"to": "bob", "amount": 5}, "id": "t1"},
        {"name": "transfer", "arguments": {"to": "eve", "amount": 9}, "id": "t2"},
    ]
    runtime = Runtime(
        packs=[bank_pack(executed)],
        providers={"test": bank_model(calls)},
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
        listed = client.get(f"{base}/{thread_id}/approvals").json()
        status = client.get(f"{base}/{thread_id}").json()["status"]
        bad = client.post(
            f"{base}/{thread_id}/approvals/t1", json={"approve": True, "arguments": {"to": 1}}
        )
        missing = client.post(f"{base}/{thread_id}/approvals/zz", json={"approve": True})
        ok = client.post(
            f"{base}/{thread_id}/approvals/t1",
            json={"approve": True, "arguments": {"to": "bob", "amount": 4}},
        )
        again = client.post(f"{base}/{thread_id}/approvals/t1", json={"approve": False})
        denied = client.post(
            f"{base}/{thread_id}/approvals/t2", json={"approve": False, "reason": "fraud"}
        )
        client.blocking_portal.call(runtime.wait_idle, 10)
        messages = client.get(f"{base}/{thread_id}/messages").json()["messages"]
        after = client.get(f"{base}/{thread_id}/approvals").json()
    assert [(a["tool_call_id"], a["status"]) for a in listed["approvals"]] == [
        ("t1", "pending"),
        ("t2", "pending"),
    ]
    assert listed["thread_status"] == "awaiting_approval" and status == "awaiting_approval"
    assert bad.status_code == 422 and bad.json()["error"] == "invalid_arguments"
    assert missing.status_code == 404 and missing.json()["error"] == "approval_not_found"
    assert ok.status_code == 202 and ok.json() == {"tool_call_id": "t1", "status": "approved"}
    assert again.status_code == 409
    assert denied.status_code == 202
    assert executed == [("bob", 4)]
    tools = [(m["tool_call_id"], m["tool_status"], m["content"]) for m in messages if m["role"] == "tool"]
    assert tools == [
        ("t1", "success", "Sent 4 to bob"),
        ("t2", "error", "Failed to execute tool: A human denied this tool call: fraud"),
    ]
    assert after["approvals"] == []


@pytest.mark.asyncio
async def test_sa_run_asks_yes_or_no_for_each_pending_call(sa_runtime_factory):
    import io

    from sa_core.cli.chat import chat

    executed: list[Any] = []
    calls = [
        {"name": "transfer", "arguments": {"to": "bob", "amount": 5}, "id": "t1"},
        {"name": "transfer", "arguments": {"to": "eve", "amount": 9}, "id": "t2"},
    ]
    async with sa_runtime_factory(
        packs=[bank_pack(executed)], providers={"test": bank_model(calls)}
    ) as rt:
        thread = await rt.create_thread("teller")
        stdout = io.StringIO()
        await chat(rt, thread, io.StringIO("pay them\ny\nn\n"), stdout)
        page = await thread.get_messages()
    out = stdout.getvalue()
    assert 'approve transfer({"to": "bob", "amount": 5})? [y/N]' in out
    assert 'approve transfer({"to": "eve", "amount": 9})? [y/N]' in out
    assert executed == [("bob", 5)]
    assert page.messages[-1].content == (
        "Result: ['Sent 5 to bob', 'Failed to execute tool: A human denied this tool call: "
        "Denied at the terminal by the user.']"
    )
