"""One executor per thread across workers: leases fence, hand over and stop turns.

Two or three runtimes (workers) in this process share one PostgreSQL database, with a 1 s
lease. The pack's ``slow`` tool records which worker ran it and waits on a gate the test opens,
so the tests decide when a turn is mid-tool.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest
from pydantic import BaseModel
from settle_helpers import hold_settlement, note_enqueued
from sqlalchemy import update

from sa_core import Pack, Runtime, define_agent, define_model, define_prompt, define_tool
from sa_core.errors import ThreadTerminatedError
from sa_core.providers import ProviderRequest
from sa_core.store import now_us, tables
from sa_core.store.executions import ExecutionRecord, ResumePoint
from sa_core.testing import FunctionProvider

pytestmark = pytest.mark.asyncio


class Label(BaseModel):
    label: str


class Gate:
    """What the ``slow`` tool did, and the event that lets it finish."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.started = asyncio.Event()
        self.runs: list[tuple[str, str]] = []
        """(worker id, "start" | "end" | "cut") per tool execution event."""
        self.cut_at: int | None = None
        """When (µs) a run was cut off."""


GATE = Gate()


async def _slow(worker: str, args: Label) -> str:
    GATE.runs.append((worker, "start"))
    GATE.started.set()
    try:
        await GATE.open.wait()
    except asyncio.CancelledError:
        GATE.cut_at = now_us()
        GATE.runs.append((worker, "cut"))
        raise
    GATE.runs.append((worker, "end"))
    return f"did {args.label}"


def _brain(request: ProviderRequest) -> Any:
    last = request.messages[-1]
    if last.role == "tool":
        return f"answer: {last.content}"
    return {"tool_calls": [{"name": "slow", "arguments": {"label": last.content}}]}


def _pack(runtime: list[Runtime]) -> Pack:
    """The pack of one worker: its ``slow`` tool names the worker running it."""

    async def slow(state: Any, args: Label) -> str:
        workers = runtime[0].workers
        assert workers is not None
        return await _slow(workers.worker_id, args)

    return Pack(
        name="handover",
        agents=[define_agent(name="helper", side_a={"prompt": "main"})],
        prompts=[
            define_prompt(name="main", model="m", prompt="Help.", include_chat=True, tools=["slow"])
        ],
        models=[define_model(name="m", provider="test", model="fake")],
        tools=[define_tool(name="slow", description="Slow work.", args=Label, execute=slow)],
    )


@pytest.fixture(autouse=True)
def short_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    global GATE
    GATE = Gate()
    monkeypatch.setenv("SA_LEASE_SECONDS", "1")


@asynccontextmanager
async def workers(url: str, count: int) -> AsyncIterator[list[tuple[Runtime, FunctionProvider]]]:
    async with AsyncExitStack() as stack:
        started = []
        for _ in range(count):
            provider = FunctionProvider(_brain)
            holder: list[Runtime] = []
            runtime = Runtime(
                packs=[_pack(holder)],
                providers={"test": provider},
                database_url=url,
                load_entrypoints=False,
            )
            holder.append(runtime)
            started.append((await stack.enter_async_context(runtime), provider))
        yield started


async def until(predicate: Any, what: str, timeout: float = 60) -> None:
    async with asyncio.timeout(timeout):
        while not await predicate():
            await asyncio.sleep(0.02)


async def until_released(runtime: Runtime, thread_id: str, timeout: float = 60) -> None:
    """Wait until no worker holds the thread's lease."""

    async def released() -> bool:
        return await runtime.store.lease_owner(thread_id) is None

    await until(released, "the lease to be given back", timeout)


async def contents(runtime: Runtime, thread_id: str) -> list[tuple[str, str | None]]:
    messages, _total = await runtime.store.list_messages(thread_id, limit=100)
    return [(m.role, m.content) for m in messages]


async def test_a_resume_point_read_before_the_lease_does_not_rerun_a_turn_finished_meanwhile(
    pg_database_url: str,
) -> None:
    async with workers(pg_database_url, 2) as [(first, _), (second, model)]:
        state = await first.create_thread("helper", package="handover")
        thread_id = state.thread_id
        # a restarting worker read this owed turn; another worker then ran and finished it
        stale = ResumePoint(since=0, side="a", turns={"a": 0, "b": 0})
        await first.store.save_execution(thread_id, ExecutionRecord(status="owed", resume=stale))
        await first.store.finish_execution(thread_id, "idle")
        second.scheduler.kick(thread_id, "a", resume=stale)  # what its start-up does with it
        await second.wait_idle(timeout=60)
        assert model.requests == []  # no turn ran again
        record = await second.store.get_execution(thread_id)
        assert record is not None and record.status == "idle"
        await until_released(first, thread_id)


async def test_a_turn_whose_lease_was_taken_over_commits_nothing_more(
    pg_database_url: str,
) -> None:
    async with workers(pg_database_url, 2) as [(first, _), (second, _)]:
        state = await first.create_thread("helper", package="handover")
        thread_id = state.thread_id
        await state.send_message("one", wait=False)
        await asyncio.wait_for(GATE.started.wait(), 60)
        before = await contents(first, thread_id)
        # the lease passes to another worker behind this one's back (it was partitioned)
        async with first.store.transaction() as tx:
            await tx.run(
                lambda conn: conn.execute(
                    update(tables.thread_leases)
                    .where(tables.thread_leases.c.thread_id == thread_id)
                    .values(owner="elsewhere", expires_at=10**18)
                )
            )
        GATE.open.set()  # the tool finishes: its result must not commit
        await first.scheduler.wait(thread_id)
        assert await contents(first, thread_id) == before  # no tool row, no failure rows
        assert first.scheduler.entries() == 0
        assert await second.store.lease_owner(thread_id) == "elsewhere"


async def test_a_turn_stops_before_its_unrenewed_lease_expires_and_another_worker_finishes_it(
    pg_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SA_LEASE_SECONDS", "2")  # the watchdog's margin: 0.5 s
    async with workers(pg_database_url, 2) as [(first, _), (second, _)]:
        state = await first.create_thread("helper", package="handover")
        thread_id = state.thread_id
        await state.send_message("two", wait=False)
        await asyncio.wait_for(GATE.started.wait(), 60)
        assert first.workers is not None and second.workers is not None
        lease_expiry = first.workers.expires[thread_id]
        # the first worker stalls: its heartbeat and reaper stop; its watchdog still runs
        for task in first.workers._tasks[:2]:
            task.cancel()

        async def cut_off() -> bool:
            return (first.workers.worker_id, "cut") in GATE.runs  # type: ignore[union-attr]

        await until(cut_off, "the first worker to stop its turn")
        assert GATE.cut_at is not None and GATE.cut_at < lease_expiry  # before it could expire
        GATE.open.set()

        async def answered() -> bool:
            return ("assistant", "answer: did two") in await contents(second, thread_id)

        await until(answered, "the second worker to finish the turn")
        await second.wait_idle(timeout=60)
        workers_in_order = [worker for worker, event in GATE.runs if event == "start"]
        assert workers_in_order == [first.workers.worker_id, second.workers.worker_id]
        assert GATE.runs.index((first.workers.worker_id, "cut")) < GATE.runs.index(
            (second.workers.worker_id, "start")
        )  # never two executors at once
        roles = [role for role, _ in await contents(second, thread_id)]
        assert roles == ["user", "assistant", "tool", "assistant"]  # one result, one answer


async def test_stop_and_terminate_posted_to_another_worker_end_the_running_turn(
    pg_database_url: str,
) -> None:
    async with workers(pg_database_url, 2) as [(first, _), (second, _)]:
        for action in ("stop", "terminate"):
            GATE.started.clear()
            GATE.runs.clear()
            state = await first.create_thread("helper", package="handover")
            thread_id = state.thread_id
            await state.send_message(action, wait=False)
            await asyncio.wait_for(GATE.started.wait(), 60)
            elsewhere = await second.get_thread(thread_id)
            if action == "stop":
                await elsewhere.stop()
            else:
                await elsewhere.terminate()

            async def ended() -> bool:
                record = await first.store.get_execution(thread_id)  # noqa: B023
                idle = record is not None and record.status == "idle"  # nothing owed
                return idle and not first.is_running(thread_id)  # noqa: B023

            await until(ended, f"{action} to reach the worker running the turn")
            assert (first.workers.worker_id, "cut") in GATE.runs  # type: ignore[union-attr]
            row = await first.store.get_thread(thread_id)
            assert row is not None and row.stopped
            assert (row.terminated is not None) == (action == "terminate")
            await first.wait_idle(timeout=60)
            await until_released(first, thread_id)


async def test_a_settled_threads_lease_is_kept_for_its_next_turn_then_given_back(
    pg_database_url: str,
) -> None:
    GATE.open.set()  # the tool finishes at once
    async with workers(pg_database_url, 2) as [(first, _), (second, _)]:
        assert first.workers is not None and second.workers is not None
        state = await first.create_thread("helper", package="handover")
        thread_id = state.thread_id
        await state.send_message("one", wait=True)
        # the turn settled: the lease stays the first worker's, and its next turn there takes
        # it without asking the database
        assert await first.store.lease_owner(thread_id) == first.workers.worker_id
        assert first.workers.settled(thread_id) and first.workers.holds(thread_id)
        token = first.workers.held[thread_id]
        await state.send_message("two", wait=True)
        assert first.workers.held[thread_id] == token  # the same acquisition
        # a message posted to the other worker meanwhile runs on the holder
        elsewhere = await second.get_thread(thread_id)
        await elsewhere.send_message("three", wait=False)

        async def answered() -> bool:
            return ("assistant", "answer: did three") in await contents(first, thread_id)

        await until(answered, "the holder to run the message posted elsewhere")
        assert [w for w, event in GATE.runs if event == "start"] == [
            first.workers.worker_id
        ] * 3
        await first.wait_idle(timeout=60)
        # a third of the 1 s expiry after the turn, at the next heartbeat: given back
        await until_released(first, thread_id)
        assert not first.workers.settled(thread_id)


async def test_a_message_posted_while_the_runner_settles_owes_its_own_turn_under_the_same_lease(
    pg_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SA_LEASE_SECONDS", "10")  # kept 3 s after a turn: no give-back here
    GATE.open.set()
    async with workers(pg_database_url, 1) as [(first, _)]:
        assert first.workers is not None
        state = await first.create_thread("helper", package="handover")
        thread_id = state.thread_id
        settling, go_on = hold_settlement(first, monkeypatch)
        await state.send_message("one", wait=False)
        await settling.wait()  # the turn ended; its settlement holds the store's write lock
        token = first.workers.held[thread_id]
        reads: list[str] = []
        get_execution = first.store.get_execution

        async def counted(*args: Any, **kwargs: Any) -> Any:
            reads.append("execution")
            return await get_execution(*args, **kwargs)

        monkeypatch.setattr(first.store, "get_execution", counted)
        queued = note_enqueued(first, monkeypatch)
        posted = asyncio.create_task(state.send_message("two", wait=False))
        await asyncio.sleep(0.05)  # the post waits for the settlement's commit
        assert not posted.done()
        go_on.set()
        await posted

        async def answered() -> bool:
            return ("assistant", "answer: did two") in await contents(first, thread_id)

        await until(answered, "the queued message to be answered")
        await first.wait_idle(timeout=60)
        # the message owed a turn of its own rather than queueing behind the settling one: the
        # same lease acquisition throughout, kept after the turn, and no owed-turn read
        assert queued == []
        assert first.workers.held[thread_id] == token
        assert first.workers.settled(thread_id)
        assert reads == []


async def test_a_message_to_a_settled_thread_is_acknowledged_in_one_statement_with_its_reads(
    pg_database_url: str, monkeypatch: pytest.MonkeyPatch, sent: list[str]
) -> None:
    monkeypatch.setenv("SA_LEASE_SECONDS", "10")  # kept 3 s after a turn: no give-back here
    GATE.open.set()
    async with workers(pg_database_url, 1) as [(first, model)]:
        assert first.workers is not None
        state = await first.create_thread("helper", package="handover")
        thread_id = state.thread_id
        await state.send_message("one", wait=True)
        assert first.workers.settled(thread_id)
        sent.clear()
        posted = await first.thread_for_message(thread_id)  # the server's hot path
        assert sent == []  # the live handle serves: the commit checks the row
        await posted.send_message("two", wait=False)
        # the row check, the message, the owed turn, and the runner's reads: one round trip
        assert len(sent) == 1 and sent[0].startswith("WITH ")
        assert "INSERT INTO messages" in sent[0] and "history_entries" in sent[0]
        await first.wait_idle(timeout=60)
        # the turn's first step used the history read with the acknowledgement
        assert not [s for s in sent if s.startswith("SELECT messages.")]
        assert ("assistant", "answer: did two") in await contents(first, thread_id)
        seen = [m.content for m in model.requests[-2].messages if m.role in ("user", "assistant")]
        assert seen[-1] == "two" and "one" in seen and "answer: did one" in seen


async def test_a_message_on_a_handle_another_worker_made_stale_is_sent_on_the_row_as_it_is(
    pg_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SA_LEASE_SECONDS", "10")  # kept 3 s after a turn: no give-back here
    GATE.open.set()
    async with workers(pg_database_url, 2) as [(first, _), (second, _)]:
        state = await first.create_thread("helper", package="handover")
        thread_id = state.thread_id
        await state.send_message("one", wait=True)
        # another worker changes the row: the first one's live handle does not know
        other = await second.get_thread(thread_id)
        await other.set_env("MOOD", "calm")
        posted = await first.thread_for_message(thread_id)
        assert "MOOD" not in posted.row.env
        await posted.send_message("two", wait=False)
        await first.wait_idle(timeout=60)
        assert ("assistant", "answer: did two") in await contents(first, thread_id)
        assert (await first.thread_for_message(thread_id)).row.env.get("MOOD") == "calm"
        # terminated elsewhere: refused, and nothing written
        await (await second.get_thread(thread_id)).terminate()
        stale = await first.thread_for_message(thread_id)
        assert stale.row.terminated is None
        before = await contents(first, thread_id)
        with pytest.raises(ThreadTerminatedError):
            await stale.send_message("three", wait=False)
        assert await contents(first, thread_id) == before
        assert await first.store.list_queue(thread_id) == []


async def test_a_turn_whose_runner_was_cut_off_before_it_started_is_taken_over_and_answered(
    pg_database_url: str,
) -> None:
    GATE.open.set()
    async with workers(pg_database_url, 1) as [(first, _)]:
        assert first.workers is not None
        state = await first.create_thread("helper", package="handover")
        thread_id = state.thread_id
        await state.send_message("one", wait=False)  # acknowledged; its runner is created
        first.scheduler.interrupt(thread_id)  # the watchdog, before the runner's first step
        for _ in range(3):
            await asyncio.sleep(0)
        assert not first.scheduler.is_running(thread_id)

        async def answered() -> bool:
            return ("assistant", "answer: did one") in await contents(first, thread_id)

        # its lease was expired for the reapers: this worker's own takes the turn back
        await until(answered, "the owed turn to be resumed and answered")
