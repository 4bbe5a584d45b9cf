"""The support desk's offline model for its eval suite: answers from the request alone.

Triage looks up an order it is given and hands refunds over to billing; billing refunds 60.00
and confirms; order questions get the order's status. The eval judge answers JSON verdicts, and
the simulated user ends the session with ``eval_user_done`` once it hears its order shipped.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sa_core.providers import ProviderRequest
from sa_core.testing import FunctionProvider

ORDER = re.compile(r"\bA\d{4}\b")


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def _results(request: ProviderRequest) -> dict[str, str]:
    names = {c.id: c.name for m in request.messages for c in m.tool_calls}
    return {
        names.get(m.tool_call_id or "", ""): m.content or ""
        for m in request.messages
        if m.role == "tool"
    }


def _text(request: ProviderRequest, role: str = "user") -> str:
    return " ".join(m.content or "" for m in request.messages if m.role == role)


def _desk(request: ProviderRequest, system: str) -> Any:
    done, said = _results(request), _text(request)
    found = ORDER.search(said)
    if found is None:
        return "I can help. Which order is it about? (It looks like A1001.)"
    order = found.group(0)
    wants_money = re.search(r"refund|money|broken", said, re.IGNORECASE)
    if system.startswith("You are the billing specialist"):
        if "issue_refund" not in done:
            return _call("issue_refund", order_id=order, amount=60.0, reason="arrived broken")
        return f"Done: I refunded 60.00 EUR for order {order}; it is credited to your card."
    if "lookup_order" not in done:
        return _call("lookup_order", order_id=order)
    if wants_money:
        return _call("billing", summary=f"Customer wants a refund for broken order {order}.")
    status = json.loads(done["lookup_order"]).get("status", "unknown")
    return f"Your order {order} is {status}."


def answer(request: ProviderRequest) -> Any:
    """The offline answer of the desk's prompts, the eval judge and the simulated user."""
    system = request.messages[0].content or "" if request.messages else ""
    if "strict evaluator" in system:
        rubric, _, transcript = _text(request).partition("Transcript:")
        verdict = "no" if "phone" in rubric and "phone number" in transcript else "yes"
        return json.dumps({"verdict": verdict, "reasoning": f"The transcript says {verdict}."})
    if "role-playing a USER" in system:
        texts = [m.content or "" for m in request.messages if m.role != "system" and m.content]
        if texts and "is shipped" in texts[-1]:
            return _call("eval_user_done", reason="I know where it is")
        return "Order A1002. Where is it?"
    return _desk(request, system)


def offline_desk_model() -> FunctionProvider:
    """A provider answering :func:`answer`, reporting token usage."""

    def respond(request: ProviderRequest) -> Any:
        result = answer(request)
        result = {"content": result} if isinstance(result, str) else result
        return {**result, "usage": {"prompt_tokens": 90, "completion_tokens": 25}}

    return FunctionProvider(respond, name="openai")
