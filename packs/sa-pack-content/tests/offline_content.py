"""The content pack's offline model for its eval suite: answers from the request alone.

The lead commissions the article, then reads the delivered file and shows it; the writer sets
its status and saves a draft; the editor reads it, checks the style and publishes. The eval
judge answers JSON verdicts.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sa_core.providers import ProviderRequest
from sa_core.testing import FunctionProvider

BODY = "Green tea is a mild tea. Brew it at 80 degrees for two minutes. Enjoy it plain."


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def _results(request: ProviderRequest) -> dict[str, str]:
    names = {c.id: c.name for m in request.messages for c in m.tool_calls}
    return {
        names.get(m.tool_call_id or "", ""): m.content or ""
        for m in request.messages
        if m.role == "tool"
    }


def _lead(done: dict[str, str]) -> Any:
    if "article_writer" not in done:
        return _call("article_writer", assignment="Green tea for beginners, 60 words.")
    if "read_attachment" not in done:
        found = re.search(r"/attachments/\S+?\.md", done["article_writer"])
        return _call("read_attachment", path=found.group(0) if found else "/attachments/draft.md")
    return "Here is your article on green tea:\n\n" + done["read_attachment"]


def answer(request: ProviderRequest) -> Any:
    """The offline answer of the content pack's prompts and the eval judge."""
    system = request.messages[0].content or "" if request.messages else ""
    done = _results(request)
    if "strict evaluator" in system:
        return json.dumps({"verdict": "yes", "reasoning": "The article is shown."})
    if system.startswith("You are the content lead"):
        return _lead(done)
    if system.startswith("You are a staff writer"):
        if "set_writing_status" not in done:
            return _call("set_writing_status", status="drafting")
        if "save_draft" not in done:
            return _call("save_draft", title="Green tea", body=BODY)
        return "The draft is ready."
    if system.startswith("You are the editor"):
        if "read_draft" not in done:
            return _call("read_draft")
        if "check_style" not in done:
            return _call("check_style")
        return _call(
            "publish",
            summary="A short beginners' article on green tea.",
            files=["/attachments/draft.md"],
        )
    return "Noted."


def offline_content_model() -> FunctionProvider:
    """A provider answering :func:`answer`."""
    return FunctionProvider(answer, name="openai")
