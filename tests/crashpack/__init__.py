"""The crash-test pack: a parent agent, a blocking and a non-blocking subagent, queued notes,
effects, and tools that record every execution in a ledger (see :mod:`crashpack.ledger`).

The model is :mod:`crashpack.brain`, a deterministic provider plugin (``crashbrain``) that
decides from the conversation alone, so a restarted server answers the same conversation the
same way. A client message ``job <id> <kind>`` makes the parent:

* ``tool``: call ``record`` twice, one step each, then answer ``done <id>``;
* ``block``: call the blocking subagent ``worker`` (it calls ``record`` and finishes);
* ``bg``: call the non-blocking subagent ``scout`` (likewise, in the background);
* ``note``: call ``note``, which queues the message ``note <id>`` on its own thread;
* ``effect``: call ``remind``, which schedules the effect ``ledger_effect``;

and answer ``done <id>`` once the tool result is back. Tool call ids are ``c-<id>-<step>``.

``note`` and ``remind`` are idempotent the way the engine's guarantees ask tool authors to be:
keyed by the tool call id, a second execution does not queue or schedule again (it checks its
ledger, and on a rerun also the thread's queue and messages, or its effects in any status, which
covers a kill between the action and its ledger row). A rerun therefore shows as a rerun tool,
and a doubled note or effect points at the queue or the effect scheduler.

A job can reach the parent while an earlier one still runs (after a restart a client sends its
next job); the brain then answers every unanswered job of the conversation, one ``done <id>``
line each, in the same response as the next calls of the others.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from pydantic import BaseModel

from crashpack import ledger
from sa_core import (
    Pack,
    define_agent,
    define_effect,
    define_model,
    define_prompt,
    define_tool,
)
from sa_core.store import Store, open_store

EFFECT_DELAY = 0.2
"""Seconds between scheduling and running ``ledger_effect``."""


class Op(BaseModel):
    op: str


class Finish(BaseModel):
    summary: str


def call_id(op: str) -> str:
    """The tool call id the brain gives the call carrying operation ``op``."""
    return f"c-{op}"


async def _record(state: Any, args: Op) -> str:
    ledger.append("tool_start", "record", args.op, state.thread_id, call_id(args.op))
    await asyncio.sleep(0.02)  # a little work, so some kills land mid-tool
    ledger.append("tool_end", "record", args.op, state.thread_id, call_id(args.op))
    return f"ok {args.op}"


_stores: list[Store] = []
"""The pack's own connection to the server's database (``$CRASH_DATABASE``), once opened."""


async def _store() -> Store:
    """A store on the server's database, to read what a tool run before a kill left there."""
    if not _stores:
        _stores.append(await open_store(os.environ["CRASH_DATABASE"]))
    return _stores[0]


async def _note_exists(state: Any, text: str) -> bool:
    # still queued (a restart runs the interrupted call before it drains the queue) or stored
    queued = await (await _store()).list_queue(state.thread_id)
    if any(entry.content == text for entry in queued):
        return True
    page = await state.get_messages(limit=200, order="desc", include_silent=True)
    return any(m.content == text for m in page.messages)


async def _effect_exists(state: Any, op: str) -> bool:
    if ledger.recorded_op("effect_start", state.thread_id, op):
        return True
    # any status: the effect the first run scheduled may be claimed (running) or done already
    store = await _store()
    effects = await store.list_effects(state.thread_id, "ledger_effect", any_status=True)
    return any(effect.args.get("op") == op for effect in effects)


async def _note(state: Any, args: Op) -> str:
    call = call_id(args.op)
    text = f"note {args.op}"
    attempt = ledger.append("tool_start", "note", args.op, state.thread_id, call)
    done = ledger.recorded("note_queued", state.thread_id, call)
    if not done and not (attempt > 1 and await _note_exists(state, text)):
        await state.queue_message({"role": "user", "content": text})
        ledger.append("note_queued", "note", args.op, state.thread_id, call)
    ledger.append("tool_end", "note", args.op, state.thread_id, call)
    return f"ok {args.op}"


async def _remind(state: Any, args: Op) -> str:
    call = call_id(args.op)
    attempt = ledger.append("tool_start", "remind", args.op, state.thread_id, call)
    done = ledger.recorded("effect_scheduled", state.thread_id, call)
    if not done and not (attempt > 1 and await _effect_exists(state, args.op)):
        await state.schedule_effect("ledger_effect", {"op": args.op}, delay=EFFECT_DELAY)
        ledger.append("effect_scheduled", "ledger_effect", args.op, state.thread_id, call)
    ledger.append("tool_end", "remind", args.op, state.thread_id, call)
    return f"ok {args.op}"


async def _ledger_effect(state: Any, args: dict[str, Any]) -> None:
    op = str(args["op"])
    ledger.append("effect_start", "ledger_effect", op, state.thread_id, op)
    await asyncio.sleep(0.05)  # so some kills land mid-effect
    ledger.append("effect_end", "ledger_effect", op, state.thread_id, op)


def _child(name: str) -> Any:
    return define_agent(
        name=name,
        type="dual_ai",
        side_a={
            "prompt": "child_main",
            "session_stop": {"name": "finish", "message_property": "summary"},
        },
        side_b={"prompt": "child_b"},
        max_session_turns=3,
        expose_as_tool=True,
        tool_description=f"The {name} subagent.",
    )


def make_pack() -> Pack:
    """Build the crash pack."""
    tools = [
        define_tool(name="record", description="Record an operation.", args=Op, execute=_record),
        define_tool(name="note", description="Queue a note to self.", args=Op, execute=_note),
        define_tool(name="remind", description="Schedule an effect.", args=Op, execute=_remind),
        define_tool(
            name="finish", description="Report.", args=Finish, execute=lambda s, a: a.summary
        ),
    ]
    parent = define_prompt(
        name="parent_main",
        model="parent",
        prompt="You coordinate.",
        include_chat=True,
        tools=[
            "record",
            "note",
            "remind",
            {"name": "worker", "blocking": True, "init_user_message_property": "task"},
            {"name": "scout", "blocking": False, "init_user_message_property": "task"},
        ],
    )
    child_main = define_prompt(
        name="child_main",
        model="child",
        prompt="Work.",
        include_chat=True,
        tools=["record", "finish"],
    )
    child_b = define_prompt(name="child_b", model="child", prompt="Review.")
    return Pack(
        name="crash",
        agents=[
            define_agent(name="parent", side_a={"prompt": "parent_main"}),
            _child("worker"),
            _child("scout"),
        ],
        entry_agents=["parent"],
        prompts=[parent, child_main, child_b],
        models=[
            define_model(name="parent", provider="crashbrain", model="parent-model"),
            define_model(name="child", provider="crashbrain", model="child-model"),
        ],
        tools=tools,
        effects=[define_effect(name="ledger_effect", execute=_ledger_effect)],
    )


pack = make_pack()
