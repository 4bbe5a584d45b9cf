"""The reminders pack's offline model for its eval suite: answers from the request alone.

"Remind me to X in N minutes|hours" calls ``set_reminder``; "pending" calls ``list_reminders``;
after a tool result the model repeats it. The eval judge answers JSON verdicts.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sa_core.providers import ProviderRequest
from sa_core.testing import FunctionProvider

ASK = re.compile(r"remind me to (?P<text>.+?) in (?P<n>\d+(?:\.\d+)?) (?P<unit>minute|hour)", re.I)


def answer(request: ProviderRequest) -> Any:
    """The offline answer of the reminder prompt and the eval judge."""
    messages = request.messages
    if messages and "strict evaluator" in (messages[0].content or ""):
        return json.dumps({"verdict": "yes", "reasoning": "It states the due time."})
    last_user = max(i for i, m in enumerate(messages) if m.role == "user")
    results = [m.content or "" for m in messages[last_user:] if m.role == "tool"]
    if results:
        return results[-1]
    said = messages[last_user].content or ""
    asked = ASK.search(said)
    if asked is not None:
        minutes = float(asked["n"]) * (60 if asked["unit"].lower() == "hour" else 1)
        return {
            "tool_calls": [
                {"name": "set_reminder", "arguments": {"text": asked["text"], "minutes": minutes}}
            ]
        }
    if "pending" in said.lower():
        return {"tool_calls": [{"name": "list_reminders", "arguments": {}}]}
    return "I can set, list and cancel reminders."


def offline_reminders_model() -> FunctionProvider:
    """A provider answering :func:`answer`."""
    return FunctionProvider(answer, name="openai")
