"""The support-desk pack: a triage agent that hands customers off to billing and tech agents.

Agent graph (every agent is ``ai_human``; an ``ai_human`` agent exposed as a tool is a
*handoff*: calling it transfers the same thread, with its history, to that agent)::

    triage --billing--> billing <--tech/billing--> tech
       '------tech------------------------------------^

The handoff tools carry a ``summary`` argument (``initUserMessageProperty``) that becomes the
first message the receiving agent reads, so the customer does not have to repeat themselves.

The order data is an in-memory table in this module; refunds are recorded per thread in the
thread's filesystem (``/support/refunds.json``), so two conversations never share state.
Importing this module does no I/O.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool

if TYPE_CHECKING:
    from sa_core import ThreadState

__version__ = "0.1.0"

REFUNDS_PATH = "/support/refunds.json"
"""Where ``issue_refund`` records the refunds issued in a thread."""

DEFAULT_REFUND_LIMIT = "100"
"""The largest refund (in the order's currency) billing may issue without a supervisor."""

ORDERS: dict[str, dict[str, Any]] = {
    "A1001": {
        "customer": "Ada Lovelace",
        "item": "Analytical Engine starter kit",
        "total": 120.0,
        "currency": "EUR",
        "status": "delivered",
        "service": "sync",
    },
    "A1002": {
        "customer": "Alan Turing",
        "item": "Bombe replacement rotor",
        "total": 45.5,
        "currency": "GBP",
        "status": "shipped",
        "service": "email",
    },
    "A1003": {
        "customer": "Grace Hopper",
        "item": "Compiler support plan (1 year)",
        "total": 480.0,
        "currency": "USD",
        "status": "active",
        "service": "api",
    },
}
"""The example order table: order id -> order."""

SERVICES: dict[str, str] = {
    "email": "operational",
    "sync": "degraded: sync jobs are delayed by up to 30 minutes; engineers are on it",
    "api": "operational",
    "billing-portal": "maintenance: read-only until 18:00 UTC",
}
"""Current status of each service the tech agent can check."""

_METADATA: dict[str, Any] = {
    "package_name": "sa-pack-support-desk",
    "version": __version__,
    "author": "standard-agents contributors",
    "license": "Apache-2.0",
}

# ---------------------------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------------------------


class OrderArgs(BaseModel):
    """Arguments of ``lookup_order``."""

    order_id: str = Field(description="The order id, e.g. A1001.")


class RefundArgs(BaseModel):
    """Arguments of ``issue_refund``."""

    order_id: str = Field(description="The order id.")
    amount: float = Field(gt=0, description="Amount to refund, in the order's currency.")
    reason: str = Field(description="Why the customer gets the refund.")


class ServiceArgs(BaseModel):
    """Arguments of ``check_service_status``."""

    service: str = Field(description=f"One of: {', '.join(SERVICES)}.")


def _order(order_id: str) -> dict[str, Any]:
    key = order_id.strip().upper()
    if key not in ORDERS:
        raise LookupError(
            f"No order {order_id!r}. Ask the customer to check the id (it looks like A1001)."
        )
    return {"order_id": key, **ORDERS[key]}


def lookup_order(state: ThreadState, args: OrderArgs) -> str:
    """Look an order up in :data:`ORDERS`.

    Args:
        state: the calling thread.
        args: the order id.

    Returns:
        The order with its id, as JSON text. (Text, not a dict: a returned dict with a
        ``status`` key is read as a ``ToolResult``.)

    Raises:
        LookupError: unknown order id (the model sees the message).
    """
    return json.dumps(_order(args.order_id), indent=2)


async def _refunds(state: ThreadState) -> list[dict[str, Any]]:
    data = await state.read_file(REFUNDS_PATH)
    return list(json.loads(data)) if data else []


async def issue_refund(state: ThreadState, args: RefundArgs) -> str:
    """Refund (part of) an order, within the order total and the ``REFUND_LIMIT`` variable.

    Args:
        state: the billing thread.
        args: order, amount and reason.

    Returns:
        A confirmation with the refund reference.

    Raises:
        ValueError: the amount exceeds what is left to refund or the limit.
    """
    order = _order(args.order_id)
    limit = float(state.env_or_none("REFUND_LIMIT") or DEFAULT_REFUND_LIMIT)
    refunds = await _refunds(state)
    done = sum(r["amount"] for r in refunds if r["order_id"] == order["order_id"])
    left = round(order["total"] - done, 2)
    if args.amount > left:
        raise ValueError(
            f"Order {order['order_id']} has only {left:.2f} {order['currency']} left to refund."
        )
    if args.amount > limit:
        raise ValueError(
            f"Refunds above {limit:.2f} need a supervisor; offer {limit:.2f} now or escalate."
        )
    reference = f"RF-{order['order_id']}-{len(refunds) + 1}"
    refunds.append(
        {
            "reference": reference,
            "order_id": order["order_id"],
            "amount": args.amount,
            "reason": args.reason,
        }
    )
    await state.write_file(REFUNDS_PATH, json.dumps(refunds, indent=2), "application/json")
    return (
        f"Refunded {args.amount:.2f} {order['currency']} for order {order['order_id']} "
        f"(reference {reference})."
    )


def check_service_status(state: ThreadState, args: ServiceArgs) -> str:
    """Report the current status of a service from :data:`SERVICES`.

    Args:
        state: the calling thread.
        args: the service name.

    Returns:
        ``<service>: <status>``.

    Raises:
        LookupError: unknown service.
    """
    name = args.service.strip().lower()
    if name not in SERVICES:
        raise LookupError(f"Unknown service {args.service!r}; known: {', '.join(SERVICES)}.")
    return f"{name}: {SERVICES[name]}"


tools = [
    define_tool(
        name="lookup_order",
        description="Look up an order by id: customer, item, total, status, service.",
        args=OrderArgs,
        execute=lookup_order,
    ),
    define_tool(
        name="issue_refund",
        description="Refund (part of) an order. Confirm the amount with the customer first.",
        args=RefundArgs,
        execute=issue_refund,
        variables=[
            {
                "name": "REFUND_LIMIT",
                "description": "Largest refund billing may issue alone (default 100).",
            }
        ],
    ),
    define_tool(
        name="check_service_status",
        description="Current status of a service (email, sync, api, billing-portal).",
        args=ServiceArgs,
        execute=check_service_status,
    ),
]

# ---------------------------------------------------------------------------------------------
# Prompts and agents
# ---------------------------------------------------------------------------------------------

TRIAGE_PROMPT = """\
You are the support desk's triage agent. Greet the customer, find out what they need, and
route them:
- payments, invoices, refunds -> hand off with the billing tool;
- errors, outages, syncing, logins -> hand off with the tech tool.
Look up the order first when the customer gives an order id. In the handoff summary, state
who the customer is, the order id and the problem in one or two sentences. Answer simple
questions (order status) yourself."""

BILLING_PROMPT = """\
You are the billing specialist. The conversation so far and a summary from your colleague are
above. Resolve payment, invoice and refund questions. Look the order up before you promise
anything, confirm refund amounts with the customer, then issue_refund. If the problem is
technical after all, hand off to tech with a summary."""

TECH_PROMPT = """\
You are the technical support specialist. The conversation so far and a summary from your
colleague are above. Check the affected service with check_service_status before you answer,
explain what is going on and what the customer can do. If the customer wants money back, hand
off to billing with a summary."""


def _handoff(name: str) -> dict[str, str]:
    """A SubpromptConfig-shaped tools entry: the handoff's ``summary`` opens the next agent."""
    return {"name": name, "initUserMessageProperty": "summary"}


models = [define_model(name="desk", provider="openai", model="gpt-4o-mini")]

prompts = [
    define_prompt(
        name="triage_main",
        model="desk",
        prompt=TRIAGE_PROMPT,
        include_chat=True,
        tools=["lookup_order", _handoff("billing"), _handoff("tech")],
    ),
    define_prompt(
        name="billing_main",
        model="desk",
        prompt=BILLING_PROMPT,
        include_chat=True,
        include_past_tools=True,
        tools=["lookup_order", "issue_refund", _handoff("tech")],
    ),
    define_prompt(
        name="tech_main",
        model="desk",
        prompt=TECH_PROMPT,
        include_chat=True,
        include_past_tools=True,
        tools=["lookup_order", "check_service_status", _handoff("billing")],
    ),
]

triage = define_agent(
    name="triage",
    title="Front desk",
    description="Greets customers and routes them to billing or tech.",
    side_a={"prompt": "triage_main", "label": "Triage"},
    **_METADATA,
)

billing = define_agent(
    name="billing",
    title="Billing",
    description="Payments, invoices and refunds.",
    expose_as_tool=True,
    tool_description="Hand the customer over to billing (payments, invoices, refunds). "
    "Pass a short summary of the case.",
    side_a={"prompt": "billing_main", "label": "Billing"},
    env={"REFUND_LIMIT": DEFAULT_REFUND_LIMIT},
    **_METADATA,
)

tech = define_agent(
    name="tech",
    title="Technical support",
    description="Errors, outages, sync problems and logins.",
    expose_as_tool=True,
    tool_description="Hand the customer over to technical support (errors, outages, sync). "
    "Pass a short summary of the case.",
    side_a={"prompt": "tech_main", "label": "Tech"},
    **_METADATA,
)

pack = Pack(
    name="support_desk",
    agents=[triage, billing, tech],
    prompts=prompts,
    models=models,
    tools=tools,
    entry_agents=["triage"],
    version=__version__,
    author="standard-agents contributors",
    license="Apache-2.0",
    description="A triage agent handing customers off to billing and tech agents.",
)

__all__ = ["ORDERS", "REFUNDS_PATH", "SERVICES", "billing", "pack", "tech", "triage"]
