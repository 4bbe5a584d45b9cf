"""The support-desk pack: handoffs between ai_human agents, and its tools."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sa_pack_support_desk import REFUNDS_PATH, pack

from sa_core.cli import main as sa_main
from sa_core.packloader import load_packs_from
from sa_core.providers import ProviderRequest
from sa_core.testing import FunctionProvider

PACK_DIR = Path(__file__).resolve().parents[1]
ROLES = {
    "triage": "You are the support desk's triage agent.",
    "billing": "You are the billing specialist.",
    "tech": "You are the technical support specialist.",
}
Answer = str | dict[str, Any] | Callable[[ProviderRequest], Any]


def scripted(**queues: list[Answer]) -> FunctionProvider:
    """A model answering each agent (recognised by its system prompt) from its own queue."""
    pending = {role: list(items) for role, items in queues.items()}
    seen: dict[str, list[ProviderRequest]] = {role: [] for role in ROLES}

    def answer(request: ProviderRequest) -> Any:
        system = request.messages[0].content or ""
        role = next(r for r, marker in ROLES.items() if system.startswith(marker))
        seen[role].append(request)
        assert pending.get(role), f"no scripted answer left for {role}"
        item = pending[role].pop(0)
        return item(request) if callable(item) else item

    provider = FunctionProvider(answer, name="openai")
    provider.seen = seen  # type: ignore[attr-defined]
    provider.pending = pending  # type: ignore[attr-defined]
    return provider


def call(tool: str, /, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def contents(request: ProviderRequest) -> list[str]:
    return [m.content or "" for m in request.messages]


@pytest.mark.asyncio
async def test_triage_hands_off_to_billing_which_keeps_the_history(sa_runtime_factory) -> None:
    summary = "Ada Lovelace wants 20 EUR back on order A1001 (late delivery)."
    provider = scripted(
        triage=[call("lookup_order", order_id="A1001"), call("billing", summary=summary)],
        billing=[
            "Sorry about the delay, Ada. Shall I refund 20.00 EUR on order A1001?",
            call("issue_refund", order_id="A1001", amount=20, reason="late delivery"),
            "Done: 20.00 EUR is on its way back (reference RF-A1001-1).",
        ],
    )
    async with sa_runtime_factory(packs=[pack], providers={"openai": provider}) as rt:
        thread = await rt.create_thread("triage")
        await thread.send_message("Hi, my order A1001 arrived late, I want some money back.")
        assert thread.agent_id == "billing"
        await thread.send_message("Yes please.")
        reopened = await rt.get_thread(thread.thread_id)
        assert reopened.agent_id == "billing"
        page = await thread.get_messages()
        refunds = json.loads(await thread.read_file(REFUNDS_PATH))

    tool_rows = {m.name: m for m in page.messages if m.role == "tool"}
    assert tool_rows["billing"].content == "Handoff complete"
    assert json.loads(tool_rows["lookup_order"].content)["customer"] == "Ada Lovelace"
    assert tool_rows["issue_refund"].content == (
        "Refunded 20.00 EUR for order A1001 (reference RF-A1001-1)."
    )
    assert refunds == [
        {"reference": "RF-A1001-1", "order_id": "A1001", "amount": 20.0, "reason": "late delivery"}
    ]
    # the history came along: billing's first call saw the customer's words and the summary
    first_billing = contents(provider.seen["billing"][0])
    assert first_billing[0].startswith(ROLES["billing"])
    assert "Hi, my order A1001 arrived late, I want some money back." in first_billing
    assert summary in first_billing
    assert [t.name for t in provider.seen["billing"][0].tools] == [
        "lookup_order",
        "issue_refund",
        "tech",
    ]
    assert len(provider.seen["triage"]) == 2  # triage never speaks again
    assert page.messages[-1].content == "Done: 20.00 EUR is on its way back (reference RF-A1001-1)."
    assert all(not queue for queue in provider.pending.values())


@pytest.mark.asyncio
async def test_billing_hands_off_to_tech_and_tech_checks_the_service(sa_runtime_factory) -> None:
    provider = scripted(
        triage=[call("billing", summary="Alan's invoice for A1002 does not show up.")],
        billing=[call("tech", summary="Invoices not syncing for A1002; looks technical.")],
        tech=[
            call("check_service_status", service="sync"),
            "Sync is delayed by up to 30 minutes right now; your invoice will appear shortly.",
        ],
    )
    async with sa_runtime_factory(packs=[pack], providers={"openai": provider}) as rt:
        thread = await rt.create_thread("triage")
        await thread.send_message("My invoice for A1002 is missing.")
        page = await thread.get_messages()
    assert thread.agent_id == "tech"
    handoffs = [
        m.content for m in page.messages if m.role == "tool" and m.name in ("billing", "tech")
    ]
    assert handoffs == ["Handoff complete", "Handoff complete"]
    status = next(m for m in page.messages if m.name == "check_service_status")
    assert status.content.startswith("sync: degraded")
    tech_view = contents(provider.seen["tech"][0])
    assert "My invoice for A1002 is missing." in tech_view
    assert "Invoices not syncing for A1002; looks technical." in tech_view
    assert page.messages[-1].content.startswith("Sync is delayed")


@pytest.mark.asyncio
async def test_refunds_respect_the_order_total_and_the_limit(sa_runtime_factory) -> None:
    async with sa_runtime_factory(packs=[pack]) as rt:
        thread = await rt.create_thread("billing", package=pack.name)
        too_big = await thread.invoke_tool(
            "issue_refund", {"order_id": "A1003", "amount": 150, "reason": "x"}
        )
        first = await thread.invoke_tool(
            "issue_refund", {"order_id": "a1001", "amount": 100, "reason": "broken"}
        )
        over = await thread.invoke_tool(
            "issue_refund", {"order_id": "A1001", "amount": 30, "reason": "again"}
        )
        raised = await rt.create_thread("billing", package=pack.name, env={"REFUND_LIMIT": "500"})
        allowed = await raised.invoke_tool(
            "issue_refund", {"order_id": "A1003", "amount": 150, "reason": "downtime"}
        )
    assert too_big.status == "error" and "need a supervisor" in too_big.error
    assert first.result == "Refunded 100.00 EUR for order A1001 (reference RF-A1001-1)."
    assert over.status == "error" and "only 20.00 EUR left to refund" in over.error
    assert allowed.status == "success" and "150.00 USD" in allowed.result


@pytest.mark.asyncio
async def test_unknown_ids_are_reported_to_the_model(sa_runtime_factory) -> None:
    async with sa_runtime_factory(packs=[pack]) as rt:
        thread = await rt.create_thread("tech", package=pack.name)
        order = await thread.invoke_tool("lookup_order", {"order_id": "Z9"})
        service = await thread.invoke_tool("check_service_status", {"service": "fax"})
    assert order.status == "error" and "No order 'Z9'" in order.error
    assert service.status == "error" and "Unknown service 'fax'" in service.error


def test_pack_validates_and_carries_metadata() -> None:
    pack.validate()
    assert pack.warnings() == []
    assert {a.name for a in pack.agents if a.expose_as_tool and a.tool_description} == {
        "billing",
        "tech",
    }
    for agent in pack.agents:
        assert agent.type == "ai_human"
        assert (agent.package_name, agent.version, agent.license) == (
            "sa-pack-support-desk",
            "0.1.0",
            "Apache-2.0",
        )


def test_entry_point_names_the_pack(capsys: pytest.CaptureFixture[str]) -> None:
    project = tomllib.loads((PACK_DIR / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["sa.packs"] == {
        "support_desk": "sa_pack_support_desk:pack"
    }
    assert [p.name for p in load_packs_from(str(PACK_DIR))] == [pack.name] == ["support_desk"]
    assert sa_main(["validate", str(PACK_DIR)]) == 0
    assert "pack support_desk: 3 agents" in capsys.readouterr().out
