"""Durable execution in-process: the execution record, the acknowledgement transaction, the
queue consumed exactly once, a clean shutdown resumed like a crash, and the store functions."""

from __future__ import annotations

import asyncio
import importlib.util
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from pydantic import BaseModel

from sa_core import Pack, define_agent, define_effect, define_model, define_prompt, define_tool
from sa_core.store import Store, ThreadRow, open_store
from sa_core.store.executions import ExecutionRecord, ResumePoint
from sa_core.state import thread_of
from sa_core.testing import FunctionProvider

_ASYNC_MARKS = (
    [] if importlib.util.find_spec("greenlet") else [pytest.mark.skip(reason="needs greenlet")]
)


@pytest_asyncio.fixture(params=["sqlite", pytest.param("sqlite+aiosqlite", marks=_ASYNC_MARKS)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    opened = await open_store(f"{request.param}:///{tmp_path / 'sa.db'}")
    await opened.create_thread(ThreadRow(id="t1", package="p", agent_id="a"))
    try:
        yield opened
    finally:
        await opened.close()


class Note(BaseModel):
    note: str


def gated_pack(runs: list[tuple[str | None, int]], gate: asyncio.Event) -> Pack:
    async def slow(state: Any, args: Note) -> str:
        runs.append((state.tool_call_id, state.tool_attempt))
        await gate.wait()
        return f"noted {args.note}"

    def answer(request: Any) -> Any:
        last = request.messages[-1]
        if last.role == "tool":
            return f"done: {last.content}"
        return {"tool_calls": [{"name": "slow", "arguments": {"note": last.content}}]}

    prompt = define_prompt(name="main", model="m", prompt="Hi.", include_chat=True, tools=["slow"])
    pack = Pack(
        name="gated",
        agents=[define_agent(name="helper", side_a={"prompt": "main"})],
        prompts=[prompt],
        models=[define_model(name="m", provider="test", model="x")],
        tools=[define_tool(name="slow", description="Slow.", args=Note, execute=slow)],
    )
    pack.answer = answer  # type: ignore[attr-defined]
    return pack


# -- the store ---------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_execution_record_round_trips_and_owed_ones_are_listed(store: Store) -> None:
    # a thread is created with its record: idle, nothing owed, unclaimed
    assert await store.get_execution("t1") == ExecutionRecord(status="idle")
    assert await store.owed_executions() == {}
    point = ResumePoint(since=5, side="b", turns={"a": 1, "b": 2}, step_message_id="m1")
    await store.save_execution("t1", ExecutionRecord(status="running", resume=point))
    record = await store.get_execution("t1")
    assert record is not None and record.status == "running" and record.resume == point
    assert list(await store.owed_executions()) == ["t1"]
    await store.finish_execution("t1", "stop_on_response")
    record = await store.get_execution("t1")
    assert record == ExecutionRecord(status="idle", stop_reason="stop_on_response")
    assert await store.owed_executions() == {}


@pytest.mark.asyncio
async def test_execution_record_is_deleted_with_its_thread(store: Store) -> None:
    await store.save_execution("t1", ExecutionRecord(status="owed", resume=ResumePoint(since=1)))
    await store.delete_thread("t1")
    assert await store.get_execution("t1") is None


@pytest.mark.asyncio
async def test_started_effects_count_attempts_and_a_second_interruption_fails_them(
    store: Store,
) -> None:
    effect = await store.schedule_effect("t1", "tick", {}, 0)
    (run,) = await store.claim_due_effects(10**18)
    assert run.id == effect.id and run.attempt == 1
    assert await store.start_effect(run.id)
    assert await store.reset_processing_effects(max_attempts=2) == 1  # crash during run 1
    (run,) = await store.claim_due_effects(10**18)
    assert run.attempt == 2
    assert await store.start_effect(run.id)
    assert await store.reset_processing_effects(max_attempts=2) == 0  # crash during run 2
    assert await store.claim_due_effects(10**18) == []
    assert await store.list_effects("t1") == []


@pytest.mark.asyncio
async def test_a_crash_between_claim_and_body_uses_up_no_attempt(store: Store) -> None:
    effect = await store.schedule_effect("t1", "tick", {}, 0)
    for _ in range(3):  # claimed, then a crash before the body started, three times over
        (run,) = await store.claim_due_effects(10**18)
        assert run.id == effect.id and run.attempt == 1
        assert await store.reset_processing_effects(max_attempts=2) == 1
    (run,) = await store.claim_due_effects(10**18)
    assert run.attempt == 1  # the body still gets its first run, and one more after that
    assert await store.start_effect(run.id)
    assert await store.reset_processing_effects(max_attempts=2) == 1
    (run,) = await store.claim_due_effects(10**18)
    assert run.attempt == 2


@pytest.mark.asyncio
async def test_starting_an_effect_that_is_not_claimed_counts_nothing(store: Store) -> None:
    effect = await store.schedule_effect("t1", "tick", {}, 0)
    assert not await store.start_effect(effect.id)  # pending, not claimed
    assert not await store.start_effect("no-such-effect")
    (run,) = await store.claim_due_effects(10**18)
    assert run.attempt == 1


# -- the engine --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_an_effect_run_commits_its_attempt_before_its_body_runs(
    sa_runtime_factory: Any, tmp_path: Path
) -> None:
    seen: list[tuple[str, int, int]] = []

    def body(state: Any, args: dict[str, Any]) -> None:
        effect_id = state.context["scheduled_effect"]["id"]
        with closing(sqlite3.connect(tmp_path / "sa.db")) as db:
            status, attempts = db.execute(
                "SELECT status, attempts FROM effects WHERE id = ?", (effect_id,)
            ).fetchone()
        seen.append((status, attempts, state.effect_attempt))

    pack = Pack(
        name="fx",
        agents=[define_agent(name="a", side_a={"prompt": "p"})],
        prompts=[define_prompt(name="p", model="m", prompt="x")],
        models=[define_model(name="m", provider="test", model="x")],
        effects=[define_effect(name="tick", execute=body)],
    )
    async with sa_runtime_factory(packs=[pack], providers={"test": FunctionProvider(str)}) as rt:
        thread = await rt.create_thread("a")
        await thread.schedule_effect("tick", {}, 0)
        await rt.wait_idle(timeout=60)
    # a crash from here on has used up the first attempt; one before it would have used none
    assert seen == [("processing", 1, 1)]


@pytest.mark.asyncio
async def test_send_without_wait_commits_the_message_and_the_owed_turn_before_returning(
    sa_runtime_factory: Any,
) -> None:
    runs: list[tuple[str | None, int]] = []
    gate = asyncio.Event()
    pack = gated_pack(runs, gate)
    provider = FunctionProvider(pack.answer)  # type: ignore[attr-defined]
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as runtime:
        thread = await runtime.create_thread("helper")
        message = await thread.send_message("a", wait=False)
        # nothing ran yet: the runner task has not been scheduled
        record = await runtime.store.get_execution(thread.thread_id)
        assert record is not None and record.status == "owed"
        assert record.resume is not None and record.resume.since == message.created_at
        assert (await thread.get_message(message.id)) is not None
        gate.set()
        await runtime.wait_idle(timeout=60)
        record = await runtime.store.get_execution(thread.thread_id)
    assert record is not None and record.status == "idle" and record.resume is None
    assert record.stop_reason == "stop_on_response"


@pytest.mark.asyncio
async def test_shutdown_mid_tool_resumes_the_call_on_restart_with_attempt_two(
    sa_runtime_factory: Any,
) -> None:
    runs: list[tuple[str | None, int]] = []
    gate = asyncio.Event()
    pack = gated_pack(runs, gate)
    provider = FunctionProvider(pack.answer)  # type: ignore[attr-defined]
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as runtime:
        thread = await runtime.create_thread("helper")
        await thread.send_message("a", wait=False)
        while not runs:
            await asyncio.sleep(0.001)
    gate.set()
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as runtime:
        await runtime.wait_idle(timeout=60)
        page = await (await runtime.get_thread(thread.thread_id)).get_messages()
    call_id = page.messages[1].tool_calls[0].id
    assert runs == [(call_id, 1), (call_id, 2)]
    assert [(m.role, m.content) for m in page.messages] == [
        ("user", "a"),
        ("assistant", None),
        ("tool", "noted a"),
        ("assistant", "done: noted a"),
    ]
    assert len(provider.requests) == 2  # the tool-call response was not requested again


@pytest.mark.asyncio
async def test_queued_entries_become_messages_with_their_queue_ids_exactly_once(
    sa_runtime_factory: Any,
) -> None:
    runs: list[tuple[str | None, int]] = []
    gate = asyncio.Event()
    pack = gated_pack(runs, gate)
    provider = FunctionProvider(pack.answer)  # type: ignore[attr-defined]
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as runtime:
        thread = await runtime.create_thread("helper")
        queue_id = await thread.queue_message({"content": "q", "silent": True})
        gate.set()
        await runtime.wait_idle(timeout=60)
        stored = await thread.get_message(queue_id)
        assert await runtime.store.list_queue(thread.thread_id) == []
    assert stored is not None and stored.content == "q" and stored.metadata == {"queued": True}


@pytest.mark.asyncio
async def test_pending_row_left_by_a_crash_is_marked_interrupted_and_kept_out_of_context(
    sa_runtime_factory: Any,
) -> None:
    from sa_core.spec import Message

    runs: list[tuple[str | None, int]] = []
    gate = asyncio.Event()
    gate.set()
    pack = gated_pack(runs, gate)
    provider = FunctionProvider(lambda request: "answered")
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        rt.kernel.life.open = False  # the process dies mid-stream: the turn is owed, its row pending
        await thread.send_message("a", wait=False)
        rt.kernel.life.open = True
        partial = Message(
            id="partial", thread_id=thread.thread_id, role="assistant", content="Once up",
            status="pending",
        )
        await rt.store.insert_messages([partial])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        await rt.wait_idle(timeout=60)
        thread = await rt.get_thread(thread.thread_id)
        page = await thread.get_messages()
        cut = await thread.get_message("partial")
    assert cut is not None and cut.status == "failed" and cut.metadata is not None
    assert cut.metadata["interrupted"] is True
    assert "Interrupted by a restart" in cut.metadata["error"]
    assert [(m.role, m.content) for m in page.messages][-1] == ("assistant", "answered")
    assert [m.content for m in provider.requests[0].messages[1:]] == ["a"]


@pytest.mark.asyncio
async def test_subagent_call_run_again_after_a_restart_reuses_the_child_it_created(
    sa_runtime_factory: Any,
) -> None:
    lead = define_prompt(name="lead", model="m", prompt="Lead.", tools=["helper"])
    work = define_prompt(name="work", model="m", prompt="Work.")
    pack = Pack(
        name="team",
        agents=[
            define_agent(name="lead", side_a={"prompt": "lead"}),
            define_agent(
                name="helper",
                type="dual_ai",
                expose_as_tool=True,
                tool_description="Helps.",
                max_session_turns=1,
                side_a={"prompt": "work"},
                side_b={"prompt": "work"},
            ),
        ],
        prompts=[lead, work],
        models=[define_model(name="m", provider="test", model="x")],
    )
    provider = FunctionProvider(lambda request: "working")
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("lead")
        handle = thread_of(thread)  # the engine's half: the prompt and tool call it runs
        handle.prompt = lead
        handle.tool_call_id, handle.tool_attempt = "call_1", 1
        first = await thread.invoke_tool("helper", {"message": "t"})
        requests = len(provider.requests)
        handle.tool_attempt = 2  # the same call, run again after a restart cut it off
        again = await thread.invoke_tool("helper", {"message": "t"})
        await rt.wait_idle(timeout=60)
        await thread.refresh()
        children = thread.children
    assert first.subagent_id is not None
    assert (again.status, again.subagent_id, again.error) == (
        first.status,
        first.subagent_id,
        first.error,
    )
    assert [c.reference for c in children] == [first.subagent_id]
    assert len(provider.requests) == requests  # the child did not run again
