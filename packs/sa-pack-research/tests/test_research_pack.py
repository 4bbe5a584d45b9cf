"""The research pack, run end to end with a scripted model."""

from __future__ import annotations

import asyncio
import json
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sa_pack_research
from sa_pack_research import NOTES_PATH, pack

from sa_core.cli import main as sa_main
from sa_core.packloader import load_packs_from
from sa_core.providers import ProviderRequest
from sa_core.testing import FunctionProvider

PACK_DIR = Path(__file__).resolve().parents[1]

ROLES = {
    "coordinator": "You are the research coordinator.",
    "worker": "You are a research worker.",
    "reviewer": "You are the research reviewer.",
    "analyst": "You are a QA analyst.",
    "judge": "You are the QA judge.",
}

RESULT = "Subagent (reference: {ref}) has returned the following result:\n\n{result}"
FAILURE = "Subagent (reference: {ref}) has reported a failure:\n\n{result}"
RETURNED = "\n\nThe subagent also returned the following attachment(s):\n\n{paths}"

Answer = str | dict[str, Any] | Callable[[ProviderRequest], Any]


def role_of(request: ProviderRequest) -> str:
    system = request.messages[0].content or ""
    for role, marker in ROLES.items():
        if system.startswith(marker):
            return role
    raise AssertionError(f"unknown system prompt: {system[:60]!r}")


def scripted(**queues: list[Answer]) -> FunctionProvider:
    """A model that answers each prompt (by its system prompt) from its own queue."""
    pending = {role: list(items) for role, items in queues.items()}
    seen: dict[str, list[ProviderRequest]] = {role: [] for role in ROLES}

    async def answer(request: ProviderRequest) -> Any:
        role = role_of(request)
        seen[role].append(request)
        if not pending.get(role):
            raise AssertionError(f"no scripted answer left for {role}")
        item = pending[role].pop(0)
        if callable(item):
            item = item(request)
            if asyncio.iscoroutine(item):
                item = await item
        return item

    provider = FunctionProvider(answer, name="openai")
    provider.seen = seen  # type: ignore[attr-defined]
    provider.pending = pending  # type: ignore[attr-defined]
    return provider


def call(tool: str, /, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def last_text(request: ProviderRequest) -> str:
    return request.messages[-1].content or ""


def path_in(text: str, stem: str) -> str:
    found = re.search(rf"/attachments/{stem}[\w.-]*", text)
    assert found, f"no /attachments/{stem}... path in {text!r}"
    return found.group(0)


BRIEF = "# Brief\nQuestion: what is the answer?\nThe answer is 42.\n"
NOTES = "# Notes\n- The answer is 42 (source: brief line 3)\n"
SUMMARY = "The brief states the answer is 42."
DRAFT = f"The answer is 42 (source: {NOTES_PATH})."
VERDICT = "Sourced and precise."


# -- the whole flow ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_research_then_qa_end_to_end(sa_runtime_factory) -> None:
    gate = asyncio.Event()
    follow_up_gate = asyncio.Event()
    observed: dict[str, Any] = {}
    holder: dict[str, Any] = {}

    async def worker_begins(request: ProviderRequest) -> Any:
        await gate.wait()
        observed["first_worker_message"] = last_text(request)
        return {
            "tool_calls": [
                {"name": "report_progress", "arguments": {"status": "reading the brief"}},
                {"name": "list_attachments", "arguments": {}},
            ]
        }

    async def worker_reads(request: ProviderRequest) -> Any:
        parent = await holder["rt"].get_thread(holder["parent_id"])
        observed["status_while_working"] = parent.children[0].status
        return call("read_attachment", path=path_in(last_text(request), "brief-"))

    async def worker_follows_up(request: ProviderRequest) -> Any:
        await follow_up_gate.wait()
        observed["follow_up_message"] = last_text(request)
        return call("write_notes", content="- The question is unknown.", append=True)

    def coordinator_reads_notes(request: ProviderRequest) -> Any:
        observed["notification_seen"] = last_text(request)
        return call("read_attachment", path=path_in(last_text(request), "notes-"))

    def coordinator_follows_up(request: ProviderRequest) -> Any:
        return call(
            "subagent_message",
            referenceId=holder["reference"],
            message="Also find out what the question was.",
            attachments=[],
        )

    provider = scripted(
        coordinator=[
            call("save_brief", content=BRIEF),
            call(
                "subagent_create",
                agent="researcher",
                name="answer",
                message="Research the answer to the brief.",
                attachments=["/attachments/brief.md"],
            ),
            "The research has started; I will report back.",
            coordinator_reads_notes,
            call("fact_checker", draft=DRAFT),
            "The answer is 42.",
            coordinator_follows_up,
            "I asked the researcher.",
            "The question itself is unknown.",
        ],
        worker=[
            worker_begins,
            worker_reads,
            call("write_notes", content=NOTES),
            "Notes are ready for review.",
            worker_follows_up,
            "Notes updated.",
        ],
        reviewer=[
            call("read_attachment", path=NOTES_PATH),
            call("approve_research", summary=SUMMARY, attachments=[NOTES_PATH]),
            call("approve_research", summary="The question remains unknown.", attachments=[]),
        ],
        analyst=[call("analyze_draft", text=DRAFT), "No issues found."],
        judge=[call("qa_pass", verdict=VERDICT)],
    )
    async with sa_runtime_factory(packs=[pack], providers={"openai": provider}) as rt:
        parent = await rt.create_thread("coordinator")
        holder.update(rt=rt, parent_id=parent.thread_id)

        # 1. non-blocking, resumable: subagent_create returns at once
        await parent.send_message("What is the answer? Please research it.")
        await parent.refresh()
        entry = parent.children[0]
        reference = holder["reference"] = entry.reference
        assert (entry.name, entry.resumable, entry.thread_name) == ("researcher", True, "answer")
        page = await parent.get_messages()
        create_row = next(
            m for m in page.messages if m.role == "tool" and m.name == "subagent_create"
        )
        assert reference in create_row.content
        assert page.messages[-1].content == "The research has started; I will report back."
        offered = {t.name for t in provider.seen["coordinator"][0].tools}
        assert {"subagent_create", "subagent_message", "fact_checker"} <= offered
        assert "researcher" not in offered  # resumable: reached through the lifecycle tools

        # the brief was copied into the child's filesystem
        child = await parent.get_child_thread(reference)
        briefs = await child.find_files("/attachments/brief-*")
        assert len(briefs) == 1 and await child.read_file(briefs[0].path) == BRIEF.encode()

        # 2. the child works, the reviewer approves with the notes, the parent is notified
        gate.set()
        await rt.wait_idle(timeout=10)
        first = observed["first_worker_message"]  # the model sees the copied attachment's path
        assert (
            first
            == f"Research the answer to the brief.\n[Attached files: brief.md ({briefs[0].path})]"
        )
        assert observed["status_while_working"] == "reading the brief"
        assert await child.read_file(NOTES_PATH) == NOTES.encode()

        page = await parent.get_messages(include_silent=True)
        notes = [m for m in page.messages if m.silent]
        assert len(notes) == 1
        copied = notes[0].attachments[0].path
        assert copied.startswith("/attachments/notes-") and copied.endswith(".md")
        assert notes[0].content == RESULT.format(ref=reference, result=SUMMARY) + RETURNED.format(
            paths=copied
        )
        assert notes[0].role == "user" and notes[0].metadata["subagent_id"] == reference
        assert await parent.read_file(copied) == NOTES.encode()
        assert observed["notification_seen"].startswith(notes[0].content)

        # 3. blocking, non-resumable QA: the tool call waits and ends with the reference
        await parent.refresh()
        qa_entry = next(e for e in parent.children if e.name == "fact_checker")
        assert qa_entry.blocking is True and not qa_entry.resumable
        assert qa_entry.status == "terminated"  # non-resumable: it completed and terminated
        rows = [m for m in page.messages if m.role == "tool"]
        read_row = next(m for m in rows if m.name == "read_attachment")
        assert read_row.content == NOTES.strip()
        qa_row = next(m for m in rows if m.name == "fact_checker")
        assert qa_row.tool_status == "success" and qa_row.subagent_id == qa_entry.reference
        assert qa_row.content == f"{VERDICT}\n\nReference: {qa_entry.reference}"
        assert qa_row.content.endswith(f"\n\nReference: {qa_entry.reference}")
        assert last_text(provider.seen["analyst"][0]) == DRAFT
        analysis = json.loads(last_text(provider.seen["analyst"][1]))
        assert analysis["unsourced_numbers"] == [] and analysis["sentences"] == 1
        assert page.messages[-1].content == "The answer is 42."
        research_entry = next(e for e in parent.children if e.reference == reference)
        assert research_entry.status == "idle"

        # 4. resumable: the same instance is messaged again and reports a second result
        await parent.send_message("And what was the question?")
        follow_up_gate.set()
        await rt.wait_idle(timeout=10)
        page = await parent.get_messages(include_silent=True)
        await parent.refresh()

    notes = [m for m in page.messages if m.silent]
    assert notes[-1].content == RESULT.format(ref=reference, result="The question remains unknown.")
    assert observed["follow_up_message"] == "Also find out what the question was."
    assert page.messages[-1].content == "The question itself is unknown."
    assert len([e for e in parent.children if e.name == "researcher"]) == 1
    assert all(not queue for queue in provider.pending.values())


@pytest.mark.asyncio
async def test_qa_failure_is_an_error_result_with_the_reference(sa_runtime_factory) -> None:
    provider = scripted(
        coordinator=[call("fact_checker", draft="Many experts say it is 7."), "I will rewrite it."],
        analyst=[
            call("analyze_draft", text="Many experts say it is 7."),
            "Unsourced number; vague.",
        ],
        judge=[call("qa_fail", problems="The number 7 has no source.")],
    )
    async with sa_runtime_factory(packs=[pack], providers={"openai": provider}) as rt:
        parent = await rt.create_thread("coordinator")
        await parent.send_message("Is it 7?")
        await parent.refresh()
        page = await parent.get_messages()
    reference = parent.children[0].reference
    row = next(m for m in page.messages if m.role == "tool")
    assert row.tool_status == "error"
    assert (
        row.content
        == f"Failed to execute tool: The number 7 has no source.\n\nReference: {reference}"
    )
    assert parent.children[0].status == "terminated"  # non-resumable: ran once


@pytest.mark.asyncio
async def test_rejected_research_notifies_the_parent_of_the_failure(sa_runtime_factory) -> None:
    provider = scripted(
        coordinator=[
            call(
                "subagent_create",
                agent="researcher",
                name="moon",
                message="Find the moon's mass.",
                attachments=[],
            ),
            "Started.",
            "The research failed: there is no material.",
        ],
        worker=["I have no material to work from."],
        reviewer=[call("reject_research", reason="No sources were provided.")],
    )
    async with sa_runtime_factory(packs=[pack], providers={"openai": provider}) as rt:
        parent = await rt.create_thread("coordinator")
        await parent.send_message("How heavy is the moon?")
        await rt.wait_idle(timeout=10)
        await parent.refresh()
        page = await parent.get_messages(include_silent=True)
    reference = parent.children[0].reference
    note = next(m for m in page.messages if m.silent)
    assert note.content == FAILURE.format(ref=reference, result="No sources were provided.")
    assert parent.children[0].status == "failed"
    assert page.messages[-1].content == "The research failed: there is no material."


# -- tools ------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_worker_tools_use_the_thread_filesystem(sa_runtime_factory) -> None:
    async with sa_runtime_factory(packs=[pack]) as rt:
        thread = await rt.create_thread("researcher", package=pack.name)
        await thread.write_file("/attachments/source.txt", "alpha\nthe answer is 42\n")
        listed = await thread.invoke_tool("list_attachments", {})
        found = await thread.invoke_tool("search_attachments", {"pattern": "answer"})
        await thread.invoke_tool("write_notes", {"content": "one"})
        await thread.invoke_tool("write_notes", {"content": "two", "append": True})
        missing = await thread.invoke_tool("read_attachment", {"path": "/attachments/nope.md"})
        notes = await thread.read_file(NOTES_PATH)
    assert listed.result == "/attachments/source.txt (23 bytes)"
    assert found.result == "/attachments/source.txt:2: the answer is 42"
    assert notes == b"one\n\ntwo"
    assert missing.status == "error" and "No file at /attachments/nope.md" in missing.error


def test_analyze_draft_flags_unsourced_numbers_and_vague_claims() -> None:
    tool = next(t for t in pack.tools if t.name == "analyze_draft")
    report = tool.execute(
        None, tool.args(text="Sales grew 12%. Many analysts agree [1]. See https://x.y 5.")
    )
    assert report["sentences"] == 3
    assert report["unsourced_numbers"] == ["Sales grew 12%."]
    assert report["vague_claims"] == ["Many analysts agree [1]."]


# -- packaging --------------------------------------------------------------------------------


def test_pack_validates_without_warnings_and_carries_metadata() -> None:
    pack.validate()
    assert pack.warnings() == []
    for agent in pack.agents:
        assert (agent.package_name, agent.version, agent.license) == (
            "sa-pack-research",
            sa_pack_research.__version__,
            "Apache-2.0",
        )
        assert agent.author
    researcher = next(a for a in pack.agents if a.name == "researcher")
    assert (
        researcher.type == "dual_ai" and researcher.expose_as_tool and researcher.max_session_turns
    )
    assert researcher.side_a.session_status.name == "report_progress"
    assert researcher.side_b.session_stop.attachments_property == "attachments"


def test_entry_point_names_the_pack() -> None:
    project = tomllib.loads((PACK_DIR / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["sa.packs"] == {"research": "sa_pack_research:pack"}
    assert pack.name == "research"
    assert "standard-agents>=0.1" in project["project"]["dependencies"]


def test_loads_from_its_directory_and_passes_sa_validate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    loaded = load_packs_from(str(PACK_DIR))
    assert [p.name for p in loaded] == ["research"] and loaded[0] is pack
    assert sa_main(["validate", str(PACK_DIR)]) == 0
    assert "pack research: 3 agents" in capsys.readouterr().out
