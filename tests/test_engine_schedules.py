"""Schedules: runs the clock starts, on SQLite and PostgreSQL, with a clock the test moves.

Each run is an ordinary thread (new, or the reused one) tagged ``schedule:{name}`` that gets the
schedule's message as a user message. The clock is a :class:`ManualClock`: nothing here waits
for real time to pass.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from echo_agent import echo_pack, echo_provider

from sa_core import Pack, Runtime, ScheduleDefinitionError, define_schedule
from sa_core.engine.workers.schedules import claim_run
from sa_core.errors import (
    DefinitionNotFoundError,
    ScheduleExistsError,
    ScheduleNotFoundError,
)
from sa_core.spec import VariableDefinition, define_agent
from sa_core.testing import ManualClock

pytestmark = pytest.mark.asyncio
MINUTE = 60_000_000
START = datetime(2030, 1, 4, 7, 59, 30, tzinfo=UTC)  # a Friday
"""Where the tests' clocks start."""


def us(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000)


def pack_with(*schedules: Any, agents: Sequence[Any] = ()) -> Pack:
    pack = echo_pack()
    pack.schedules = list(schedules)
    pack.agents = [*pack.agents, *agents]
    return pack


@asynccontextmanager
async def running(url: str, pack: Pack, clock: ManualClock) -> AsyncIterator[Runtime]:
    async with Runtime(
        packs=[pack],
        providers={"test": echo_provider()},
        database_url=url,
        load_entrypoints=False,
        clock=clock,
    ) as runtime:
        yield runtime


async def runs_of(runtime: Runtime, name: str) -> list[tuple[str, list[str]]]:
    """``(thread id, ["role: content" ...])`` of the schedule's threads, oldest first."""
    rows, _ = await runtime.store.list_threads(tag=f"schedule:{name}", limit=100)
    found = []
    for row in sorted(rows, key=lambda r: r.created_at):
        thread = await runtime.get_thread(row.id)
        messages = (await thread.get_messages(limit=100)).messages
        found.append((row.id, [f"{m.role}: {m.content}" for m in messages]))
    return found


async def test_an_every_minute_schedule_runs_once_a_minute_each_run_a_new_tagged_thread(
    sa_database_url: str,
) -> None:
    clock = ManualClock(START)
    tick = define_schedule(name="tick", agent="helper", every="1m", message="tick")
    async with running(sa_database_url, pack_with(tick), clock) as runtime:
        (record,) = await runtime.schedules.list()
        assert (record.name, record.source, record.status) == ("tick", "pack", "active")
        assert record.next_run_at == us(START) + MINUTE
        await runtime.wait_idle()
        assert await runs_of(runtime, "tick") == []  # not due yet
        for minute in range(1, 4):
            clock.advance(minutes=1)
            await runtime.wait_idle()
            runs = await runs_of(runtime, "tick")
            assert len(runs) == minute
            assert runs[-1][1] == ["user: tick", "assistant: echo: tick"]
        record = await runtime.schedules.get("tick")
        assert record.runs == 3
        assert record.last_run_at == us(START) + 3 * MINUTE
        assert record.next_run_at == us(START) + 4 * MINUTE
        assert record.last_thread_id == runs[-1][0]
        thread = await runtime.get_thread(runs[-1][0])
        assert thread.tags == ["schedule:tick"]
        first = (await thread.get_messages()).messages[0]
        assert first.metadata["schedule"] == "tick"
        assert first.metadata["scheduled_for"] == us(START) + 3 * MINUTE


async def test_a_cron_schedule_runs_at_its_times_in_its_time_zone(sa_database_url: str) -> None:
    clock = ManualClock(datetime(2030, 1, 4, 5, 59, tzinfo=UTC))  # Friday 07:59 in Riga
    digest = define_schedule(
        name="digest", agent="helper", cron="0 8 * * 1-5", timezone="Europe/Riga", message="go"
    )
    async with running(sa_database_url, pack_with(digest), clock) as runtime:
        friday_8_riga = us(datetime(2030, 1, 4, 6, 0, tzinfo=UTC))
        assert (await runtime.schedules.get("digest")).next_run_at == friday_8_riga
        clock.advance(minutes=1)
        await runtime.wait_idle()
        assert len(await runs_of(runtime, "digest")) == 1
        monday_8_riga = us(datetime(2030, 1, 7, 6, 0, tzinfo=UTC))  # the weekend is skipped
        assert (await runtime.schedules.get("digest")).next_run_at == monday_8_riga
        clock.advance(days=1)  # Saturday: nothing due
        await runtime.wait_idle()
        assert len(await runs_of(runtime, "digest")) == 1


async def test_runs_missed_while_no_runtime_ran_run_once_at_the_next_start(
    sa_database_url: str,
) -> None:
    clock = ManualClock(START)
    tick = define_schedule(name="tick", agent="helper", every="1m", message="tick")
    async with running(sa_database_url, pack_with(tick), clock) as runtime:
        await runtime.wait_idle()
    clock.advance(minutes=10, seconds=15)  # ten runs were due while nothing ran
    async with running(sa_database_url, pack_with(tick), clock) as runtime:
        await runtime.wait_idle()
        runs = await runs_of(runtime, "tick")
        assert [messages for _, messages in runs] == [["user: tick", "assistant: echo: tick"]]
        record = await runtime.schedules.get("tick")
        assert record.runs == 1
        assert record.last_run_at == us(START) + MINUTE  # the first one missed
        assert record.next_run_at == us(START) + 11 * MINUTE  # the next one from now, in phase


async def test_a_reuse_schedule_sends_every_run_to_the_same_thread(sa_database_url: str) -> None:
    clock = ManualClock(START)
    check = define_schedule(
        name="check", agent="helper", every="30s", thread="reuse", message="check"
    )
    async with running(sa_database_url, pack_with(check), clock) as runtime:
        for _ in range(3):
            clock.advance(seconds=30)
            await runtime.wait_idle()
        ((thread_id, messages),) = await runs_of(runtime, "check")
        assert messages == ["user: check", "assistant: echo: check"] * 3
        assert (await runtime.schedules.get("check")).thread_id == thread_id


async def test_pause_resume_and_delete_through_the_python_api(sa_database_url: str) -> None:
    clock = ManualClock(START)
    async with running(sa_database_url, pack_with(), clock) as runtime:
        created = await runtime.schedules.create(
            name="ping", agent="helper", every="1m", message="ping"
        )
        assert (created.package, created.source, created.status) == ("echo", "api", "active")
        assert created.next_run_at == us(START) + MINUTE
        paused = await runtime.schedules.pause("ping")
        assert paused.status == "paused"
        clock.advance(minutes=5)
        await runtime.wait_idle()
        assert await runs_of(runtime, "ping") == []  # paused: nothing runs
        resumed = await runtime.schedules.resume("ping")
        assert resumed.status == "active"
        assert resumed.next_run_at == us(START) + 6 * MINUTE  # from now: missed runs skipped
        clock.advance(minutes=1)
        await runtime.wait_idle()
        assert len(await runs_of(runtime, "ping")) == 1
        deleted = await runtime.schedules.delete("ping")
        assert deleted.name == "ping"
        assert await runtime.schedules.list() == []
        with pytest.raises(ScheduleNotFoundError, match="no schedule 'ping'"):
            await runtime.schedules.get("ping")
        clock.advance(minutes=5)
        await runtime.wait_idle()
        assert len(await runs_of(runtime, "ping")) == 1  # its thread is kept; no more runs


async def test_a_pack_schedule_paused_or_deleted_at_run_time_stays_so_after_a_restart(
    sa_database_url: str,
) -> None:
    clock = ManualClock(START)
    pack = pack_with(
        define_schedule(name="a", agent="helper", every="1m", message="a"),
        define_schedule(name="b", agent="helper", every="1m", message="b"),
    )
    async with running(sa_database_url, pack, clock) as runtime:
        await runtime.schedules.pause("a")
        await runtime.schedules.delete("b")
    async with running(sa_database_url, pack, clock) as runtime:
        assert [(r.name, r.status) for r in await runtime.schedules.list()] == [("a", "paused")]
        again = await runtime.schedules.create(name="b", agent="helper", every="2m", message="b")
        assert (again.source, again.every) == ("api", "2m")


async def test_a_changed_pack_schedule_is_updated_and_a_removed_one_dropped_at_start(
    sa_database_url: str,
) -> None:
    clock = ManualClock(START)
    old = pack_with(
        define_schedule(name="a", agent="helper", every="1m", message="a"),
        define_schedule(name="gone", agent="helper", every="1m", message="x"),
    )
    async with running(sa_database_url, old, clock) as runtime:
        pass
    clock.advance(seconds=10)
    new = pack_with(define_schedule(name="a", agent="helper", every="1h", message="hourly"))
    async with running(sa_database_url, new, clock) as runtime:
        (record,) = await runtime.schedules.list()
        assert (record.every, record.message) == ("1h", "hourly")
        assert record.next_run_at == clock.now_us() + 60 * MINUTE


async def test_a_claimed_run_is_never_claimed_again(sa_database_url: str) -> None:
    clock = ManualClock(START)
    tick = define_schedule(name="tick", agent="helper", every="1m", message="tick")
    async with running(sa_database_url, pack_with(tick), clock) as runtime:
        runtime.kernel.effects.wake = lambda: None  # type: ignore[method-assign]
        clock.set(us(START) + MINUTE)  # due; the loop is not woken: the test claims by hand
        record = await runtime.schedules.get("tick")
        now = clock.now_us()
        first = await claim_run(runtime.kernel, record, now)
        second = await claim_run(runtime.kernel, record, now)  # as a worker that read it too
        assert first is not None
        assert second is None
        await runtime.wait_idle()
        assert [thread_id for thread_id, _ in await runs_of(runtime, "tick")] == [first]


async def test_a_run_that_cannot_start_is_skipped_and_says_why(sa_database_url: str) -> None:
    clock = ManualClock(START)
    keyed = define_agent(
        name="keyed",
        side_a={"prompt": "main"},
        variables=[VariableDefinition(name="API_KEY", type="secret", required=True)],
    )
    job = define_schedule(name="job", agent="keyed", every="1m", message="go")
    async with running(sa_database_url, pack_with(job, agents=[keyed]), clock) as runtime:
        clock.advance(minutes=1)
        await runtime.wait_idle()
        record = await runtime.schedules.get("job")
        assert record.runs == 0
        assert record.next_run_at == us(START) + 2 * MINUTE
        assert record.last_error is not None and "API_KEY" in record.last_error
        assert await runs_of(runtime, "job") == []


async def test_creating_a_bad_duplicate_or_unknown_agent_schedule_says_what_is_wrong(
    sa_database_url: str,
) -> None:
    async with running(sa_database_url, pack_with(), ManualClock(START)) as runtime:
        with pytest.raises(ScheduleDefinitionError, match="Schedule 'x' has 2 problem"):
            await runtime.schedules.create(name="x", agent="helper", cron="bad", message="")
        with pytest.raises(DefinitionNotFoundError, match="Unknown agent 'nobody'"):
            await runtime.schedules.create(name="x", agent="nobody", every="1m", message="m")
        await runtime.schedules.create(name="x", agent="helper", every="1m", message="m")
        with pytest.raises(ScheduleExistsError, match="already has a schedule 'x'"):
            await runtime.schedules.create(name="x", agent="helper", every="5m", message="m")


async def test_schedules_before_the_runtime_starts_say_to_start_it_first(
    sa_database_url: str,
) -> None:
    runtime = Runtime(packs=[pack_with()], database_url=sa_database_url, load_entrypoints=False)
    with pytest.raises(RuntimeError, match="works once the runtime has started"):
        await runtime.schedules.list()
