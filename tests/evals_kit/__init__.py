"""A small shop pack and its offline model, for the eval tests.

``desk`` (ai_human) looks an order up, asks the blocking ``checker`` subagent (dual_ai: side A
reads the policy, side B approves with ``approve`` = session_stop) and issues the refund, which
writes ``/refunds/<order>.json``. :func:`answer` plays every prompt deterministically from the
request alone, so trials run concurrently in any order; a message containing ``skip-check``
makes the checker answer without reading the policy (the flat tool list of the desk is the same,
the tree differs), and a desk prompt containing ``ASK-PHONE`` asks for the customer's phone
number in its last answer (a seeded regression: only the case whose judge forbids it fails).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool
from sa_core.providers import ProviderRequest
from sa_core.testing import FunctionProvider

DESK_PROMPT = "DESK. You help customers with refunds. Look the order up, ask the checker."
CHECKER_PROMPT = "CHECKER-A. Read the refund policy and say whether the refund is allowed."
APPROVER_PROMPT = "CHECKER-B. Approve the refund when the analysis allows it."


class OrderArgs(BaseModel):
    order_id: str


class SummaryArgs(BaseModel):
    summary: str


async def issue_refund(state: Any, args: OrderArgs) -> str:
    body = json.dumps({"order_id": args.order_id, "status": "issued"})
    await state.write_file(f"/refunds/{args.order_id}.json", body, "application/json")
    return f"Refund issued for {args.order_id}."


def shop_pack(desk_prompt: str = DESK_PROMPT, checker_prompt: str = CHECKER_PROMPT) -> Pack:
    """The shop pack (prompts may be edited to show cache misses and regressions)."""
    tools = [
        define_tool(
            name="lookup_order",
            description="Look an order up.",
            args=OrderArgs,
            execute=lambda state, args: json.dumps(
                {"order_id": args.order_id, "item": "kettle", "total": 30}
            ),
        ),
        define_tool(
            name="issue_refund",
            description="Refund an order.",
            args=OrderArgs,
            execute=issue_refund,
        ),
        define_tool(
            name="delete_account",
            description="Delete the account.",
            args=OrderArgs,
            execute=lambda state, args: "deleted",
        ),
        define_tool(
            name="read_policy",
            description="The refund policy.",
            execute=lambda state, args: "Damaged items are refunded in full.",
        ),
        define_tool(
            name="approve",
            description="Approve.",
            args=SummaryArgs,
            execute=lambda state, args: "approved",
        ),
        define_tool(
            name="reject",
            description="Reject.",
            args=SummaryArgs,
            execute=lambda state, args: "rejected",
        ),
    ]
    prompts = [
        define_prompt(
            name="desk_main",
            model="fast",
            prompt=desk_prompt,
            include_chat=True,
            tools=[
                "lookup_order",
                "issue_refund",
                "delete_account",
                {"name": "checker", "blocking": True, "initUserMessageProperty": "summary"},
            ],
        ),
        define_prompt(
            name="checker_a",
            model="fast",
            prompt=checker_prompt,
            include_chat=True,
            tools=["read_policy"],
        ),
        define_prompt(
            name="checker_b",
            model="fast",
            prompt=APPROVER_PROMPT,
            include_chat=True,
            tools=["approve", "reject"],
        ),
    ]
    checker = define_agent(
        name="checker",
        type="dual_ai",
        expose_as_tool=True,
        tool_description="Check a refund.",
        max_session_turns=6,
        side_a={"prompt": "checker_a"},
        side_b={
            "prompt": "checker_b",
            "session_stop": {"name": "approve", "message_property": "summary"},
            "session_fail": {"name": "reject", "message_property": "summary"},
        },
    )
    desk = define_agent(name="desk", side_a={"prompt": "desk_main"})
    return Pack(
        name="shop",
        agents=[desk, checker],
        prompts=prompts,
        tools=tools,
        models=[
            define_model(
                name="fast", provider="test", model="m", input_price=1.0, output_price=2.0
            ),
            define_model(name="judge", provider="test", model="judge-m"),
        ],
        entry_agents=["desk"],
    )


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def _results(request: ProviderRequest) -> dict[str, str]:
    names = {c.id: c.name for m in request.messages for c in m.tool_calls}
    return {
        names.get(m.tool_call_id or "", ""): m.content or ""
        for m in request.messages
        if m.role == "tool"
    }


def _first_user(request: ProviderRequest) -> str:
    return next((m.content or "" for m in request.messages if m.role == "user"), "")


def _last_text(request: ProviderRequest) -> str:
    others = [m for m in request.messages if m.role != "system" and m.content]
    return others[-1].content or "" if others else ""


def answer(request: ProviderRequest) -> Any:
    """The offline model of every prompt of the shop pack (and the judge and simulated user)."""
    system = request.messages[0].content or "" if request.messages else ""
    if "strict evaluator" in system:
        rubric, _, transcript = _first_user(request).partition("Transcript:")
        verdict = "no" if "phone" in rubric and "phone" in transcript else "yes"
        return json.dumps({"verdict": verdict, "reasoning": f"judged {verdict}"})
    if "role-playing a USER" in system:
        if "refund" in _last_text(request).lower():
            return _call("eval_user_done", reason="refunded")
        return "It is order 4411, the kettle arrived broken."
    if system.startswith("CHECKER-A"):
        if "skip-check" in _first_user(request) or "read_policy" in _results(request):
            return "The policy allows a full refund."
        return _call("read_policy")
    if system.startswith("CHECKER-B"):
        return _call("approve", summary="allowed")
    return _desk(request, system)


def _desk(request: ProviderRequest, system: str) -> Any:
    done = _results(request)
    text = " ".join(m.content or "" for m in request.messages if m.role == "user")
    found = re.search(r"\b(\d{4})\b", text)
    if found is None:
        return "Which order is it about?"
    order = found.group(1)
    if "lookup_order" not in done:
        return _call("lookup_order", order_id=order)
    if "checker" not in done:
        summary = f"refund order {order}" + (" skip-check" if "skip-check" in text else "")
        return _call("checker", summary=summary)
    if "issue_refund" not in done:
        return _call("issue_refund", order_id=order)
    if any(t.name == "final_answer" for t in request.tools):
        return _call("final_answer", status="issued", order_id=order)
    text = f"Your refund for order {order} is issued; the amount is credited to your card."
    return text + (" What is your phone number?" if "ASK-PHONE" in system else "")


def offline_provider(max_recorded: int | None = None) -> FunctionProvider:
    """A provider answering :func:`answer`, with usage so runs have a cost.

    It keeps every request unless ``max_recorded`` bounds them (the benchmark's long runs).
    """

    def respond(request: ProviderRequest) -> Any:
        result = answer(request)
        if isinstance(result, str):
            result = {"content": result}
        return {**result, "usage": {"prompt_tokens": 100, "completion_tokens": 20}}

    return FunctionProvider(respond, max_recorded=max_recorded)
