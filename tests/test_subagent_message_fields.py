"""Messages carrying a ``subagent_id`` show that child's registry entry (seed 004).

``subagent_name``, ``subagent_status``, ... are "projected from runtime registry (when
available)": read from the parent's registry when messages are read, once per page.
"""

from __future__ import annotations

from typing import Any

import pytest
from composition_kit import APPROVE, research_pack, routed

from sa_core import Runtime
from sa_core.server.testing import signed_in_client

BLOCKING = {
    "name": "researcher",
    "blocking": True,
    "initUserMessageProperty": "task",
    "initAgentNameProperty": "label",
}


def two_delegations() -> Any:
    """The parent calls the blocking researcher twice in one step, then answers."""
    calls = [
        {"name": "researcher", "arguments": {"task": "find 42", "label": "first"}},
        {"name": "researcher", "arguments": {"task": "find 43", "label": "second"}},
    ]
    return routed(
        parent=[{"tool_calls": calls}, "Summarized"],
        worker=["Found it", "Found it too"],
        reviewer=[APPROVE, APPROVE],
    )


@pytest.mark.asyncio
async def test_get_messages_projects_each_childs_registry_entry_onto_its_messages(
    sa_runtime_factory,
):
    pack = research_pack(BLOCKING)
    async with sa_runtime_factory(packs=[pack], providers={"test": two_delegations()}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("research please")
        page = await parent.get_messages()
        first, second = (await parent.refresh()).children
        single = await parent.get_message(page.messages[2].id)
    rows = [m for m in page.messages if m.subagent_id]
    assert [m.subagent_id for m in rows] == [first.reference, second.reference]
    for row, label in zip(rows, ["first", "second"], strict=True):
        assert row.subagent_name == "researcher"
        assert row.subagent_description == "Researches a topic."
        assert row.subagent_status == "terminated"  # non-resumable: ended with its session
        assert row.subagent_blocking is True and row.subagent_resumable is False
        assert row.subagent_thread_name == label
        assert row.subagent_spawn_group_id == page.messages[1].id  # the step that spawned it
    assert single is not None and single.subagent_name == "researcher"
    # messages without a subagent_id are left as they are
    assert all(m.subagent_name is None for m in page.messages if not m.subagent_id)


@pytest.mark.asyncio
async def test_the_registry_is_read_once_per_page_and_not_at_all_without_subagent_messages(
    sa_runtime_factory,
):
    pack = research_pack(BLOCKING)
    async with sa_runtime_factory(packs=[pack], providers={"test": two_delegations()}) as rt:
        parent = await rt.create_thread("lead")
        await parent.send_message("research please")
        reads: list[str] = []
        list_children = rt.store.list_children

        async def counted(parent_id: str, **kwargs: Any) -> Any:
            reads.append(parent_id)
            return await list_children(parent_id, **kwargs)

        rt.store.list_children = counted  # type: ignore[method-assign]
        page = await parent.get_messages()
        assert len([m for m in page.messages if m.subagent_id]) == 2
        assert reads == [parent.thread_id]
        reads.clear()
        await parent.get_messages(limit=2)  # the user message and the step: no subagent ids
        assert reads == []


def test_the_http_messages_route_returns_the_projected_subagent_fields(sa_database_url):
    runtime = Runtime(
        packs=[research_pack(BLOCKING)],
        providers={"test": two_delegations()},
        database_url=sa_database_url,
        load_entrypoints=False,
    )
    base = "/api/packages/research/threads"
    with signed_in_client(runtime) as client:
        created = client.post(base, json={"agent": "lead"})
        assert created.status_code == 201, created.text
        thread_id = created.json()["id"]
        posted = client.post(f"{base}/{thread_id}/messages", json={"content": "research please"})
        assert posted.status_code == 202, posted.text
        client.blocking_portal.call(runtime.wait_idle, 10)
        response = client.get(f"{base}/{thread_id}/messages")
    assert response.status_code == 200, response.text
    rows = [m for m in response.json()["messages"] if m.get("subagent_id")]
    assert [
        (m["subagent_name"], m["subagent_status"], m["subagent_thread_name"]) for m in rows
    ] == [("researcher", "terminated", "first"), ("researcher", "terminated", "second")]
    assert all(m["subagent_blocking"] is True for m in rows)
