"""Effects with several workers: none is left behind when the worker that had it dies.

A worker's effect loop sleeps until the earliest pending effect it knows of is due. Effects
another worker scheduled, or that a reaper gave back from a dead worker, must still be found
by a worker with nothing else to wake it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from sqlalchemy import update

from sa_core import Pack, Runtime, define_agent, define_effect, define_model, define_prompt
from sa_core.store import Store, ThreadRow, now_us, tables
from sa_core.testing import FunctionProvider

pytestmark = pytest.mark.asyncio
SECOND = 1_000_000


@pytest.fixture(autouse=True)
def short_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SA_LEASE_SECONDS", "1")


def _pack(ran: list[str]) -> Pack:
    async def remind(state: Any, args: Any) -> None:
        ran.append(state.thread_id)

    return Pack(
        name="effects",
        agents=[define_agent(name="helper", side_a={"prompt": "main"})],
        prompts=[define_prompt(name="main", model="m", prompt="Help.")],
        models=[define_model(name="m", provider="test", model="fake")],
        effects=[define_effect(name="remind", execute=remind)],
    )


@asynccontextmanager
async def idle_worker(url: str) -> AsyncIterator[tuple[Store, list[str]]]:
    """A worker with thread ``t1`` and nothing scheduled in it.

    Yields its store and the threads its ``remind`` effect ran on; on leaving, waits (up to
    15 s) for the effect to run.
    """
    ran: list[str] = []
    async with Runtime(
        packs=[_pack(ran)],
        providers={"test": FunctionProvider(lambda request: "ok")},
        database_url=url,
        load_entrypoints=False,
    ) as runtime:
        store = runtime.store
        await store.create_thread(ThreadRow(id="t1", package="effects", agent_id="helper"))
        yield store, ran
        async with asyncio.timeout(60):
            while not ran:
                await asyncio.sleep(0.05)


async def test_an_effect_a_dead_worker_had_claimed_runs_on_an_idle_worker(
    pg_database_url: str,
) -> None:
    async with idle_worker(pg_database_url) as (store, ran):
        # a worker that claimed the effect and died: its heartbeat is still fresh when this
        # worker starts looking, and expires a second later
        await store.heartbeat("ghost", 1 * SECOND, [])
        effect = await store.schedule_effect("t1", "remind", {}, now_us())
        async with store.transaction() as tx:
            await tx.run(
                lambda conn: conn.execute(
                    update(tables.effects)
                    .where(tables.effects.c.id == effect.id)
                    .values(status="processing", owner="ghost", started_at=now_us())
                )
            )
    assert ran == ["t1"]


async def test_an_effect_another_worker_scheduled_runs_when_that_worker_is_gone(
    pg_database_url: str,
) -> None:
    async with idle_worker(pg_database_url) as (store, ran):
        await asyncio.sleep(0.5)  # this worker's effect loop has found nothing to wait for
        # scheduled through the store, as another worker that died before it was due does:
        # nothing in this worker is told about it
        await store.schedule_effect("t1", "remind", {}, now_us() + SECOND // 2)
    assert ran == ["t1"]
