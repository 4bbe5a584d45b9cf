"""The notes pack's offline model for its eval suite: answers from the request alone.

Asked to put something on a note, it writes the note through the MCP server, reads it back and
repeats it; asked to delete one, it calls the delete (which waits for approval). The eval judge
answers JSON verdicts.
"""

from __future__ import annotations

import json
from typing import Any

from sa_core.providers import ProviderRequest
from sa_core.testing import FunctionProvider


def answer(request: ProviderRequest) -> Any:
    """The offline answer of the notes prompt and the eval judge."""
    messages = request.messages
    if messages and "strict evaluator" in (messages[0].content or ""):
        return json.dumps({"verdict": "yes", "reasoning": "The note is read back."})
    asked = " ".join(m.content or "" for m in messages if m.role == "user")
    if asked.startswith("Delete"):
        return {"tool_calls": [{"name": "notes_delete_note", "arguments": {"name": "groceries"}}]}
    names = {c.id: c.name for m in messages for c in m.tool_calls}
    done = {names.get(m.tool_call_id or ""): m.content or "" for m in messages if m.role == "tool"}
    if "notes_write_note" not in done:
        note = {"name": "groceries", "text": "- milk\n- eggs\n"}
        return {"tool_calls": [{"name": "notes_write_note", "arguments": note}]}
    if "notes_read_note" not in done:
        return {"tool_calls": [{"name": "notes_read_note", "arguments": {"name": "groceries"}}]}
    return "Your groceries note says: " + done["notes_read_note"]


def offline_notes_model() -> FunctionProvider:
    """A provider answering :func:`answer`."""
    return FunctionProvider(answer, name="openai")
