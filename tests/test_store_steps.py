"""A pack store used by tools in agent runs: shared across threads, written with the step."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from echo_agent import echo_pack
from prefs_pack import prefs_pack

from sa_core import Runtime, define_prompt, define_tool
from sa_core.memory import PackStore
from sa_core.store import open_store
from sa_core.testing import FunctionProvider

pytestmark = pytest.mark.asyncio


async def turn(runtime: Runtime, thread_id: str, text: str) -> list[Any]:
    thread = await runtime.get_thread(thread_id)
    await thread.send_message(text)
    return list((await thread.get_messages()).messages)


async def test_a_preference_a_tool_writes_in_one_thread_is_read_in_another(
    sa_database_url: str,
) -> None:
    async with Runtime(
        packs=[prefs_pack()], database_url=sa_database_url, load_entrypoints=False, offline=True
    ) as runtime:
        first = await runtime.create_thread("assistant")
        args = {"user": "ada", "name": "tone", "value": "brief answers, no small talk"}
        said = await turn(runtime, first.thread_id, f"/tool remember_preference {json.dumps(args)}")
        assert said[2].content == "Noted: tone = brief answers, no small talk"
        args = {"user": "ada", "name": "drink", "value": "green tea"}
        await turn(runtime, first.thread_id, f"/tool remember_preference {json.dumps(args)}")

        second = await runtime.create_thread("assistant")
        recall = {"user": "ada", "query": "short answers"}
        messages = await turn(
            runtime, second.thread_id, f"/tool recall_preferences {json.dumps(recall)}"
        )
        found = json.loads(messages[2].content)
        assert list(found) == ["tone", "drink"]  # nearest in meaning first
        assert found["tone"] == "brief answers, no small talk"
        stranger = await turn(
            runtime, second.thread_id, '/tool recall_preferences {"user": "bob"}'
        )
        assert json.loads(stranger[-2].content) == {}


def writer_pack(gate: asyncio.Event, started: asyncio.Event) -> Any:
    """Echo pack whose ``note`` tool puts, reads its own write, waits on ``gate``, may fail."""

    async def note(state: Any, args: dict[str, Any]) -> str:
        await state.store.put(("notes",), args["key"], {"text": args["text"]})
        await state.store.delete(("notes",), "old")
        mine = await state.store.get(("notes",), args["key"])
        assert mine is not None and mine.value == {"text": args["text"]}
        assert await state.store.get(("notes",), "old") is None
        started.set()
        await gate.wait()
        if args.get("fail"):
            raise RuntimeError("the tool failed after writing")
        return "noted"

    pack = echo_pack()
    pack.tools = [define_tool(name="note", args={"type": "object"}, execute=note)]
    pack.prompts = [
        define_prompt(name="main", model="m", prompt="Echo.", include_chat=True, tools=["note"])
    ]
    return pack


def calls_note(arguments: dict[str, Any]) -> FunctionProvider:
    def answer(request: Any) -> Any:
        if request.messages[-1].role == "tool":
            return "done"
        return {"tool_calls": [{"name": "note", "arguments": arguments}]}

    return FunctionProvider(answer)


@pytest.mark.parametrize("fail", [False, True])
async def test_a_tools_writes_commit_with_its_result_and_a_failed_tools_never(
    sa_database_url: str, fail: bool
) -> None:
    gate, started = asyncio.Event(), asyncio.Event()
    provider = calls_note({"key": "k", "text": "written in a step", "fail": fail})
    async with Runtime(
        packs=[writer_pack(gate, started)],
        providers={"test": provider},
        database_url=sa_database_url,
        load_entrypoints=False,
    ) as runtime:
        store = runtime.pack_store("echo")
        await store.put(("notes",), "old", {"text": "before the step"})
        thread = await runtime.create_thread("helper")
        sending = asyncio.create_task(thread.send_message("note it"))
        await started.wait()
        # mid-step: nothing the tool wrote is committed, and what it deleted is still there
        assert await store.get(("notes",), "k") is None
        assert await store.get(("notes",), "old") is not None
        gate.set()
        await sending
        rows = [m for m in (await thread.get_messages()).messages if m.role == "tool"]
        assert rows[0].tool_status == ("error" if fail else "success")
        item = await store.get(("notes",), "k")
        if fail:
            assert item is None and await store.get(("notes",), "old") is not None
        else:
            assert item is not None and item.value == {"text": "written in a step"}
            assert await store.get(("notes",), "old") is None


async def test_a_crash_mid_step_leaves_none_of_its_store_writes(tmp_path: Path) -> None:
    import store_crash_worker as worker

    database = f"sqlite:///{tmp_path / 'sa.db'}"
    script = Path(__file__).with_name("store_crash_worker.py")
    process = subprocess.Popen(
        [sys.executable, str(script), database], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        thread_id = process.stdout.readline().split()[1]
        assert process.stdout.readline().strip() == "POINT"  # the tool has put its item
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
        if process.stdout is not None:
            process.stdout.close()
    store = await open_store(database)
    try:
        assert await PackStore(store, "echo").get(("notes",), "k") is None
    finally:
        await store.close()

    async with Runtime(  # the restart runs the interrupted call again; its write commits
        packs=[worker.build_pack(block=False)],
        providers={"test": worker.provider()},
        database_url=database,
        load_entrypoints=False,
    ) as runtime:
        await runtime.wait_idle(30)
        item = await runtime.pack_store("echo").get(("notes",), "k")
        assert item is not None and item.value == {"attempt": 2}
        thread = await runtime.get_thread(thread_id)
        rows = [m.content for m in (await thread.get_messages()).messages if m.role == "tool"]
        assert rows == ["noted on attempt 2"]
