"""How many store transactions a turn and a delegation take, and that the fewer stay correct.

The turn path folds the claim, the thread row, the registry and the queue reads into the
transaction that acknowledges the message, and the queue read after a flow into the one that
settles it; a blocking subagent call records its result in one transaction. These tests count
the transactions (a structural property, never a timing) and check the behaviour the folded
reads stood for.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from echo_agent import echo_pack, echo_provider
from pydantic import BaseModel

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool
from sa_core.testing import FunctionProvider

LEASE_TAKES = {"sqlite": 0, "postgresql": 1}
"""Writes of their own when a thread first runs: on PostgreSQL a worker takes the thread's lease
before running it, and keeps it a while after its turn, so that the next turn takes none (it
gives it back later, in the background; :mod:`sa_core.engine.workers.leases`)."""


def count_transactions(runtime: Any) -> Counter[str]:
    """Count the store's write transactions and read transactions from now on."""
    backend = runtime.store._backend
    counts: Counter[str] = Counter()
    begin, write, read = backend.begin, backend.write, backend.read
    read_one, fetch = backend.read_one, backend.fetch
    statement = backend.write_statement
    inner = [False]  # a statement written alone goes through ``write`` on some backends

    async def counted_begin(owner: object) -> Any:
        counts["write"] += 1
        return await begin(owner)

    async def counted_write(op: Any) -> Any:
        counts["write"] += not inner[0]
        return await write(op)

    async def counted_statement(query: Any, params: Any) -> Any:
        counts["write"] += 1  # its own commit (autocommit on PostgreSQL)
        inner[0] = True
        try:
            return await statement(query, params)
        finally:
            inner[0] = False

    async def counted_read(op: Any) -> Any:
        counts["read"] += 1
        return await read(op)

    async def counted_read_one(op: Any) -> Any:
        counts["read"] += 1
        return await read_one(op)

    async def counted_fetch(query: Any, params: Any) -> Any:
        counts["read"] += 1
        return await fetch(query, params)

    backend.begin, backend.write, backend.read = counted_begin, counted_write, counted_read
    backend.read_one, backend.fetch = counted_read_one, counted_fetch
    backend.write_statement = counted_statement
    return counts


def doom_settling_commit(
    rt: Any, backend: str, monkeypatch: pytest.MonkeyPatch, settles: Any
) -> list[Any]:
    """Make the first commit that settles a flow inside a step (``settles(reason)``) fail.

    SQLite fails the ``COMMIT``; PostgreSQL commits the step with its last statement (the
    settlement's queue read goes with the writes), so that statement fails. Returns the list
    that holds the doomed transaction once it happened.
    """
    doomed: list[Any] = []
    list_queue = rt.store.list_queue

    async def failing_list_queue(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("last") and backend == "postgresql" and not doomed:
            doomed.append(kwargs["tx"])
            raise OSError("connection reset")
        return await list_queue(*args, **kwargs)

    settle_and_read_queue = rt.scheduler.settle_and_read_queue

    async def settle_then_doom(flow: Any, tx: Any, reason: Any = None) -> Any:
        queue = await settle_and_read_queue(flow, tx, reason)
        if settles(reason) and not doomed:
            doomed.append(tx)
            commit = type(tx).commit

            async def failing_commit(self: Any) -> None:
                if self is tx:
                    raise OSError("disk full")
                await commit(self)

            monkeypatch.setattr(type(tx), "commit", failing_commit)
        return queue

    monkeypatch.setattr(rt.store, "list_queue", failing_list_queue)
    monkeypatch.setattr(rt.scheduler, "settle_and_read_queue", settle_then_doom)
    return doomed


async def send_and_read_back(
    rt: Any, thread: Any, text: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, Any, Any]:
    """Send ``text``, wait until every turn settled, lift the patches, and read back the
    thread's messages, its execution record and its live handle."""
    await thread.send_message(text)
    await rt.wait_idle(timeout=60)
    monkeypatch.undo()
    page = await thread.get_messages()
    record = await rt.store.get_execution(thread.thread_id)
    live = await rt.get_thread(thread.thread_id)
    return page, record, live


@pytest.mark.asyncio
async def test_a_turn_commits_the_message_then_the_answer_with_the_settlement(
    sa_runtime_factory: Any, backend: str
) -> None:
    async with sa_runtime_factory(packs=[echo_pack()], providers={"test": echo_provider()}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("warm up")  # the first turn reads the approvals once
        counts = count_transactions(rt)
        await thread.send_message("hi")
        await rt.wait_idle(timeout=60)
        writes = counts["write"]
        page = await thread.get_messages()
        record = await rt.store.get_execution(thread.thread_id)
        owner = await rt.store.lease_owner(thread.thread_id)
        worker = rt.workers.worker_id if rt.workers is not None else None
    assert [m.content for m in page.messages][-2:] == ["hi", "echo: hi"]
    # acknowledge (message + owed turn + claim), then the answer's step, which settles the
    # flow in its own commit; on PostgreSQL the lease taken by the first turn is still this
    # worker's: no write to take it again
    assert writes == 2
    assert record is not None and record.status == "idle" and record.claimed_by is None
    assert owner == worker


@pytest.mark.asyncio
async def test_an_answer_whose_commit_fails_is_recorded_as_a_step_error_and_settled(
    sa_runtime_factory: Any, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The settlement that went with the answer rolls back with it: the runner settles.

    SQLite fails the ``COMMIT``; PostgreSQL commits the step with its last statement (the
    settlement's queue read goes with the writes), so that statement fails.
    """
    async with sa_runtime_factory(packs=[echo_pack()], providers={"test": echo_provider()}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("warm up")
        # the answering step's own transaction
        doomed = doom_settling_commit(rt, backend, monkeypatch, lambda reason: reason is not None)
        page, record, live = await send_and_read_back(rt, thread, "hi", monkeypatch)
    assert doomed, "the answer's step did not settle the flow in its commit"
    # the answer rolled back; the call is left as a failed row (as any failed model call)
    assert [(m.content, m.status) for m in page.messages] == [
        ("warm up", None),
        ("echo: warm up", "completed"),
        ("hi", None),
        (None, "failed"),
    ]
    assert record is not None and record.status == "idle" and record.claimed_by is None
    assert record.stop_reason == "step_error"
    assert live.row.execution["turns"]["a"] == 1  # the failed answer completed no turn


@pytest.mark.asyncio
async def test_a_message_a_hook_sends_on_the_answer_is_answered_too(
    sa_runtime_factory: Any,
) -> None:
    """The answer's step settles the flow in its commit unless work was queued meanwhile."""
    from sa_core import define_hook

    async def follow_up(state: Any, message: Any) -> None:
        if message.role == "assistant" and message.content == "echo: hi":
            await state.send_message("and then?", wait=False)  # queued: its turn is running

    pack = Pack(
        name="echo",
        agents=[define_agent(name="helper", side_a={"prompt": "main"}, hooks=["follow"])],
        prompts=[define_prompt(name="main", model="m", prompt="Echo.", include_chat=True)],
        models=[define_model(name="m", provider="test", model="x")],
        hooks=[define_hook(id="follow", hook="after_create_message", execute=follow_up)],
    )
    async with sa_runtime_factory(packs=[pack], providers={"test": echo_provider()}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("hi")
        await rt.wait_idle(timeout=60)
        page = await thread.get_messages()
        queue = await rt.store.list_queue(thread.thread_id)
        record = await rt.store.get_execution(thread.thread_id)
    assert [m.content for m in page.messages] == ["hi", "echo: hi", "and then?", "echo: and then?"]
    assert queue == []
    assert record is not None and record.status == "idle"


@pytest.mark.asyncio
async def test_a_message_queued_before_the_first_step_is_still_drained(
    sa_runtime_factory: Any,
) -> None:
    provider = echo_provider()
    async with sa_runtime_factory(packs=[echo_pack()], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.send_message("first", wait=False)  # the turn read the queue empty
        await thread.queue_message({"content": "second"})  # before the runner's first step
        await rt.wait_idle(timeout=60)
        page = await thread.get_messages()
    contents = [m.content for m in page.messages]
    assert "second" in contents
    assert contents[-1] == "echo: second"


@pytest.mark.asyncio
async def test_queueing_on_an_idle_thread_runs_it_once_with_the_claim_released(
    sa_runtime_factory: Any,
) -> None:
    provider = echo_provider()
    async with sa_runtime_factory(packs=[echo_pack()], providers={"test": provider}) as rt:
        thread = await rt.create_thread("helper")
        await thread.queue_message({"content": "queued"})
        await rt.wait_idle(timeout=60)
        page = await thread.get_messages()
        record = await rt.store.get_execution(thread.thread_id)
        queue = await rt.store.list_queue(thread.thread_id)
    assert [m.content for m in page.messages] == ["queued", "echo: queued"]
    assert len(provider.requests) == 1
    assert queue == []
    assert record is not None and record.status == "idle" and record.claimed_by is None


def delegation_pack() -> Pack:
    class Task(BaseModel):
        task: str

    class Summary(BaseModel):
        summary: str

    approve = define_tool(
        name="approve", description="Approve.", args=Summary, execute=lambda state, args: "ok"
    )
    coordinator = define_prompt(
        name="coordinator",
        model="lead_model",
        prompt="Coordinate.",
        include_chat=True,
        tools=[{"name": "researcher", "blocking": True, "initUserMessageProperty": "task"}],
    )
    worker = define_prompt(
        name="worker",
        model="worker_model",
        prompt="Research.",
        include_chat=True,
        required_schema=Task,
    )
    reviewer = define_prompt(
        name="reviewer",
        model="reviewer_model",
        prompt="Review.",
        include_chat=True,
        tools=["approve"],
    )
    researcher = define_agent(
        name="researcher",
        type="dual_ai",
        expose_as_tool=True,
        tool_description="Researches a topic.",
        max_session_turns=5,
        side_a={"prompt": "worker"},
        side_b={
            "prompt": "reviewer",
            "stop_on_response": False,
            "session_stop": {"name": "approve", "message_property": "summary"},
        },
    )
    models = [
        define_model(name=f"{role}_model", provider="test", model=role)
        for role in ("lead", "worker", "reviewer")
    ]
    return Pack(
        name="deleg",
        agents=[define_agent(name="lead", side_a={"prompt": "coordinator"}), researcher],
        prompts=[coordinator, worker, reviewer],
        models=models,
        tools=[approve],
    )


def delegation_provider() -> FunctionProvider:
    call = {"tool_calls": [{"name": "researcher", "arguments": {"task": "find 42"}}]}
    verdict = {"tool_calls": [{"name": "approve", "arguments": {"summary": "Findings: 42"}}]}

    def answer(request: Any) -> Any:
        if request.model == "lead":
            return "Summarized" if request.messages[-1].role == "tool" else call
        if request.model == "worker":
            return "Here is what I found"
        return verdict

    return FunctionProvider(answer)


@pytest.mark.asyncio
async def test_a_blocking_delegation_commits_each_point_once_and_answers_the_call(
    sa_runtime_factory: Any, backend: str
) -> None:
    provider = delegation_provider()
    async with sa_runtime_factory(packs=[delegation_pack()], providers={"test": provider}) as rt:
        warm = await rt.create_thread("lead")
        await warm.send_message("warm up")
        parent = await rt.create_thread("lead")
        counts = count_transactions(rt)
        await parent.send_message("research please")  # returns once the turn has ended
        writes, reads = counts["write"], counts["read"]
        await rt.wait_idle(timeout=60)
        page = await parent.get_messages()
        children = await rt.store.list_children(parent.thread_id)
        child = await rt.store.get_thread(children[0].reference)
        child_record = await rt.store.get_execution(children[0].reference)
    contents = [m.content or "" for m in page.messages]
    assert contents[-1] == "Summarized"
    assert contents[2].startswith("Findings: 42")
    # a non-resumable child terminates in the write that settles it (seed 003): no more writes
    assert [c.status for c in children] == ["terminated"]
    assert child is not None and child.terminated is not None and child.stopped
    assert child.execution.get("answered")  # the call got the result
    assert "waiter" not in child.execution
    assert child_record is not None and child_record.status == "idle"
    # SQLite: parent: acknowledge, step (call), child created with its first message and owed
    # turn, tool result, step (answer) settling the flow; child: two steps, then the session
    # stop's tool result with the settle that also answers the waiting call (no drain, no
    # separate result transaction).
    # Workers on PostgreSQL keep the queued first message (a drain) and a separate result
    # transaction, and each of the two threads takes its lease (and keeps it a while).
    expected = {"sqlite": 8, "postgresql": 10 + 2 * LEASE_TAKES["postgresql"]}
    assert writes == expected[backend]
    # SQLite reads nothing: every row a step needs was written or read in this process, and
    # the child's history is known from the transaction that created it (an empty thread and
    # its first message). Workers on PostgreSQL read each thread when they take its lease.
    assert reads == {"sqlite": 0, "postgresql": 4}[backend]
    assert child.execution["answered"] == page.messages[1].tool_calls[0].id


@pytest.mark.asyncio
async def test_a_new_threads_first_message_finds_its_execution_record(
    sa_runtime_factory: Any, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The record is written with the thread. Without it, the first message's update of the
    # record changes no row: on PostgreSQL the server undoes the whole acknowledgement (an
    # ERROR in its log) and it is sent again inside a transaction, with an INSERT.
    from sa_core.store import fast
    from sa_core.store.executions import ExecutionRecord

    missed: list[int] = []
    batch = fast.run_batch_async

    async def counted_batch(*args: Any, **kwargs: Any) -> Any:
        try:
            return await batch(*args, **kwargs)
        except fast.GuardFailed:
            missed.append(1)
            raise

    monkeypatch.setattr(fast, "run_batch_async", counted_batch)
    async with sa_runtime_factory(packs=[echo_pack()], providers={"test": echo_provider()}) as rt:
        thread = await rt.create_thread("helper")
        assert await rt.store.get_execution(thread.thread_id) == ExecutionRecord(status="idle")
        await thread.send_message("hi")
        await rt.wait_idle(timeout=60)
        page = await thread.get_messages()
    assert [m.content for m in page.messages] == ["hi", "echo: hi"]
    assert missed == []


@pytest.mark.asyncio
async def test_a_session_stop_whose_row_and_settlement_fail_to_commit_is_a_step_error(
    sa_runtime_factory: Any, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session stop's tool row commits with the flow's settlement, or neither does.

    When that commit fails, the runner records a step error and settles the flow as after
    any failed step: the call gets an error row, and no session outcome is recorded.
    """
    provider = delegation_provider()
    async with sa_runtime_factory(packs=[delegation_pack()], providers={"test": provider}) as rt:
        thread = await rt.create_thread("researcher", package="deleg")
        # the session stop's tool row transaction
        doomed = doom_settling_commit(
            rt, backend, monkeypatch, lambda reason: reason == "session_stop"
        )
        page, record, live = await send_and_read_back(rt, thread, "find 42", monkeypatch)
    assert doomed, "the session stop's row did not settle the flow in its commit"
    # the approving row rolled back with the settlement; the call is answered as any call
    # of a failed step is
    tools = [(m.name, m.tool_status) for m in page.messages if m.role == "tool"]
    assert tools == [("approve", "error")]
    assert (page.messages[-1].content or "").startswith("Failed to execute tool")
    assert record is not None and record.status == "idle" and record.claimed_by is None
    assert record.stop_reason == "step_error"
    assert live.row.execution["last_stop_reason"] == "step_error"
    assert "last_outcome" not in live.row.execution
