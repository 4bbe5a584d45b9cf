"""The notes pack: MCP tools over stdio, and human approval before deleting or publishing."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from sa_pack_notes import pack

from sa_core.testing import FunctionProvider

PACK_DIR = Path(__file__).resolve().parents[1]


def scripted(*steps: dict[str, Any]) -> FunctionProvider:
    """Answer with the given tool calls, one step each, then echo the last tool result."""

    def answer(request: Any) -> Any:
        done = sum(1 for m in request.messages if m.role == "assistant")
        if done < len(steps):
            return {"tool_calls": [steps[done]]}
        return "Done: " + str(request.messages[-1].content)

    return FunctionProvider(answer, name="openai")


@pytest.mark.asyncio
async def test_notes_are_written_through_the_mcp_server_and_deleting_needs_approval(
    sa_runtime_factory, tmp_path
):
    model = scripted(
        {"name": "notes_write_note", "arguments": {"name": "groceries", "text": "milk"}},
        {"name": "notes_delete_note", "arguments": {"name": "groceries"}, "id": "del1"},
    )
    async with sa_runtime_factory(
        packs=[pack], providers={"openai": model}, env={"NOTES_DIR": str(tmp_path)}
    ) as rt:
        thread = await rt.create_thread("notes_keeper")
        await thread.send_message("Note groceries: milk, then delete it.")
        await rt.wait_idle(30)
        assert (tmp_path / "groceries.md").read_text() == "milk"
        pending = await thread.pending_approvals()
        assert [(p["name"], p["arguments"]) for p in pending] == [
            ("notes_delete_note", {"name": "groceries"})
        ]
        await thread.approve("del1")
        await rt.wait_idle(30)
        page = await thread.get_messages()
    assert not (tmp_path / "groceries.md").exists()
    assert page.messages[-1].content == "Done: Deleted note 'groceries'."


@pytest.mark.asyncio
async def test_publishing_waits_for_approval_and_a_denial_reaches_the_model(
    sa_runtime_factory, tmp_path
):
    (tmp_path / "plan.md").write_text("ship it")
    model = scripted(
        {"name": "publish_note", "arguments": {"name": "plan"}, "id": "p1"},
        {"name": "publish_note", "arguments": {"name": "plan"}, "id": "p2"},
    )
    async with sa_runtime_factory(
        packs=[pack], providers={"openai": model}, env={"NOTES_DIR": str(tmp_path)}
    ) as rt:
        thread = await rt.create_thread("notes_keeper")
        await thread.send_message("Publish the plan.")
        await rt.wait_idle(30)
        await thread.deny("p1", "not before Friday")
        await rt.wait_idle(30)
        await thread.approve("p2")
        await rt.wait_idle(30)
        published = await thread.read_file("/published/plan.md")
        tools = [m for m in (await thread.get_messages()).messages if m.role == "tool"]
    assert [t.tool_status for t in tools] == ["error", "success"]
    assert "not before Friday" in tools[0].content
    assert published == b"ship it"


def test_the_pack_validates_and_its_entry_point_names_it():
    pack.validate()
    project = tomllib.loads((PACK_DIR / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["sa.packs"] == {"notes": "sa_pack_notes:pack"}
    assert [s.name for s in pack.mcp_servers] == ["notes"]
