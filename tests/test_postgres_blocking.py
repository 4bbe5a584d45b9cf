"""A blocking subagent call waits for its child wherever the child runs (several workers).

Two runtimes (workers) in this process share one PostgreSQL database, with a 1 s lease. The
parent thread runs on the first worker; the first worker's claim of any other thread (the
child) waits until the second worker holds that thread's lease, so the child's first turn is
deterministically taken by the second worker, as when it wins the race for the lease.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from pydantic import BaseModel

from sa_core import Pack, Runtime, define_agent, define_model, define_prompt, define_tool
from sa_core.providers import ProviderRequest
from sa_core.testing import FunctionProvider

pytestmark = pytest.mark.asyncio

CEILING = 60.0
"""Seconds any wait below may take at most (they end on events, long before)."""


class Finish(BaseModel):
    summary: str


class ChildGate:
    """The child's model waits on ``open`` once ``asked`` is set."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.open.set()
        self.asked = asyncio.Event()


GATE = ChildGate()


def _parent(request: ProviderRequest) -> Any:
    last = request.messages[-1]
    if last.role == "tool":
        return f"parent got: {last.content}"
    return {
        "tool_calls": [
            {"id": "call-block-1", "name": "worker", "arguments": {"task": last.content}}
        ]
    }


async def _child(request: ProviderRequest) -> Any:
    GATE.asked.set()
    await GATE.open.wait()
    task = next(m.content for m in request.messages if m.role == "user")
    return {"tool_calls": [{"name": "finish", "arguments": {"summary": f"child did {task}"}}]}


def _brain(request: ProviderRequest) -> Any:
    return _child(request) if request.model == "child-model" else _parent(request)


def _pack() -> Pack:
    return Pack(
        name="blocking",
        agents=[
            define_agent(name="boss", side_a={"prompt": "boss_main"}),
            define_agent(
                name="worker",
                type="dual_ai",
                side_a={
                    "prompt": "child_main",
                    "session_stop": {"name": "finish", "message_property": "summary"},
                },
                side_b={"prompt": "child_b"},
                max_session_turns=3,
                expose_as_tool=True,
                tool_description="Does the task and reports.",
            ),
        ],
        prompts=[
            define_prompt(
                name="boss_main",
                model="parent",
                prompt="Delegate.",
                include_chat=True,
                tools=[{"name": "worker", "blocking": True, "init_user_message_property": "task"}],
            ),
            define_prompt(name="child_main", model="child", prompt="Work.", tools=["finish"]),
            define_prompt(name="child_b", model="child", prompt="Review."),
        ],
        models=[
            define_model(name="parent", provider="test", model="parent-model"),
            define_model(name="child", provider="test", model="child-model"),
        ],
        tools=[
            define_tool(
                name="finish", description="Report.", args=Finish, execute=lambda s, a: a.summary
            )
        ],
    )


@pytest.fixture(autouse=True)
def short_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    global GATE
    GATE = ChildGate()
    monkeypatch.setenv("SA_LEASE_SECONDS", "1")


async def _worker(url: str) -> tuple[Runtime, FunctionProvider]:
    provider = FunctionProvider(_brain)
    runtime = Runtime(
        packs=[_pack()], providers={"test": provider}, database_url=url, load_entrypoints=False
    )
    await runtime.start()
    return runtime, provider


async def until(predicate: Callable[[], Awaitable[bool]], what: str) -> None:
    try:
        async with asyncio.timeout(CEILING):
            while not await predicate():
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"waited {CEILING}s for {what}") from None


def lose_child_leases_to(first: Runtime, second: Runtime, parent_id: str) -> None:
    """Make ``first`` lose every race for a child's lease to ``second``.

    ``first``'s claim of any thread but the parent waits until ``second`` holds that thread's
    lease, then asks for it (and is refused, as a worker that lost the race is).
    """
    assert first.workers is not None and second.workers is not None
    workers, other = first.workers, second.workers
    claim = workers.claim

    async def late_claim(thread_id: str) -> bool:
        if thread_id != parent_id:
            async with asyncio.timeout(CEILING):
                while thread_id not in other.held:
                    await asyncio.sleep(0.01)
        return await claim(thread_id)

    workers.claim = late_claim  # type: ignore[method-assign]


def child_requests(provider: FunctionProvider) -> int:
    return sum(1 for r in provider.requests if r.model == "child-model")


async def messages_of(runtime: Runtime, thread_id: str) -> list[Any]:
    messages, _total = await runtime.store.list_messages(thread_id, limit=200)
    return list(messages)


async def test_a_blocking_call_gets_a_child_run_by_another_worker_once_as_its_tool_result(
    pg_database_url: str,
) -> None:
    first, first_model = await _worker(pg_database_url)
    second, second_model = await _worker(pg_database_url)
    try:
        parent = await first.create_thread("boss", package="blocking")
        lose_child_leases_to(first, second, parent.thread_id)
        async with asyncio.timeout(CEILING):
            await parent.send_message("count the stars", wait=False)
            await first.scheduler.wait(parent.thread_id)  # the parent's turn, with its wait
        [child_entry] = await first.store.list_children(parent.thread_id)
        child_id = child_entry.reference
        async with asyncio.timeout(CEILING):  # the child's runner settles on the second worker
            await second.scheduler.wait(child_id)
            await first.wait_idle()
            await second.wait_idle()

        assert child_requests(first_model) == 0  # the child never ran on the first worker
        assert child_requests(second_model) >= 1
        messages = await messages_of(first, parent.thread_id)
        tool_rows = [m for m in messages if m.role == "tool"]
        expected = f"child did count the stars\n\nReference: {child_id}"
        assert [(m.tool_call_id, m.tool_status, m.content) for m in tool_rows] == [
            ("call-block-1", "success", expected)
        ]
        notifications = [m for m in messages if (m.metadata or {}).get("subagent_event")]
        assert notifications == []
        assert await first.store.list_queue(parent.thread_id) == []
        assert messages[-1].role == "assistant"
        assert messages[-1].content == f"parent got: {expected}"
        child_row = await first.store.get_thread(child_id)
        assert child_row is not None
        assert child_row.execution.get("answered") == "call-block-1"
        assert "waiter" not in child_row.execution
        [entry] = await first.store.list_children(parent.thread_id)
        assert entry.status == "terminated"  # non-resumable: its session ended, so did it
    finally:
        await first.close()
        await second.close()


async def test_a_blocking_call_cut_off_with_its_worker_gets_the_result_once_where_it_resumes(
    pg_database_url: str,
) -> None:
    first, _ = await _worker(pg_database_url)
    second, _ = await _worker(pg_database_url)
    closed_first = False
    try:
        parent = await first.create_thread("boss", package="blocking")
        lose_child_leases_to(first, second, parent.thread_id)
        GATE.open.clear()  # the child works until the parent's worker is gone
        await parent.send_message("map the coast", wait=False)
        async with asyncio.timeout(CEILING):
            await GATE.asked.wait()  # the child's first turn runs on the second worker
        assert first.scheduler.is_running(parent.thread_id)  # the call waits on the first
        await first.close()  # the parent's worker goes away mid-wait
        closed_first = True
        GATE.open.set()

        async def answered() -> bool:
            messages = await messages_of(second, parent.thread_id)
            return bool(messages) and (messages[-1].content or "").startswith("parent got:")

        await until(answered, "the parent to be resumed and answered on the second worker")
        async with asyncio.timeout(CEILING):
            await second.wait_idle()
        [child_entry] = await second.store.list_children(parent.thread_id)
        child_id = child_entry.reference
        messages = await messages_of(second, parent.thread_id)
        expected = f"child did map the coast\n\nReference: {child_id}"
        tool_rows = [m for m in messages if m.role == "tool"]
        assert [(m.tool_call_id, m.tool_status, m.content) for m in tool_rows] == [
            ("call-block-1", "success", expected)
        ]
        assert [m for m in messages if (m.metadata or {}).get("subagent_event")] == []
        assert await second.store.list_queue(parent.thread_id) == []
        assert len(await second.store.list_children(parent.thread_id)) == 1  # one child
    finally:
        if not closed_first:
            await first.close()
        await second.close()
