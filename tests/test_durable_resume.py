"""Crash recovery: a process killed with SIGKILL at a precise point, then reopened in-process.

Each test runs ``tests/durable_worker.py`` on a SQLite file, waits until the worker reports
that it reached the marked point (a tool running, a model call streaming, a parent waiting on
its child, an effect running, or just after a message was acknowledged), kills it with
SIGKILL, and opens a new Runtime on the same database. The restart must continue from the last
committed point: nothing acknowledged is lost, no stored model response is requested again,
no completed tool runs again, and an interrupted tool or effect runs again at most once.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from worker_kill import kill_at_marker

from sa_core import Runtime

WORKER = Path(__file__).with_name("durable_worker.py")


def _load_worker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("durable_worker", WORKER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


worker = _load_worker()


def kill_at_point(mode: str, tmp_path: Path) -> tuple[Path, Path, str]:
    """Run the worker in ``mode`` until its point, SIGKILL it; returns (db, ledger, thread)."""
    database, ledger = tmp_path / "sa.db", tmp_path / "ledger.jsonl"
    args = (mode, str(database), str(ledger))
    return database, ledger, kill_at_marker(WORKER, *args, markers=("POINT", "ACK"))


def kill_twice(mode: str, tmp_path: Path) -> tuple[Path, Path, str]:
    """Kill at ``mode``'s point, restart, and kill the restart at the same point again."""
    database, ledger, thread_id = kill_at_point(mode, tmp_path)
    kill_at_point(f"again:{mode}", tmp_path)
    return database, ledger, thread_id


def ledger_lines(ledger: Path) -> list[dict[str, Any]]:
    if not ledger.exists():
        return []
    return [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]


def reopen(database: Path, ledger: Path) -> tuple[Runtime, Any]:
    worker.use_ledger(ledger)
    provider = worker.provider()
    runtime = Runtime(
        packs=[worker.build_pack()],
        providers={"test": provider},
        database_url=f"sqlite:///{database}",
        load_entrypoints=False,
    )
    return runtime, provider


async def settled_messages(runtime: Runtime, thread_id: str) -> list[Any]:
    await runtime.wait_idle(timeout=30)
    thread = await runtime.get_thread(thread_id)
    page = await thread.get_messages(limit=1000, include_silent=True)
    return page.messages


@pytest.fixture(autouse=True)
def _no_ledger():
    yield
    worker.use_ledger(None)


@pytest.mark.asyncio
async def test_message_acknowledged_right_before_a_kill_is_answered_after_restart(tmp_path):
    database, ledger, thread_id = kill_at_point("ack", tmp_path)
    runtime, provider = reopen(database, ledger)
    async with runtime:
        messages = await settled_messages(runtime, thread_id)
    assert [(m.role, m.content) for m in messages] == [
        ("user", "hello"),
        ("assistant", "echo: hello"),
    ]
    assert len(provider.requests) == 1


@pytest.mark.asyncio
async def test_tool_running_at_the_kill_runs_again_once_with_its_attempt_and_call_id(tmp_path):
    database, ledger, thread_id = kill_at_point("tool", tmp_path)
    runtime, provider = reopen(database, ledger)
    async with runtime:
        messages = await settled_messages(runtime, thread_id)
    runs = ledger_lines(ledger)
    call_id = messages[1].tool_calls[0].id
    assert [(r["kind"], r["call_id"], r["attempt"]) for r in runs] == [
        ("record", call_id, 1),
        ("record", call_id, 2),
    ]
    assert runs[0]["pid"] != runs[1]["pid"]
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[2].tool_call_id == call_id and messages[2].content == "recorded n1 (attempt 2)"
    assert messages[3].content == "done: recorded n1 (attempt 2)"
    # the stored model response with the tool call was not requested again
    assert [r.messages[-1].role for r in provider.requests] == ["tool"]


@pytest.mark.asyncio
async def test_tool_with_retry_on_resume_false_gets_the_interrupted_result(tmp_path):
    database, ledger, thread_id = kill_at_point("once", tmp_path)
    runtime, provider = reopen(database, ledger)
    async with runtime:
        messages = await settled_messages(runtime, thread_id)
    assert [r["attempt"] for r in ledger_lines(ledger)] == [1]
    tool_row = messages[2]
    assert tool_row.role == "tool" and tool_row.tool_status == "error"
    assert tool_row.content == (
        "Failed to execute tool: Interrupted by a restart before it finished."
    )
    assert messages[-1].role == "assistant" and messages[-1].content.startswith("done: ")


@pytest.mark.asyncio
async def test_kill_after_a_tool_result_is_stored_never_runs_the_tool_again(tmp_path):
    database, ledger, thread_id = kill_at_point("after_tool", tmp_path)
    runtime, provider = reopen(database, ledger)
    async with runtime:
        messages = await settled_messages(runtime, thread_id)
    assert [r["attempt"] for r in ledger_lines(ledger)] == [1]
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert len({m.tool_call_id for m in messages if m.role == "tool"}) == 1
    assert messages[-1].content == "done: recorded n1 (attempt 1)"
    assert len(provider.requests) == 1


@pytest.mark.asyncio
async def test_parent_blocked_on_a_child_reattaches_to_that_child_after_a_kill(tmp_path):
    database, ledger, thread_id = kill_at_point("child", tmp_path)
    runtime, provider = reopen(database, ledger)
    async with runtime:
        messages = await settled_messages(runtime, thread_id)
        parent = await runtime.get_thread(thread_id)
        children = parent.children
        child = await runtime.get_thread(children[0].reference)
        child_messages = (await child.get_messages(limit=1000, include_silent=True)).messages
    assert len(children) == 1
    calls = [m for m in messages if m.role == "assistant" and m.tool_calls]
    tool_rows = [m for m in messages if m.role == "tool"]
    assert len(calls) == 1 and len(tool_rows) == 1
    assert tool_rows[0].tool_call_id == calls[0].tool_calls[0].id
    assert tool_rows[0].tool_status == "success"
    assert tool_rows[0].content == f"all good\n\nReference: {child.thread_id}"
    # the result arrived as the call's result only, never also as a notification
    assert not [m for m in messages if (m.metadata or {}).get("subagent_event")]
    assert messages[-1].content == f"done: all good\n\nReference: {child.thread_id}"
    # the child's interrupted model call (unwatched: no row yet) was made again, once
    assert len([m for m in child_messages if m.content == "t1"]) == 1
    assert [m.content for m in child_messages if m.role == "assistant"] == ["work on t1"]
    assert not [m for m in child_messages if m.status in ("pending", "failed")]


@pytest.mark.asyncio
async def test_model_call_streaming_at_the_kill_is_redone_and_leaves_no_partial_row(tmp_path):
    database, ledger, thread_id = kill_at_point("stream", tmp_path)
    runtime, provider = reopen(database, ledger)
    async with runtime:
        messages = await settled_messages(runtime, thread_id)
    # the watched call streamed (a pending frame, then chunks) but never stored a pending row
    assert [(m.role, m.status, m.content) for m in messages] == [
        ("user", None, "tell a story"),
        ("assistant", "completed", worker.STORY),
    ]
    assert [m.role for m in provider.requests[0].messages] == ["system", "user"]


@pytest.mark.asyncio
async def test_effect_running_at_the_kill_runs_again_once_with_attempt_two(tmp_path):
    database, ledger, thread_id = kill_at_point("effect", tmp_path)
    runtime, provider = reopen(database, ledger)
    async with runtime:
        messages = await settled_messages(runtime, thread_id)
        deadline = time.monotonic() + 60
        while len(ledger_lines(ledger)) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await runtime.wait_idle(timeout=60)
        pending = await (await runtime.get_thread(thread_id)).get_scheduled_effects()
    runs = ledger_lines(ledger)
    assert [(r["kind"], r["attempt"]) for r in runs] == [("tick", 1), ("tick", 2)]
    assert runs[0]["call_id"] == runs[1]["call_id"]
    assert pending == []
    assert len([m for m in messages if m.role == "tool"]) == 1


@pytest.mark.asyncio
async def test_tool_interrupted_by_two_restarts_never_runs_a_third_time(tmp_path):
    database, ledger, thread_id = kill_twice("tool", tmp_path)
    runtime, provider = reopen(database, ledger)
    async with runtime:
        messages = await settled_messages(runtime, thread_id)
    assert [r["attempt"] for r in ledger_lines(ledger)] == [1, 2]
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[2].tool_status == "error"
    assert messages[2].content == (
        "Failed to execute tool: Interrupted by a restart before it finished."
    )


@pytest.mark.asyncio
async def test_effect_interrupted_by_two_restarts_is_failed_not_run_a_third_time(tmp_path):
    database, ledger, thread_id = kill_twice("effect", tmp_path)
    runtime, provider = reopen(database, ledger)
    async with runtime:
        await runtime.wait_idle(timeout=30)
        effects = await runtime.store.list_effects(thread_id)
    assert [r["attempt"] for r in ledger_lines(ledger)] == [1, 2]
    assert effects == []  # not pending any more
    with closing(sqlite3.connect(database)) as db:
        rows = db.execute("SELECT status, error, attempts FROM effects").fetchall()
    assert rows == [("failed", "Interrupted by a restart before it finished.", 2)]


@pytest.mark.asyncio
async def test_handoff_whose_result_was_stored_before_the_kill_is_performed_after_restart(
    tmp_path,
):
    database, ledger, thread_id = kill_at_point("handoff", tmp_path)
    runtime, provider = reopen(database, ledger)
    async with runtime:
        messages = await settled_messages(runtime, thread_id)
        thread = await runtime.get_thread(thread_id)
    assert thread.agent_id == "desk"
    assert [(m.role, m.content) for m in messages] == [
        ("user", "hand off"),
        ("assistant", None),
        ("tool", "Handoff complete"),
        ("assistant", "desk here"),
    ]
    assert len(provider.requests) == 1


@pytest.mark.asyncio
async def test_child_killed_while_reporting_to_its_parent_reports_exactly_once(tmp_path):
    database, ledger, thread_id = kill_at_point("notify", tmp_path)
    runtime, provider = reopen(database, ledger)
    async with runtime:
        messages = await settled_messages(runtime, thread_id)
        parent = await runtime.get_thread(thread_id)
        (entry,) = parent.children
        child = await runtime.get_thread(entry.reference)
        child_messages = (await child.get_messages(limit=1000, include_silent=True)).messages
    reports = [m for m in messages if (m.metadata or {}).get("subagent_event") == "result"]
    assert len(reports) == 1 and reports[0].subagent_id == child.thread_id
    assert "all good" in (reports[0].content or "")
    forwarded = [m for m in child_messages if (m.metadata or {}).get("status_kind")]
    assert len(forwarded) == 1
    assert entry.status == "terminated"  # non-resumable: terminated with its report
