"""Scheduled effects through the public API: run later with a thread state, survive restarts, run
from another runtime, can be removed, are not missed, and end quietly with their thread.
"""

from __future__ import annotations

import asyncio

import pytest
from engine_state_kit import make_pack
from pydantic import BaseModel

from sa_core import (
    define_effect,
)


@pytest.mark.asyncio
async def test_scheduled_effect_runs_later_with_a_thread_state(sa_runtime_factory):
    ran = []

    class Args(BaseModel):
        text: str

    async def remind(state, args: Args):
        ran.append(args.text)
        await state.inject_message({"role": "assistant", "content": f"Reminder: {args.text}"})

    effect = define_effect(name="remind", description="x", args=Args, execute=remind)
    async with sa_runtime_factory(packs=[make_pack(effects=[effect])]) as rt:
        thread = await rt.create_thread("helper")
        effect_id = await thread.schedule_effect("remind", {"text": "stretch"}, delay=0.05)
        pending = await thread.get_scheduled_effects()
        assert [e.id for e in pending] == [effect_id] and pending[0].args == {"text": "stretch"}
        await asyncio.sleep(0.2)
        await rt.wait_idle(timeout=60)
        assert ran == ["stretch"]
        assert await thread.get_scheduled_effects() == []
        page = await thread.get_messages()
        assert page.messages[-1].content == "Reminder: stretch"


@pytest.mark.asyncio
async def test_pending_effect_survives_restart(sa_runtime_factory):
    ran = []
    effect = define_effect(name="ping", description="x", execute=lambda state, args: ran.append(state.thread_id))
    pack = make_pack(effects=[effect])
    async with sa_runtime_factory(packs=[pack]) as rt:
        thread = await rt.create_thread("helper")
        await thread.schedule_effect("ping", {}, delay=0.3)
    assert ran == []
    async with sa_runtime_factory(packs=[pack]) as rt:
        await asyncio.sleep(0.5)
        await rt.wait_idle(timeout=60)
    assert ran == [thread.thread_id]


@pytest.mark.asyncio
async def test_an_effect_another_runtime_stored_runs_while_this_one_is_idle(
    sa_runtime_factory, monkeypatch
):
    from sa_core.engine.delivery.effects import EffectScheduler

    monkeypatch.setattr(EffectScheduler, "poll_seconds", 0.2)
    ran = []
    effect = define_effect(name="ping", description="x", execute=lambda state, args: ran.append(1))
    pack = make_pack(effects=[effect])
    async with sa_runtime_factory(packs=[pack]) as rt:
        await asyncio.sleep(0.1)  # its effect loop found nothing to wait for
        # another runtime on the same database stores an effect and stops before it is due
        async with sa_runtime_factory(packs=[pack]) as other:
            thread = await other.create_thread("helper")
            await thread.schedule_effect("ping", {}, delay=0.3)
        async with asyncio.timeout(60):
            while not ran:
                await asyncio.sleep(0.05)
    assert ran == [1]


@pytest.mark.asyncio
async def test_removed_effect_does_not_run(sa_runtime_factory):
    ran = []
    effect = define_effect(name="ping", description="x", execute=lambda state, args: ran.append(1))
    async with sa_runtime_factory(packs=[make_pack(effects=[effect])]) as rt:
        thread = await rt.create_thread("helper")
        effect_id = await thread.schedule_effect("ping", {}, delay=0.1)
        assert await thread.remove_scheduled_effect(effect_id) is True
        await asyncio.sleep(0.25)
        await rt.wait_idle(timeout=60)
    assert ran == []


@pytest.mark.asyncio
async def test_an_effect_scheduled_while_the_scheduler_reads_is_not_missed(sa_runtime_factory):
    ran = asyncio.Event()
    effect = define_effect(name="ping", description="x", execute=lambda state, args: ran.set() if args.get("now") else None)
    async with sa_runtime_factory(packs=[make_pack(effects=[effect])]) as rt:
        thread = await rt.create_thread("helper")
        # On a backend whose reads suspend (aiosqlite, asyncpg) another task can schedule an
        # effect while the scheduler is reading the next due time; reproduce that interleaving.
        store = rt.store
        read_next = store.next_effect_time
        raced = []

        async def racing_read(**kwargs):
            value = await read_next(**kwargs)
            if not raced:
                raced.append(True)
                await thread.schedule_effect("ping", {"now": True}, delay=0)
            return value

        store.next_effect_time = racing_read
        await thread.schedule_effect("ping", {}, delay=3600)  # wakes the scheduler
        await asyncio.wait_for(ran.wait(), 60)
        assert raced


@pytest.mark.asyncio
async def test_an_effect_whose_thread_is_deleted_while_it_runs_ends_quietly(sa_runtime_factory):
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(state, args):
        started.set()
        await release.wait()
        await state.inject_message({"role": "assistant", "content": "late"})

    effect = define_effect(name="slow", description="x", execute=slow)
    async with sa_runtime_factory(packs=[make_pack(effects=[effect])]) as rt:
        thread = await rt.create_thread("helper")
        await thread.schedule_effect("slow", {}, delay=0)
        await asyncio.wait_for(started.wait(), 60)
        running = list(rt.effects.running)
        await rt.delete_thread(thread.thread_id)
        release.set()
        outcomes = await asyncio.gather(*running, return_exceptions=True)
    assert outcomes == [None]
