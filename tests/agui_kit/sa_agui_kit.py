"""A test-only plugin for the AG-UI tests (``tests/test_agui.py``).

``sa serve`` loads it through the ``sa`` entry point that the ``sa_agui_kit-0.1.0.dist-info``
folder next to this file declares, when this folder is on ``PYTHONPATH``. Its model (provider
``agui_kit``) streams its answers in chunks of 4 characters and answers from the request it
receives:

- after tool results: ``NAME returned: RESULT`` for each;
- ``/tool NAME {json}`` as the last user message: a call of that tool, after the text
  ``Calling NAME.``;
- ``/fail``: a model error (``status 400``, so no retry);
- anything else: ``You said: TEXT``.

The pack ``agui_kit`` has the agent ``planner`` with the tools ``save_plan`` (sets the thread
value ``plan``), ``read_value`` (returns a thread value as JSON), ``announce`` (emits the event
``progress``), ``sign`` (sets the value ``signature`` holding the secret variable ``TOKEN``) and
``transfer`` (needs a human's approval); the agent ``closed`` takes no client tools
(``serving.client_tools=False``).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool
from sa_core.providers import ProviderRequest
from sa_core.testing import FunctionProvider
from sa_hooks import hookimpl

PACKAGE = "agui_kit"


class Plan(BaseModel):
    steps: list[str]


class Key(BaseModel):
    key: str


class Note(BaseModel):
    text: str


class Transfer(BaseModel):
    amount: int


async def save_plan(state: Any, args: Plan) -> str:
    await state.set_value("plan", {"steps": args.steps})
    return f"Saved {len(args.steps)} steps"


async def read_value(state: Any, args: Key) -> str:
    return json.dumps(await state.get_value(args.key))


def announce(state: Any, args: Note) -> str:
    state.emit("progress", {"note": args.text})
    return "announced"


async def sign(state: Any) -> str:
    await state.set_value("signature", f"signed with {state.env('TOKEN')}")
    return "signed"


def transfer(state: Any, args: Transfer) -> str:
    return f"Sent {args.amount}"


def answer(request: ProviderRequest) -> Any:
    messages = request.messages
    end = len(messages)
    while end > 0 and messages[end - 1].role == "tool":
        end -= 1
    if end < len(messages):
        return "\n".join(f"{m.tool_name} returned: {m.content}" for m in messages[end:])
    text = messages[-1].content or ""
    if text == "/fail":
        return {"error": {"message": "The model refused the request.", "status": 400}}
    if text.startswith("/tool "):
        name, _, arguments = text[len("/tool ") :].partition(" ")
        call = {"name": name, "arguments": json.loads(arguments or "{}")}
        return {"content": f"Calling {name}.", "tool_calls": [call]}
    return f"You said: {text}"


provider = FunctionProvider(answer, name="agui_kit", chunk_size=4)

pack = Pack(
    name=PACKAGE,
    description="A planner whose model follows /tool commands.",
    entry_agents=["planner", "closed"],
    models=[define_model(name="kit_model", provider="agui_kit", model="kit-1")],
    tools=[
        define_tool(name="save_plan", description="Save the plan.", args=Plan, execute=save_plan),
        define_tool(name="read_value", description="Read a value.", args=Key, execute=read_value),
        define_tool(name="announce", description="Announce.", args=Note, execute=announce),
        define_tool(name="sign", description="Sign with the secret TOKEN.", execute=sign),
        define_tool(
            name="transfer",
            description="Send money.",
            args=Transfer,
            execute=transfer,
            requires_approval=True,
        ),
    ],
    prompts=[
        define_prompt(
            name="main",
            model="kit_model",
            prompt="Plan.",
            include_chat=True,
            tools=["save_plan", "read_value", "announce", "sign", "transfer"],
        )
    ],
    agents=[
        define_agent(name="planner", side_a={"prompt": "main"}),
        define_agent(name="closed", side_a={"prompt": "main"}, serving={"client_tools": False}),
    ],
)


@hookimpl
def sa_register_providers(register: Any) -> None:
    register(provider)


@hookimpl
def sa_register_packs(register: Any) -> None:
    register(pack)
