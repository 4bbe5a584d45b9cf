"""``thread.rewind(to=...)`` through the public API: in place, nothing deleted, undoable."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import func, select

from sa_core.errors import CutPointError, ThreadBusyError
from sa_core.store import tables as t
from timetravel_kit import Lead, pack

pytestmark = pytest.mark.asyncio

KEPT_TABLES = (
    t.threads, t.messages, t.logs, t.file_blobs, t.file_versions, t.state_versions,
    t.thread_lineage, t.children, t.effects,
)
"""Tables a rewind never takes a row from (the current files and values change in place)."""


async def counts(rt: Any) -> dict[str, int]:
    def op(conn: Any) -> dict[str, int]:
        return {
            table.name: int(conn.execute(select(func.count()).select_from(table)).scalar_one())
            for table in KEPT_TABLES
        }

    return await rt.store.read(op)


async def contents(thread: Any, **options: Any) -> list[str | None]:
    return [m.content for m in (await thread.get_messages(limit=1000, **options)).messages]


async def last_id(thread: Any) -> str:
    return (await thread.get_messages(order="desc", limit=1)).messages[0].id


async def test_a_rewind_takes_later_messages_out_of_what_the_model_sees(sa_runtime_factory):
    lead = Lead()
    async with sa_runtime_factory(packs=[pack()], providers={"test": lead.provider}) as rt:
        thread = await rt.create_thread("lead")
        await thread.send_message("first")
        cut = await last_id(thread)
        await thread.send_message("second")
        await thread.send_message("third")
        before = await counts(rt)
        record = await thread.rewind(to=cut)
        assert record.kind == "rewind" and record.message_id == cut and record.data["rewound"] == 4
        assert await contents(thread) == ["first", "answer to first"]
        await thread.send_message("again")
        sent = [m.content for m in lead.lead_requests[-1].messages]
        assert sent == ["Lead.", "first", "answer to first", "again"]
        after = await counts(rt)
        assert all(after[name] >= before[name] for name in before), (before, after)
        shown = (await thread.get_messages(include_rewound=True)).messages
        assert [m.content for m in shown] == [
            "first", "answer to first", "second", "answer to second", "third", "answer to third",
            "again", "answer to again",
        ]
        rewound = [m.metadata["rewound"] for m in shown if (m.metadata or {}).get("rewound")]
        assert len(rewound) == 4 and {r["id"] for r in rewound} == {record.id}
        assert {r["to"] for r in rewound} == {cut}


async def test_files_and_values_return_to_the_cut_and_state_set_at_creation_survives(sa_runtime_factory):
    async with sa_runtime_factory(packs=[pack()], providers={"test": Lead().provider}) as rt:
        thread = await rt.create_thread("lead", env={"REGION": "eu"})
        await thread.set_value("profile", {"plan": "pro"})  # before any message
        await thread.send_message("write /a.txt one")
        await thread.send_message("set colour blue")
        cut = await last_id(thread)
        expected = {r.path: r.content_hash for r in await thread.files_at(cut)}
        await thread.send_message("write /a.txt two")
        await thread.send_message("write /b.txt new")
        await thread.send_message("move /a.txt /c/a.txt")
        await thread.send_message("set colour red")
        await thread.send_message("set extra 1")
        await thread.set_value("profile", {"plan": "free"})
        await thread.rewind(to=cut)
        now = {r.path: r.content_hash for r in await thread.find_files("*")}
        assert now == expected and await thread.read_file("/a.txt") == b"one"
        assert await thread.get_value("colour") == "blue" and await thread.get_value("extra") is None
        assert await thread.get_value("profile") == {"plan": "pro"} and thread.env("REGION") == "eu"


async def test_rewinding_to_a_later_message_of_the_rewound_range_undoes_the_rewind(sa_runtime_factory):
    async with sa_runtime_factory(packs=[pack()], providers={"test": Lead().provider}) as rt:
        thread = await rt.create_thread("lead")
        await thread.send_message("write /a.txt one")
        first = await last_id(thread)
        await thread.send_message("write /a.txt two")
        await thread.send_message("set k v")
        end = await last_id(thread)
        everything = await contents(thread)
        await thread.rewind(to=first)
        await thread.send_message("a different path")
        await thread.rewind(to=end)
        assert await contents(thread) == everything
        assert await thread.read_file("/a.txt") == b"two" and await thread.get_value("k") == "v"
        await thread.send_message("go on")
        assert (await contents(thread))[-2:] == ["go on", "answer to go on"]
        shown = await contents(thread, include_rewound=True)
        assert "a different path" in shown and "go on" in shown
        kinds = [(e.kind, e.message_id) for e in await thread.lineage()]
        assert kinds == [("rewind", first), ("rewind", end)]


async def test_children_created_after_the_cut_are_stopped_and_hidden(sa_runtime_factory):
    lead = Lead()
    async with sa_runtime_factory(packs=[pack()], providers={"test": lead.provider}) as rt:
        thread = await rt.create_thread("lead")
        await thread.send_message("ask early")
        cut = await last_id(thread)
        await thread.send_message("spawn wait here")
        await thread.refresh()
        waiting = thread.children[1].reference
        assert rt.scheduler.is_running(waiting)
        record = await thread.rewind(to=cut)
        assert record.data["hidden"] == [waiting]
        assert [c.name for c in thread.children] == ["asker"]
        assert [c.name for c in (await thread.refresh()).children] == ["asker"]
        child = await rt.store.get_thread(waiting)
        assert child is not None and child.stopped and not rt.scheduler.is_running(waiting)
        lead.gate.set()
        await rt.wait_idle(timeout=30)
        late = [c for c in await contents(thread, include_silent=True) if c and "did wait" in c]
        assert late == []  # the stopped child never reported into the rewound thread
        await thread.rewind(to=(await thread.get_messages(include_rewound=True)).messages[-1].id)
        assert [c.name for c in thread.children] == ["asker", "helper"]  # shown again


async def test_queue_entries_and_pending_effects_from_after_the_cut_are_cancelled(sa_runtime_factory):
    async with sa_runtime_factory(packs=[pack()], providers={"test": Lead().provider}) as rt:
        thread = await rt.create_thread("lead")
        kept = await thread.schedule_effect("remind", {}, delay=3600)
        await thread.send_message("first")
        cut = await last_id(thread)
        await thread.send_message("second")
        late = await thread.schedule_effect("remind", {}, delay=3600)
        left = await rt.store.enqueue(thread.thread_id, {"role": "user", "content": "left over"})
        record = await thread.rewind(to=cut)
        assert record.data["cancelled_effects"] == [late] and record.data["cancelled_queue"] == [left]
        assert [e.id for e in await thread.get_scheduled_effects()] == [kept]
        assert await rt.store.list_queue(thread.thread_id) == []


async def test_a_rewind_is_refused_while_a_turn_runs(sa_runtime_factory):
    lead = Lead()
    async with sa_runtime_factory(packs=[pack()], providers={"test": lead.provider}) as rt:
        thread = await rt.create_thread("lead")
        await thread.send_message("first")
        cut = await last_id(thread)
        await thread.send_message("block me", wait=False)
        await asyncio.sleep(0.05)
        with pytest.raises(ThreadBusyError, match="while a turn runs"):
            await thread.rewind(to=cut)
        lead.gate.set()
        await rt.wait_idle(timeout=30)
        await thread.rewind(to=cut)
        assert await contents(thread) == ["first", "answer to first"]


async def test_a_rewind_needs_a_quiescent_message_of_the_history(sa_runtime_factory):
    async with sa_runtime_factory(packs=[pack()], providers={"test": Lead().provider}) as rt:
        thread = await rt.create_thread("lead")
        await thread.send_message("write /a.txt one")
        call = (await thread.get_messages()).messages[1]
        with pytest.raises(CutPointError, match="no results yet"):
            await thread.rewind(to=call.id)
        with pytest.raises(CutPointError, match="no such message"):
            await thread.rewind(to="unknown")


async def test_a_fork_rewound_into_its_shared_history_keeps_its_source_untouched(sa_runtime_factory):
    async with sa_runtime_factory(packs=[pack()], providers={"test": Lead().provider}) as rt:
        source = await rt.create_thread("lead")
        await source.send_message("write /a.txt one")
        cut = await last_id(source)
        await source.send_message("write /a.txt two")
        fork = await source.fork()
        await fork.send_message("write /a.txt three")
        await fork.rewind(to=cut)
        assert await contents(fork) == ["write /a.txt one", None, "written", "done"]
        assert await fork.read_file("/a.txt") == b"one" and await source.read_file("/a.txt") == b"two"
        assert len(await contents(source)) == 8


async def test_a_rewind_frame_reaches_the_thread_stream(sa_runtime_factory):
    async with sa_runtime_factory(packs=[pack()], providers={"test": Lead().provider}) as rt:
        thread = await rt.create_thread("lead")
        await thread.send_message("first")
        cut = await last_id(thread)
        await thread.send_message("second")
        async with rt.events.subscribe(thread.thread_id) as frames:
            record = await thread.rewind(to=cut)
            frame = frames.get_nowait()
    assert frame["type"] == "rewind" and frame["message_id"] == cut
    assert frame["rewound"] == 2 and frame["lineage_id"] == record.id
