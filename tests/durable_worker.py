"""A runtime on a SQLite file that stops dead at a marked point, for the crash tests.

Run as ``python tests/durable_worker.py MODE DATABASE LEDGER``: it creates a thread of the
``lead`` agent, sends the message of MODE without waiting, and prints ``THREAD <id>``. When the
run reaches MODE's point it prints ``POINT`` and blocks forever, so that the test can kill the
process with SIGKILL exactly there (``ack`` kills itself right after the acknowledgement).
``again:MODE`` only starts a runtime on the database (resuming what it owes) and blocks at
MODE's point once more, to crash a restart too.

The test then reopens the database in-process with :func:`build_pack` and :func:`provider`
(nothing blocks there) and checks what the restart did. Every tool and effect run appends one
JSON line to the LEDGER file: ``{"kind", "call_id", "attempt", "pid"}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from sa_core import (
    Pack,
    Runtime,
    define_agent,
    define_effect,
    define_model,
    define_prompt,
    define_tool,
)
from sa_core.providers import ProviderRequest
from sa_core.testing import FunctionProvider
from sa_hooks import hookimpl

MESSAGES = {
    "ack": "hello",
    "tool": "use tool",
    "once": "use once",
    "after_tool": "use tool",
    "child": "ask child",
    "stream": "tell a story",
    "effect": "schedule effect",
    "handoff": "hand off",
    "notify": "send scout",
}
"""The message each mode sends; the same text drives the provider after the restart."""

STORY = "Once upon a time " * 8
_block: dict[str, str | None] = {"mode": None}
_ledger: dict[str, Path | None] = {"path": None}


def point() -> None:
    print("POINT", flush=True)


async def hang() -> None:
    point()
    await asyncio.Event().wait()


def record(kind: str, call_id: str | None, attempt: int | None) -> None:
    path = _ledger["path"]
    if path is None:
        return
    line = {"kind": kind, "call_id": call_id, "attempt": attempt, "pid": os.getpid()}
    with path.open("a") as handle:
        handle.write(json.dumps(line) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


class Note(BaseModel):
    note: str


class Summary(BaseModel):
    summary: str


async def run_record(state: Any, args: Note) -> str:
    record("record", state.tool_call_id, state.tool_attempt)
    if _block["mode"] == "tool":
        await hang()
    return f"recorded {args.note} (attempt {state.tool_attempt})"


async def run_once(state: Any, args: Note) -> str:
    record("once", state.tool_call_id, state.tool_attempt)
    if _block["mode"] == "once":
        await hang()
    return "done once"


async def run_schedule(state: Any, args: Note) -> str:
    effect_id = await state.schedule_effect("tick", {"note": args.note}, 0)
    return f"scheduled {effect_id}"


async def run_tick(state: Any, args: Any) -> None:
    record("tick", state.context["scheduled_effect"]["id"], state.effect_attempt)
    if _block["mode"] == "effect":
        await hang()


def build_pack() -> Pack:
    """The lead agent (tools, an effect, a blocking ``helper`` subagent) and its child."""
    model = define_model(name="m", provider="test", model="lead")
    worker_model = define_model(name="w", provider="test", model="worker")
    reviewer_model = define_model(name="r", provider="test", model="reviewer")
    tools = [
        define_tool(name="record", description="Record a note.", args=Note, execute=run_record),
        define_tool(
            name="once",
            description="Record a note; never repeated.",
            args=Note,
            execute=run_once,
            retry_on_resume=False,
        ),
        define_tool(name="schedule", description="Schedule.", args=Note, execute=run_schedule),
        define_tool(name="finish", description="Finish.", args=Summary, execute=lambda s, a: "ok"),
    ]
    lead = define_prompt(
        name="lead",
        model="m",
        prompt="You lead.",
        include_chat=True,
        tools=[
            "record",
            "once",
            "schedule",
            {"name": "helper", "blocking": True, "initUserMessageProperty": "task"},
            "desk",
            {"name": "scout", "blocking": False, "initUserMessageProperty": "task"},
        ],
    )
    desk_prompt = define_prompt(name="front", model="m", prompt="Desk.", include_chat=True)
    desk = define_agent(
        name="desk", expose_as_tool=True, tool_description="The desk.", side_a={"prompt": "front"}
    )
    work = define_prompt(name="work", model="w", prompt="Work.", include_chat=True)
    review = define_prompt(
        name="review", model="r", prompt="Review.", include_chat=True, tools=["finish"]
    )
    helper = define_agent(
        name="helper",
        type="dual_ai",
        expose_as_tool=True,
        tool_description="Helps.",
        side_a={"prompt": "work"},
        side_b={
            "prompt": "review",
            "stop_on_response": False,
            "session_stop": {"name": "finish", "message_property": "summary"},
        },
    )
    scout = helper.model_copy(update={"name": "scout", "tool_description": "Scouts."})
    agent = define_agent(name="lead", side_a={"prompt": "lead"})
    tick = define_effect(name="tick", description="Tick.", execute=run_tick)
    return Pack(
        name="durable",
        agents=[agent, helper, desk, scout],
        prompts=[lead, work, review, desk_prompt],
        models=[model, worker_model, reviewer_model],
        tools=tools,
        effects=[tick],
    )


async def answer(request: ProviderRequest) -> Any:
    """Deterministic answers from the conversation so far (the same in every process)."""
    last = request.messages[-1]
    if request.messages[0].content == "Desk.":
        return "desk here"
    if request.model == "worker":
        if _block["mode"] == "child":
            await hang()
        return f"work on {last.content}"
    if request.model == "reviewer":
        return {"tool_calls": [{"name": "finish", "arguments": {"summary": "all good"}}]}
    if last.role == "tool":
        if _block["mode"] == "after_tool":
            await hang()
        return f"done: {last.content}"
    text = last.content or ""
    if text == "use tool":
        return {"tool_calls": [{"name": "record", "arguments": {"note": "n1"}}]}
    if text == "use once":
        return {"tool_calls": [{"name": "once", "arguments": {"note": "n1"}}]}
    if text == "ask child":
        return {"tool_calls": [{"name": "helper", "arguments": {"task": "t1"}}]}
    if text == "schedule effect":
        return {"tool_calls": [{"name": "schedule", "arguments": {"note": "e1"}}]}
    if text == "send scout":
        return {"tool_calls": [{"name": "scout", "arguments": {"task": "s1"}}]}
    if text == "hand off":
        return {"tool_calls": [{"name": "desk", "arguments": {}}]}
    if text == "tell a story":
        return STORY
    return f"echo: {text}"


class Stalls:
    """Stalls right after a message is written: the handoff's tool result (``handoff``), or a
    child's note that it reported to its parent, inside the transaction that settles the
    child's flow (``notify``)."""

    @hookimpl
    async def sa_after_create_message(self, state: Any, message: Any) -> None:
        mode = _block["mode"]
        if mode == "handoff" and message.role == "tool" and message.name == "desk":
            await hang()
        kind = (message.metadata or {}).get("status_kind")
        if mode == "notify" and kind == "subagent_event":
            await hang()


def provider(mode: str | None = None) -> FunctionProvider:
    """The provider; ``stream`` mode streams slowly so a kill lands mid-stream."""
    if mode == "stream":
        return FunctionProvider(answer, chunk_size=8, chunk_delay=60.0)
    return FunctionProvider(answer)


def use_ledger(path: Path | None) -> None:
    _ledger["path"] = path


async def main(mode: str, database: str, ledger: str) -> None:
    again = mode.startswith("again:")  # restart on an existing database; block again
    mode = mode.removeprefix("again:")
    _block["mode"] = mode
    use_ledger(Path(ledger))
    runtime = Runtime(
        packs=[build_pack()],
        providers={"test": provider(mode)},
        database_url=f"sqlite:///{database}",
        load_entrypoints=False,
        plugins=[Stalls()],
    )
    await runtime.start()
    if again:
        print("THREAD resumed", flush=True)
        await asyncio.Event().wait()
    thread = await runtime.create_thread("lead")
    print(f"THREAD {thread.thread_id}", flush=True)
    if mode == "stream":
        async with runtime.events.subscribe(thread.thread_id) as frames:
            await thread.send_message(MESSAGES[mode], wait=False)
            while (await frames.get()).get("type") != "message_chunk":
                pass
            await hang()
    await thread.send_message(MESSAGES[mode], wait=False)
    if mode == "ack":
        print("ACK", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
