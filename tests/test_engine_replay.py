"""Export, import and replay a multi-agent thread tree with its files, and find divergences.

The recording runs on the suite's store (SQLite and PostgreSQL: ``test_engine_*``); each replay
runs in a fresh SQLite runtime with a provider that fails if it is called.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from replay_desk import desk_model, desk_pack, no_model, run_desk

from sa_core import Runtime
from sa_core.errors import ReplayUnavailableError, ThreadDocumentError


class Subject(BaseModel):
    subject: str


async def recorded_desk(sa_runtime_factory: Any) -> dict[str, Any]:
    """Run the desk on the suite's store and export it (through JSON, as a file would)."""
    executed: list[str] = []
    async with sa_runtime_factory(
        packs=[desk_pack(executed)], providers={"test": desk_model()}
    ) as rt:
        lead = await run_desk(rt)
        document = await lead.export()
    assert executed == ["write_notes", "lookup", "approve", "approve", "publish"]
    return dict(json.loads(json.dumps(document)))


def fresh(tmp_path: Path, executed: list[str], **changes: Any) -> Runtime:
    """A new SQLite runtime with the desk pack (``changes`` injected) and no usable model."""
    return Runtime(
        packs=[desk_pack(executed, **changes)],
        providers={"test": no_model()},
        database_url=f"sqlite:///{tmp_path / 'replay.db'}",
        load_entrypoints=False,
    )


@pytest.mark.asyncio
async def test_an_exported_tree_replays_identically_in_a_fresh_runtime_without_model_or_tools(
    sa_runtime_factory: Any, tmp_path: Path
) -> None:
    document = await recorded_desk(sa_runtime_factory)
    root = document["thread"]
    assert document["format"] == "sa-thread/1"
    assert [c["path"] for c in root["children"]] == ["root/researcher#1", "root/writer#1"]
    assert {f["path"] for f in root["files"] if not f["is_directory"]} == {
        "/notes/plan.md",
        "/out/report.md",
    }
    executed: list[str] = []
    async with fresh(tmp_path, executed) as rt:
        imported = await rt.import_thread(document)
        report = await rt.replay_thread(imported.thread_id)
        replayed = await rt.get_thread(report.thread_id)
        published = await replayed.read_file("/out/report.md")
        provider = rt.providers["test"]
    assert report.identical, str(report)
    assert report.divergence is None
    calls = sum(len(n["model_calls"]) for n in [root, *root["children"]])
    assert report.model_calls == calls == 10
    assert provider.call_count == 0
    assert executed == []  # no tool ran: every result, file and value came from the recording
    assert report.tool_results_served == 5
    assert published == b"Tides follow the moon."


@pytest.mark.asyncio
async def test_an_imported_tree_reads_as_the_original(
    sa_runtime_factory: Any, tmp_path: Path
) -> None:
    document = await recorded_desk(sa_runtime_factory)
    async with fresh(tmp_path, []) as rt:
        imported = await rt.import_thread(document)
        again = await rt.import_thread(document)  # twice on one store: new ids each time
        page = await imported.get_messages(include_silent=True, limit=100)
        children = imported.children
        notes = await imported.read_file("/notes/plan.md")
        exported = await imported.export()
    original = document["thread"]
    assert imported.thread_id != original["id"] != again.thread_id
    new_ids = {c["id"]: n.reference for c, n in zip(original["children"], children, strict=True)}
    assert set(new_ids.values()) == {c["id"] for c in exported["thread"]["children"]}

    def renamed(text: str | None) -> str | None:
        for old, new in new_ids.items():
            text = text.replace(old, new) if text else text
        return text

    depth0 = [m for m in original["messages"] if m.get("depth", 0) == 0]
    assert [m.content for m in page.messages] == [renamed(m.get("content")) for m in depth0]
    assert [m.created_at for m in page.messages] == [m["created_at"] for m in depth0]
    assert notes == b"# Plan\nstudy the tides\n"
    calls = exported["thread"]["model_calls"]
    assert [(c["request_hash"], c["response"]) for c in calls] == [
        (c["request_hash"], c["response"]) for c in original["model_calls"]
    ]
    assert {c["thread_id"] for c in calls} == {imported.thread_id}


@pytest.mark.asyncio
async def test_a_document_needing_agents_the_runtime_lacks_is_refused_naming_them(
    sa_runtime_factory: Any, tmp_path: Path
) -> None:
    document = await recorded_desk(sa_runtime_factory)
    document["thread"]["children"][0]["agent_id"] = "archivist"
    document["thread"]["children"][1]["package"] = "elsewhere"
    async with fresh(tmp_path, []) as rt:
        with pytest.raises(ThreadDocumentError) as raised:
            await rt.import_thread(document)
        with pytest.raises(ThreadDocumentError):
            await rt.replay_thread(document)
        with pytest.raises(ThreadDocumentError, match="sa-thread/1"):
            await rt.import_thread({"format": "other"})
    problems = raised.value.problems
    assert len(problems) == 2
    assert (
        "agent 'archivist' of package 'desk'" in problems[0] and "root/researcher#1" in problems[0]
    )
    assert "agent 'writer' of package 'elsewhere'" in problems[1]


@pytest.mark.asyncio
async def test_a_thread_recorded_without_answers_cannot_be_replayed(
    sa_runtime_factory: Any, tmp_path: Path
) -> None:
    document = await recorded_desk(sa_runtime_factory)
    document["thread"]["children"][0]["model_calls"] = []
    async with fresh(tmp_path, []) as rt:
        with pytest.raises(ReplayUnavailableError, match="root/researcher#1: 3") as raised:
            await rt.replay_thread(document)
    assert raised.value.unrecorded == [("root/researcher#1", 3)]


# -- injected changes: each found at its first divergence ---------------------------------------


@pytest.mark.asyncio
async def test_a_changed_word_of_a_prompt_is_a_changed_request_at_the_root(
    sa_runtime_factory: Any, tmp_path: Path
) -> None:
    document = await recorded_desk(sa_runtime_factory)
    async with fresh(tmp_path, [], lead_prompt="You run the research office.") as rt:
        report = await rt.replay_thread(document)
    first = report.divergence
    assert first is not None and not report.identical
    assert (first.kind, first.path, first.ordinal) == ("request_changed", "root", 1)
    assert "system prompt changed" in first.summary
    assert "-You run the research desk." in first.diff
    assert "+You run the research office." in first.diff


@pytest.mark.asyncio
async def test_a_changed_tool_schema_is_a_changed_request_of_the_child_that_offers_it(
    sa_runtime_factory: Any, tmp_path: Path
) -> None:
    document = await recorded_desk(sa_runtime_factory)
    async with fresh(tmp_path, [], lookup_schema=Subject) as rt:
        report = await rt.replay_thread(document)
    first = report.divergence
    assert first is not None
    assert (first.kind, first.path, first.ordinal) == ("request_changed", "root/researcher#1", 1)
    assert "tool 'lookup' changed" in first.summary
    assert '+      "subject": {' in first.diff


@pytest.mark.asyncio
async def test_a_tool_result_that_changed_under_execute_is_a_different_tool_result(
    sa_runtime_factory: Any, tmp_path: Path
) -> None:
    document = await recorded_desk(sa_runtime_factory)
    executed: list[str] = []
    async with fresh(tmp_path, executed, lookup_result="Tides follow the sun.") as rt:
        report = await rt.replay_thread(document, tools="execute")
    first = report.divergence
    assert first is not None
    assert (first.kind, first.path, first.ordinal) == (
        "different_tool_result",
        "root/researcher#1",
        1,
    )
    assert "-Tides follow the moon." in first.diff and "+Tides follow the sun." in first.diff
    assert executed[:2] == ["write_notes", "lookup"]


@pytest.mark.asyncio
async def test_an_extra_child_is_reported_where_it_was_created(
    sa_runtime_factory: Any, tmp_path: Path
) -> None:
    document = await recorded_desk(sa_runtime_factory)
    async with fresh(tmp_path, [], notes_extra_child=True, lookup_replay="recorded") as rt:
        report = await rt.replay_thread(document, tools="execute")
    first = report.divergence
    assert first is not None
    assert (first.kind, first.path, first.ordinal) == ("extra_child", "root/writer#1", None)
    assert "agent 'writer'" in first.summary


@pytest.mark.asyncio
async def test_a_replay_that_goes_on_reports_every_divergence_and_unused_recordings(
    sa_runtime_factory: Any, tmp_path: Path
) -> None:
    document = await recorded_desk(sa_runtime_factory)
    lead = document["thread"]
    lead["model_calls"].append(dict(lead["model_calls"][-1]))  # a call the replay never makes
    lead["logs"].append({**lead["logs"][-1], "id": "00000000-0000-7000-8000-000000000000"})
    lead["model_calls"][-1]["log_id"] = "00000000-0000-7000-8000-000000000000"
    async with fresh(tmp_path, []) as rt:
        report = await rt.replay_thread(document, stop_at_first=False)
    kinds = [(d.kind, d.path, d.ordinal) for d in report.divergences]
    assert ("missing_model_call", "root", 6) in kinds


@pytest.mark.asyncio
async def test_a_fork_exports_its_shared_history_and_replays_identically(
    sa_runtime_factory: Any, tmp_path: Path
) -> None:
    executed: list[str] = []
    async with sa_runtime_factory(
        packs=[desk_pack(executed)], providers={"test": desk_model()}
    ) as rt:
        lead = await run_desk(rt)
        fork = await lead.fork()  # at its latest message: the whole history, shared
        document = await fork.export()
        source = await lead.export()
    node = document["thread"]
    assert node["id"] == fork.thread_id
    assert [m.get("content") for m in node["messages"]] == [
        m.get("content") for m in source["thread"]["messages"]
    ]
    assert {m["thread_id"] for m in node["messages"]} == {fork.thread_id}
    assert [c["request_hash"] for c in node["model_calls"]] == [
        c["request_hash"] for c in source["thread"]["model_calls"]
    ]
    async with fresh(tmp_path, []) as rt:
        report = await rt.replay_thread(document)
        lineage = await (await rt.get_thread(report.thread_id)).lineage()
    assert report.identical, str(report)
    assert [(e.kind, e.source_id) for e in lineage] == [("replay", fork.thread_id)]

