"""A pack for the fork and rewind tests: a ``lead`` agent that writes, deletes and moves files,
sets values, and starts children, each on a one-line command; the model is a function.

Commands (the last user message): ``write PATH TEXT``, ``delete PATH``, ``move SRC DST``,
``set KEY VALUE``, ``spawn TASK`` (a non-blocking child), ``ask TASK`` (a blocking child),
``both PATH TEXT`` (two calls in one tool round: a write and a value), ``create NAME TASK`` (a
resumable ``keeper`` child), ``tell REFERENCE TEXT`` (``subagent_message``). ``block ...`` waits for
:attr:`Lead.gate` first. Anything else gets a plain answer. After a tool round the lead answers ``done``. A child answers its task with
``child did TASK``, unless the task starts with ``wait`` (then it waits for :data:`GATE`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from sa_core import Pack, define_agent, define_effect, define_model, define_prompt, define_tool
from sa_core.providers import ProviderRequest
from sa_core.testing import FunctionProvider


def _args(*names: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": "string"} for name in names},
        "required": list(names),
    }


async def _write(state: Any, args: dict[str, str]) -> str:
    await state.write_file(args["path"], args["text"])
    return "written"


async def _delete(state: Any, args: dict[str, str]) -> str:
    return "deleted" if await state.unlink_file(args["path"]) else "missing"


async def _move(state: Any, args: dict[str, str]) -> str:
    await state.move_file(args["src"], args["dst"])
    return "moved"


async def _set(state: Any, args: dict[str, str]) -> str:
    await state.set_value(args["key"], args["value"])
    return "set"


FINISH = define_tool(
    name="finish", description="Finish.", args=_args("summary"), execute=lambda s, a: "ok"
)
TOOLS = [
    define_tool(name="write_note", description="Write.", args=_args("path", "text"), execute=_write),
    define_tool(name="delete_note", description="Delete.", args=_args("path"), execute=_delete),
    define_tool(name="move_note", description="Move.", args=_args("src", "dst"), execute=_move),
    define_tool(name="set_value", description="Set.", args=_args("key", "value"), execute=_set),
]


class Lead:
    """The lead's and children's model: a function of the request (see the module docstring)."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.provider = FunctionProvider(self.answer)

    @property
    def lead_requests(self) -> list[ProviderRequest]:
        return [r for r in self.provider.requests if r.model == "lead-model"]

    async def answer(self, request: ProviderRequest) -> Any:
        last = request.messages[-1]
        if request.model == "child-model":
            task = next(str(m.content) for m in request.messages if m.role == "user")
            if "wait" in task:
                await self.gate.wait()
            return {"tool_calls": [{"name": "finish", "arguments": {"summary": f"did {task}"}}]}
        if last.role == "tool":
            return "done"
        text = str(last.content or "")
        if text.startswith("block"):
            await self.gate.wait()
        return self.command(text)

    @staticmethod
    def command(text: str) -> Any:
        verb, _, rest = text.partition(" ")
        first, _, second = rest.partition(" ")
        calls = {
            "write": [("write_note", {"path": first, "text": second})],
            "delete": [("delete_note", {"path": first})],
            "move": [("move_note", {"src": first, "dst": second})],
            "set": [("set_value", {"key": first, "value": second})],
            "spawn": [("helper", {"task": rest})],
            "ask": [("asker", {"task": rest})],
            "create": [
                ("subagent_create", {"agent": "keeper", "name": first, "message": second, "attachments": []})
            ],
            "tell": [("subagent_message", {"referenceId": first, "message": second})],
            "both": [
                ("write_note", {"path": first, "text": second}),
                ("set_value", {"key": first, "value": second}),
            ],
        }.get(verb)
        if calls is None:
            return f"answer to {text}"
        return {"tool_calls": [{"name": n, "arguments": a} for n, a in calls]}


def pack() -> Pack:
    """The ``tt`` pack: agent ``lead`` and its children ``helper`` (non-blocking) and ``asker``."""
    lead = define_prompt(
        name="lead",
        model="lead",
        prompt="Lead.",
        include_chat=True,
        tools=[
            *(t.name for t in TOOLS),
            {"name": "helper", "blocking": False, "initUserMessageProperty": "task"},
            {"name": "asker", "blocking": True, "initUserMessageProperty": "task"},
            {"name": "keeper", "blocking": False, "resumable": {"receives_messages": "side_a"}},
        ],
    )
    child = define_prompt(
        name="child",
        model="child",
        prompt="Child.",
        include_chat=True,
        required_schema=_args("task"),
        tools=["finish"],
    )
    children = [
        define_agent(
            name=name,
            type="dual_ai",
            expose_as_tool=True,
            tool_description="A child.",
            side_a={
                "prompt": "child",
                "stop_on_response": False,
                "session_stop": {"name": "finish", "message_property": "summary"},
            },
            side_b={"prompt": "child", "stop_on_response": False},
        )
        for name in ("helper", "asker", "keeper")
    ]
    return Pack(
        name="tt",
        agents=[define_agent(name="lead", side_a={"prompt": "lead"}), *children],
        prompts=[lead, child],
        models=[
            define_model(name="lead", provider="test", model="lead-model"),
            define_model(name="child", provider="test", model="child-model"),
        ],
        tools=[*TOOLS, FINISH],
        effects=[define_effect(name="remind", description="Remind.", execute=lambda s, a: None)],
    )


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
