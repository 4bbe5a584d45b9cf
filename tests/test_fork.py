"""``thread.fork(at=...)`` through the public API: history, files, values, registry, isolation."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from sqlalchemy import func, select

from sa_core.errors import CutPointError, SharedHistoryError
from sa_core.store import tables as t
from timetravel_kit import Lead, pack

pytestmark = pytest.mark.asyncio


async def contents(thread: Any, **options: Any) -> list[tuple[str, str | None]]:
    page = await thread.get_messages(limit=1000, **options)
    return [(m.role, m.content) for m in page.messages]


async def ids(thread: Any) -> list[str]:
    return [m.id for m in (await thread.get_messages(limit=1000)).messages]


async def files(thread: Any) -> dict[str, str | None]:
    return {r.path: r.content_hash for r in await thread.find_files("*") if not r.is_directory}


async def count(rt: Any, table: Any) -> int:
    return int(await rt.store.read(lambda conn: conn.execute(select(func.count()).select_from(table)).scalar_one()))


async def test_a_fork_reads_its_source_history_up_to_the_cut_then_its_own(sa_runtime_factory):
    lead = Lead()
    async with sa_runtime_factory(packs=[pack()], providers={"test": lead.provider}) as rt:
        source = await rt.create_thread("lead")
        await source.send_message("hello")
        await source.send_message("write /a.txt one")
        cut = (await ids(source))[-1]  # "done": the round's answer
        await source.send_message("later in the source")
        fork = await source.fork(at=cut)
        assert fork.thread_id != source.thread_id and fork.agent_id == "lead"
        assert await contents(fork) == (await contents(source))[:6]
        await fork.send_message("only in the fork")
        seen = [m.content for m in lead.lead_requests[-1].messages]
        assert seen[1:4] == ["hello", "answer to hello", "write /a.txt one"]
        assert "later in the source" not in seen and seen[-1] == "only in the fork"
        assert (await contents(fork))[-2:] == [("user", "only in the fork"), ("assistant", "answer to only in the fork")]
        assert "only in the fork" not in [c for _, c in await contents(source)]
        page = await fork.get_messages(limit=2, offset=5)
        assert [m.content for m in page.messages] == ["done", "only in the fork"] and page.total == 8
        assert [m.content for m in (await fork.get_messages(limit=2, order="desc")).messages] == [
            "answer to only in the fork", "only in the fork"
        ]


async def test_a_fork_copies_no_message_and_no_file_content(sa_runtime_factory):
    async with sa_runtime_factory(packs=[pack()], providers={"test": Lead().provider}) as rt:
        source = await rt.create_thread("lead")
        for i in range(5):
            await source.send_message(f"write /f{i}.txt text {i}")
        messages, blobs = await count(rt, t.messages), await count(rt, t.file_blobs)
        fork = await source.fork()
        assert await count(rt, t.messages) == messages and await count(rt, t.file_blobs) == blobs
        assert await files(fork) == await files(source)
        assert await fork.read_file("/f3.txt") == b"text 3"


async def test_a_fork_has_the_files_values_and_registry_the_source_had_at_the_cut(sa_runtime_factory):
    lead = Lead()
    async with sa_runtime_factory(packs=[pack()], providers={"test": lead.provider}) as rt:
        source = await rt.create_thread("lead")
        await source.set_value("made", "at creation")
        await source.send_message("write /a.txt one")
        await source.send_message("set colour blue")
        await source.send_message("ask first")
        cut = (await ids(source))[-1]
        before = await files(source)
        await source.send_message("write /a.txt two")
        await source.send_message("move /a.txt /b.txt")
        await source.send_message("set colour red")
        await source.send_message("ask second")
        fork = await source.fork(at=cut)
        assert await files(fork) == before == {"/a.txt": hashlib.sha256(b"one").hexdigest()}
        assert await fork.read_file("/a.txt") == b"one"
        assert (await fork.get_value("colour"), await fork.get_value("made")) == ("blue", "at creation")
        await source.refresh()
        assert [c.name for c in source.children] == ["asker", "asker"]
        assert [(c.name, c.status) for c in fork.children] == [("asker", "terminated")]
        child = await fork.get_child_thread(fork.children[0].reference)
        original = await source.get_child_thread(source.children[0].reference)
        assert child is not None and original is not None and child.parent_id == fork.thread_id
        assert await contents(child, include_silent=True) == await contents(original, include_silent=True)


async def test_writes_on_either_side_never_show_on_the_other(sa_runtime_factory):
    async with sa_runtime_factory(packs=[pack()], providers={"test": Lead().provider}) as rt:
        source = await rt.create_thread("lead")
        await source.send_message("write /shared.txt base")
        await source.send_message("set k base")
        fork = await source.fork()
        await fork.send_message("write /shared.txt fork")
        await fork.send_message("set k fork")
        await fork.write_file("/only-fork.txt", "f")
        await source.send_message("delete /shared.txt")
        await source.set_value("k", "source")
        await source.write_file("/only-source.txt", "s")
        assert await fork.read_file("/shared.txt") == b"fork" and await source.read_file("/shared.txt") is None
        assert (await fork.get_value("k"), await source.get_value("k")) == ("fork", "source")
        assert set(await files(fork)) == {"/shared.txt", "/only-fork.txt"}
        assert set(await files(source)) == {"/only-source.txt"}
        assert "delete /shared.txt" not in [c for _, c in await contents(fork)]
        assert "set k fork" not in [c for _, c in await contents(source)]


async def test_a_cut_must_be_a_quiescent_point_of_the_history(sa_runtime_factory):
    async with sa_runtime_factory(packs=[pack()], providers={"test": Lead().provider}) as rt:
        source = await rt.create_thread("lead")
        await source.send_message("both /a.txt x")
        other = await rt.create_thread("lead")
        await other.send_message("hi")
        page = (await source.get_messages()).messages
        user, call, first, last, answer = page
        assert call.tool_calls and (first.role, last.role) == ("tool", "tool")
        with pytest.raises(CutPointError, match="tool calls have no results yet"):
            await source.fork(at=call.id)
        with pytest.raises(CutPointError, match="tool round is not over: set_value"):
            await source.fork(at=first.id)
        with pytest.raises(CutPointError, match="no such message"):
            await source.fork(at=(await ids(other))[0])
        with pytest.raises(CutPointError, match="no such message"):
            await source.fork(at="nope")
        for quiescent in (user, last, answer):
            fork = await source.fork(at=quiescent.id)
            assert (await ids(fork))[-1] == quiescent.id
        forked = await source.fork(at=last.id)
        assert set(await files(forked)) == {"/a.txt"} and await forked.get_value("/a.txt") == "x"


async def test_a_child_running_at_the_cut_is_interrupted_in_the_fork_and_can_be_resumed_there(
    sa_runtime_factory,
):
    lead = Lead()
    async with sa_runtime_factory(packs=[pack()], providers={"test": lead.provider}) as rt:
        source = await rt.create_thread("lead")
        await source.send_message("spawn quick")
        await rt.wait_idle(timeout=30)
        await source.send_message("spawn wait for it")  # its child waits for the gate
        await source.refresh()
        assert [c.status for c in source.children] == ["terminated", "running"]
        fork = await source.fork()
        assert [c.status for c in fork.children] == ["terminated", "interrupted"]
        lead.gate.set()
        await rt.wait_idle(timeout=30)
        await source.refresh()
        assert source.children[1].status == "terminated"  # the source's child went on
        interrupted = await fork.get_child_thread(fork.children[1].reference)
        assert interrupted is not None
        assert "did wait for it" not in str(await contents(interrupted, include_silent=True))
        notes = [c for _, c in await contents(fork, include_silent=True) if c and "wait for it" in c]
        assert not [n for n in notes if "returned the following result" in n]
        await interrupted.send_message("wait for it, again")  # resumed in the fork
        await rt.wait_idle(timeout=30)
        reports = [c for _, c in await contents(fork, include_silent=True) if c and "returned" in c]
        assert any("did wait for it" in r and interrupted.thread_id in r for r in reports)
        source_reports = [c for _, c in await contents(source, include_silent=True) if c and "returned" in c]
        assert not any(interrupted.thread_id in r for r in source_reports)


async def test_a_fork_of_a_fork_reads_through_both(sa_runtime_factory):
    lead = Lead()
    async with sa_runtime_factory(packs=[pack()], providers={"test": lead.provider}) as rt:
        source = await rt.create_thread("lead")
        await source.send_message("write /a.txt one")
        first = await source.fork()
        await first.send_message("write /b.txt two")
        cut_in_source = (await ids(source))[0]
        second = await first.fork()
        third = await first.fork(at=cut_in_source)
        await second.send_message("three")
        assert [c for _, c in await contents(second)] == [
            c for _, c in await contents(first)
        ] + ["three", "answer to three"]
        assert set(await files(second)) == {"/a.txt", "/b.txt"}
        assert await contents(third) == [("user", "write /a.txt one")] and await files(third) == {}
        lineage = await first.lineage()
        assert [(e.kind, e.source_id) for e in lineage] == [
            ("fork", source.thread_id), ("fork", first.thread_id), ("fork", first.thread_id)
        ]


async def test_history_a_fork_shares_cannot_change_on_either_side(sa_runtime_factory):
    async with sa_runtime_factory(packs=[pack()], providers={"test": Lead().provider}) as rt:
        source = await rt.create_thread("lead")
        await source.send_message("hello")
        shared = (await ids(source))[0]
        fork = await source.fork()
        await fork.send_message("mine")
        own = (await ids(fork))[-1]
        with pytest.raises(SharedHistoryError, match="forked from"):
            await fork.update_message(shared, {"content": "changed"})
        with pytest.raises(SharedHistoryError, match="forked from"):
            await fork.delete_message(shared)
        with pytest.raises(SharedHistoryError, match=f"forks {fork.thread_id} share it"):
            await source.update_message(shared, {"content": "changed"})
        with pytest.raises(SharedHistoryError, match=f"forks {fork.thread_id} read its messages"):
            await rt.delete_thread(source.thread_id)
        assert (await fork.update_message(own, {"content": "edited"})).content == "edited"
        await source.send_message("after the fork")
        after = (await ids(source))[-1]
        assert (await source.update_message(after, {"content": "x"})).content == "x"
        assert await rt.delete_thread(fork.thread_id) == [fork.thread_id]
        assert await rt.delete_thread(source.thread_id) == [source.thread_id]


async def test_files_at_and_read_file_at_work_on_the_messages_a_fork_shares(sa_runtime_factory):
    async with sa_runtime_factory(packs=[pack()], providers={"test": Lead().provider}) as rt:
        source = await rt.create_thread("lead")
        await source.send_message("write /a.txt one")
        first = (await ids(source))[-1]
        await source.send_message("write /a.txt two")
        fork = await source.fork()
        await fork.send_message("write /a.txt three")
        assert await fork.read_file("/a.txt", at=first) == b"one"
        assert [r.path for r in await fork.files_at(first)] == ["/a.txt"]
        assert await fork.read_file("/a.txt") == b"three" and await source.read_file("/a.txt") == b"two"


async def test_a_fork_frame_reaches_the_source_stream(sa_runtime_factory):
    async with sa_runtime_factory(packs=[pack()], providers={"test": Lead().provider}) as rt:
        source = await rt.create_thread("lead")
        await source.send_message("hello")
        async with rt.events.subscribe(source.thread_id) as frames:
            fork = await source.fork()
            frame = frames.get_nowait()
    assert frame["type"] == "fork" and frame["fork_id"] == fork.thread_id
    assert frame["thread_id"] == source.thread_id and frame["message_id"] is None


async def test_a_resumable_child_is_interrupted_in_the_fork_and_answers_to_its_old_reference(
    sa_runtime_factory,
):
    lead = Lead()
    lead.gate.set()
    async with sa_runtime_factory(packs=[pack()], providers={"test": lead.provider}) as rt:
        source = await rt.create_thread("lead")
        await source.send_message("create alpha first-task")
        await rt.wait_idle(timeout=30)
        await source.refresh()
        old = source.children[0].reference
        fork = await source.fork()
        assert [(c.name, c.status) for c in fork.children] == [("keeper", "interrupted")]
        new = fork.children[0].reference
        assert new != old
        await fork.send_message(f"tell {old} second-task")  # the reference the history names
        await rt.wait_idle(timeout=30)
        sent = [c for _, c in await contents(fork) if c and c.startswith("Message sent")]
        assert sent == [f"Message sent to subagent {new}."]
        child = await fork.get_child_thread(new)
        assert child is not None
        assert "second-task" in [c for _, c in await contents(child, include_silent=True)]
        original = await source.get_child_thread(old)
        assert "second-task" not in [c for _, c in await contents(original, include_silent=True)]
