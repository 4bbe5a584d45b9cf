"""The scheduler: one runner per thread, nothing kept per idle thread, claims in the store."""

from __future__ import annotations

from typing import Any

import pytest
from echo_agent import echo_pack, echo_provider
from settle_helpers import hold_settlement, note_enqueued

from sa_core.engine import owed


@pytest.mark.asyncio
async def test_scheduler_keeps_no_entry_for_threads_that_went_idle(sa_runtime_factory: Any) -> None:
    async with sa_runtime_factory(packs=[echo_pack()], providers={"test": echo_provider()}) as rt:
        threads = [await rt.create_thread("helper") for _ in range(20)]
        for thread in threads:
            await thread.send_message("hi", wait=False)
            await thread.queue_message({"content": "more"})
        await rt.wait_idle(timeout=60)
        assert rt.scheduler.entries() == 0
        assert not rt.scheduler.busy
        answers = [(await t.get_messages()).messages[-1].content for t in threads]
    assert answers == ["echo: more"] * 20


@pytest.mark.asyncio
async def test_thread_claimed_by_another_live_runtime_is_not_run_here(
    sa_runtime_factory: Any,
) -> None:
    provider = echo_provider()
    async with sa_runtime_factory(packs=[echo_pack()], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        assert await rt.store.claim_execution(thread.thread_id, "another-worker")
        await thread.send_message("hi")  # waits: the runner finds the claim and leaves
        assert provider.requests == []
        record = await rt.store.get_execution(thread.thread_id)
        assert record is not None and record.status == "owed"  # still owed, to the claimant
        assert record.claimed_by == "another-worker"
        await rt.store.release_execution(thread.thread_id, "another-worker")
        await owed.ensure_running(rt.kernel, thread.thread_id)
        await rt.scheduler.wait(thread.thread_id)
        page = await thread.get_messages()
        record = await rt.store.get_execution(thread.thread_id)
    assert [m.content for m in page.messages] == ["hi", "echo: hi"]
    assert record is not None and record.claimed_by is None and record.status == "idle"


@pytest.mark.asyncio
async def test_a_starting_runtime_takes_over_claims_of_dead_processes(
    sa_runtime_factory: Any,
) -> None:
    async with sa_runtime_factory(packs=[echo_pack()], providers={"test": echo_provider()}) as rt:
        thread = await rt.create_thread("helper")
        rt.kernel.life.open = False  # the process dies after the acknowledgement, holding a claim
        await thread.send_message("hi", wait=False)
        rt.kernel.life.open = True
        assert await rt.store.claim_execution(thread.thread_id, "dead-process")
    async with sa_runtime_factory(packs=[echo_pack()], providers={"test": echo_provider()}) as rt:
        await rt.wait_idle(timeout=60)
        page = await (await rt.get_thread(thread.thread_id)).get_messages()
    assert [m.content for m in page.messages] == ["hi", "echo: hi"]


@pytest.mark.asyncio
async def test_a_message_sent_while_the_runner_settles_owes_its_own_turn_instead_of_queueing(
    sa_runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    async with sa_runtime_factory(packs=[echo_pack()], providers={"test": echo_provider()}) as rt:
        thread = await rt.create_thread("helper")
        settling, go_on = hold_settlement(rt, monkeypatch)
        queued = note_enqueued(rt, monkeypatch)
        await thread.send_message("one", wait=False)
        await settling.wait()  # the turn took its last step and is settling
        posted = asyncio.create_task(thread.send_message("two", wait=False))
        await asyncio.sleep(0.05)
        assert not posted.done()  # it waits for the settlement's commit
        go_on.set()
        message = await posted
        await rt.wait_idle(timeout=60)
        contents = [m.content for m in (await thread.get_messages()).messages]
    assert contents == ["one", "echo: one", "two", "echo: two"]
    assert queued == []  # stored as a message of its own, never queued
    assert "queued" not in (message.metadata or {})


@pytest.mark.asyncio
async def test_a_message_queued_as_the_runner_ends_is_still_run(
    sa_runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    async with sa_runtime_factory(packs=[echo_pack()], providers={"test": echo_provider()}) as rt:
        thread = await rt.create_thread("helper")
        settling, go_on = hold_settlement(rt, monkeypatch)

        async def no_wait(thread_id: str) -> None:  # the message is decided busy and queued
            return None

        monkeypatch.setattr(rt.scheduler, "wait_settled", no_wait)
        await thread.send_message("one", wait=False)
        await settling.wait()
        # the runner's settlement reads the queue before this entry commits, and it ends
        posted = asyncio.create_task(thread.send_message("two", wait=False))
        await asyncio.sleep(0.05)
        go_on.set()
        await posted
        await rt.wait_idle(timeout=60)
        contents = [m.content for m in (await thread.get_messages()).messages]
        assert await rt.store.list_queue(thread.thread_id) == []
    assert contents == ["one", "echo: one", "two", "echo: two"]


@pytest.mark.asyncio
async def test_a_runner_interrupted_before_its_first_step_leaves_the_thread_idle(
    sa_runtime_factory: Any,
) -> None:
    import asyncio

    async with sa_runtime_factory(packs=[echo_pack()], providers={"test": echo_provider()}) as rt:
        thread = await rt.create_thread("helper")
        rt.scheduler.kick(thread.thread_id, "a")
        rt.scheduler.interrupt(thread.thread_id)  # cancelled before the task first ran
        for _ in range(3):
            await asyncio.sleep(0)
        # nothing keeps the thread looking busy: a message starts a turn and is answered
        assert not rt.scheduler.is_running(thread.thread_id)
        assert rt.scheduler.entries() == 0
        async with asyncio.timeout(60):
            await thread.send_message("hi", wait=True)
        contents = [m.content for m in (await thread.get_messages()).messages]
    assert contents == ["hi", "echo: hi"]
