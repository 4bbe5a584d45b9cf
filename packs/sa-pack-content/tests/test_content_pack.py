"""The content pack: a blocking writer/editor subagent, its success, failure and status."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sa_pack_content import DRAFT_PATH, pack, style_problems

from sa_core.cli import main as sa_main
from sa_core.packloader import load_packs_from
from sa_core.providers import ProviderRequest
from sa_core.testing import FunctionProvider

PACK_DIR = Path(__file__).resolve().parents[1]
ROLES = {
    "lead": "You are the content lead.",
    "writer": "You are a staff writer.",
    "editor": "You are the editor.",
}
RETURNED = "\n\nThe subagent also returned the following attachment(s):\n\n"
Answer = str | dict[str, Any] | Callable[[ProviderRequest], Any]


def scripted(**queues: list[Answer]) -> FunctionProvider:
    """A model answering each prompt (recognised by its system prompt) from its own queue."""
    pending = {role: list(items) for role, items in queues.items()}
    seen: dict[str, list[ProviderRequest]] = {role: [] for role in ROLES}

    async def answer(request: ProviderRequest) -> Any:
        system = request.messages[0].content or ""
        role = next(r for r, marker in ROLES.items() if system.startswith(marker))
        seen[role].append(request)
        assert pending.get(role), f"no scripted answer left for {role}"
        item = pending[role].pop(0)
        if callable(item):
            item = item(request)
            if hasattr(item, "__await__"):
                item = await item
        return item

    provider = FunctionProvider(answer, name="openai")
    provider.seen = seen  # type: ignore[attr-defined]
    provider.pending = pending  # type: ignore[attr-defined]
    return provider


def call(tool: str, /, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


ASSIGNMENT = "300 words on tide pools for ten-year-olds, friendly tone."
BODY = "Tide pools are small worlds. Crabs hide under rocks. Anemones wave in the water."


@pytest.mark.asyncio
async def test_published_article_comes_back_with_the_draft_and_reference(
    sa_runtime_factory,
) -> None:
    statuses: list[str] = []
    holder: dict[str, Any] = {}

    async def registry_status() -> str:
        parent = holder["parent"]
        await parent.refresh()
        return parent.children[0].status

    async def writer_saves(request: ProviderRequest) -> Any:
        statuses.append(await registry_status())
        return {
            "tool_calls": [
                {"name": "set_writing_status", "arguments": {"status": "drafting"}},
                {"name": "save_draft", "arguments": {"title": "Tide pools", "body": BODY}},
            ]
        }

    async def writer_done(request: ProviderRequest) -> str:
        statuses.append(await registry_status())
        return "The draft is ready."

    def lead_reads(request: ProviderRequest) -> Any:
        text = request.messages[-1].content or ""
        return call("read_attachment", path=re.search(r"/attachments/draft-\w+\.md", text)[0])

    provider = scripted(
        lead=[call("article_writer", assignment=ASSIGNMENT), lead_reads, "Here is your article."],
        writer=[call("set_writing_status", status="outlining"), writer_saves, writer_done],
        editor=[
            call("read_draft"),
            call("check_style"),
            call("publish", summary="A friendly tide-pool piece.", files=[DRAFT_PATH]),
        ],
    )
    async with sa_runtime_factory(packs=[pack], providers={"openai": provider}) as rt:
        lead = holder["parent"] = await rt.create_thread("content_lead")
        await lead.send_message("Write me something about tide pools for kids.")
        await lead.refresh()
        entry = lead.children[0]
        page = await lead.get_messages()
        child = await lead.get_child_thread(entry.reference)
        child_page = await child.get_messages()

    assert statuses == ["outlining", "drafting"]  # session_status updates, child still running
    assert entry.status == "terminated" and entry.blocking is True and not entry.resumable
    assert entry.name == "article_writer"
    row = next(m for m in page.messages if m.name == "article_writer")
    delivered = row.attachments[0].path
    assert delivered.startswith("/attachments/draft-") and delivered.endswith(".md")
    assert row.tool_status == "success"
    # the summary, the delivered (parent-local) path, the reference; the runtime may also list
    # the attachment the generic way ('Attachment path for "draft.md": ...')
    assert row.content.startswith(
        f"A friendly tide-pool piece.{RETURNED}{delivered}\n\nReference: {entry.reference}"
    )
    read = next(m for m in page.messages if m.name == "read_attachment")
    assert read.content == f"# Tide pools\n\n{BODY}"
    assert page.messages[-1].content == "Here is your article."
    assert child_page.messages[0].content == ASSIGNMENT
    style = next(m for m in child_page.messages if m.name == "check_style")
    assert style.content == "Style check passed."
    assert all(not queue for queue in provider.pending.values())


@pytest.mark.asyncio
async def test_editor_rejection_is_a_failed_tool_result(sa_runtime_factory) -> None:
    provider = scripted(
        lead=[call("article_writer", assignment="Prove the moon is cheese."), "It was refused."],
        writer=[call("save_draft", title="Cheese moon", body="The moon is cheese."), "Ready."],
        editor=[call("reject_draft", reason="The assignment asks for a false claim.")],
    )
    async with sa_runtime_factory(packs=[pack], providers={"openai": provider}) as rt:
        lead = await rt.create_thread("content_lead")
        await lead.send_message("Moon cheese article please.")
        await lead.refresh()
        page = await lead.get_messages()
    reference = lead.children[0].reference
    row = next(m for m in page.messages if m.name == "article_writer")
    assert row.tool_status == "error"
    assert row.content == (
        f"Failed to execute tool: The assignment asks for a false claim.\n\nReference: {reference}"
    )
    assert lead.children[0].status == "terminated"  # non-resumable: ran once


@pytest.mark.asyncio
async def test_writer_giving_up_fails_the_session(sa_runtime_factory) -> None:
    provider = scripted(
        lead=[call("article_writer", assignment="Interview the CEO."), "The writer gave up."],
        writer=[call("give_up", reason="I cannot reach the CEO.")],
    )
    async with sa_runtime_factory(packs=[pack], providers={"openai": provider}) as rt:
        lead = await rt.create_thread("content_lead")
        await lead.send_message("An interview with our CEO.")
        await lead.refresh()
        page = await lead.get_messages()
    row = next(m for m in page.messages if m.name == "article_writer")
    assert row.content.startswith("Failed to execute tool: I cannot reach the CEO.\n\nReference: ")
    assert lead.children[0].status == "terminated"  # non-resumable: ran once
    assert provider.seen["editor"] == []


@pytest.mark.asyncio
async def test_endless_revisions_stop_at_max_session_turns(sa_runtime_factory) -> None:
    provider = scripted(
        lead=[call("article_writer", assignment="A haiku."), "No luck."],
        writer=[f"version {i}" for i in range(6)],
        editor=[f"feedback {i}" for i in range(6)],
    )
    async with sa_runtime_factory(packs=[pack], providers={"openai": provider}) as rt:
        lead = await rt.create_thread("content_lead")
        await lead.send_message("A haiku please.")
        await lead.refresh()
        page = await lead.get_messages()
    row = next(m for m in page.messages if m.name == "article_writer")
    assert row.tool_status == "error" and row.content.startswith("Failed to execute tool: ")
    assert row.content.endswith(f"\n\nReference: {lead.children[0].reference}")
    assert lead.children[0].status == "terminated"  # non-resumable: ran once
    assert len(provider.seen["writer"]) == len(provider.seen["editor"]) == 6


@pytest.mark.asyncio
async def test_style_check_uses_the_max_words_variable(sa_runtime_factory) -> None:
    async with sa_runtime_factory(packs=[pack], env={"MAX_WORDS": "5"}) as rt:
        thread = await rt.create_thread("article_writer", package=pack.name)
        missing = await thread.invoke_tool("check_style", {})
        await thread.invoke_tool("save_draft", {"title": "T", "body": "We leverage synergy daily."})
        result = await thread.invoke_tool("check_style", {})
    assert missing.status == "error" and "No draft yet" in missing.error
    assert result.result == (
        "Style problems:\n- too long: 6 words (limit 5)\n"
        "- banned phrase: 'synergy'\n- banned phrase: 'leverage'"
    )


def test_style_problems_flag_long_sentences() -> None:
    long_sentence = " ".join(["word"] * 31) + "."
    assert style_problems("Short. " + long_sentence, 600) == [
        f"long sentence (31 words): {long_sentence[:60]}..."
    ]


def test_pack_validates_and_is_declared(capsys: pytest.CaptureFixture[str]) -> None:
    pack.validate()
    assert pack.warnings() == []
    writer = next(a for a in pack.agents if a.name == "article_writer")
    assert writer.type == "dual_ai" and writer.expose_as_tool
    assert writer.side_a.session_status.name == "set_writing_status"
    assert (writer.side_b.session_stop.name, writer.side_b.session_fail.name) == (
        "publish",
        "reject_draft",
    )
    assert all(a.package_name == "sa-pack-content" and a.license for a in pack.agents)
    project = tomllib.loads((PACK_DIR / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["sa.packs"] == {"content": "sa_pack_content:pack"}
    assert [p.name for p in load_packs_from(str(PACK_DIR))] == ["content"]
    assert sa_main(["validate", str(PACK_DIR)]) == 0
    assert "pack content: 2 agents" in capsys.readouterr().out
