"""A test-only plugin for the client tools tests of the OpenAI-compatible API.

``sa serve`` loads it through the ``sa`` entry point that the ``sa_clienttools_kit-0.1.0.dist-info``
folder next to this file declares, when this folder is on ``PYTHONPATH``. Its model (provider
``clienttools_kit``) answers from the request it receives, so a test reads in the answer what
reached the model:

- after tool results: ``NAME returned: RESULT`` for each (the turn's end);
- a ``tool_choice`` that names a tool: a call of it, with the last user message (JSON) as its
  arguments, as a model forced to answer through one tool does;
- ``/tool NAME {json}`` as the last user message: a call of that tool; ``/tools A B {json}``:
  calls of both, with the same arguments;
- anything else: JSON ``{"tools": [names offered], "tool_choice": ...}``.

The pack has the agent's own tool ``count_words`` (it runs on the server), and two agents:
``desk`` takes client tools, ``closed`` turns them off (``serving.client_tools=False``).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool
from sa_core.providers import ProviderRequest
from sa_core.testing import FunctionProvider
from sa_hooks import hookimpl

PACKAGE = "tools_kit"


class Words(BaseModel):
    text: str


def count_words(state: Any, args: Words) -> str:
    return f"{len(args.text.split())} words"


def answer(request: ProviderRequest) -> Any:
    messages = request.messages
    end = len(messages)
    while end > 0 and messages[end - 1].role == "tool":
        end -= 1
    if end < len(messages):
        return "\n".join(f"{m.tool_name} returned: {m.content}" for m in messages[end:])
    text = messages[-1].content or ""
    choice = request.tool_choice
    if isinstance(choice, dict):
        return {"tool_calls": [{"name": choice["name"], "arguments": json.loads(text)}]}
    if text.startswith("/tool ") or text.startswith("/tools "):
        command, _, rest = text.partition(" ")
        names, arguments = rest.split("{", 1) if "{" in rest else (rest, "}")
        calls = [
            {"name": name, "arguments": json.loads("{" + arguments)} for name in names.split()
        ]
        return {"tool_calls": calls if command == "/tools" else calls[:1]}
    return json.dumps({"tools": [t.name for t in request.tools], "tool_choice": choice})


provider = FunctionProvider(answer, name="clienttools_kit")

pack = Pack(
    name=PACKAGE,
    description="Agents whose model reports the tools it was offered.",
    entry_agents=["desk", "closed"],
    models=[define_model(name="kit_model", provider="clienttools_kit", model="kit-1")],
    tools=[
        define_tool(
            name="count_words", description="Count words.", args=Words, execute=count_words
        )
    ],
    prompts=[
        define_prompt(
            name="main",
            model="kit_model",
            prompt="Help.",
            include_chat=True,
            tools=["count_words"],
        )
    ],
    agents=[
        define_agent(name="desk", side_a={"prompt": "main"}),
        define_agent(name="closed", side_a={"prompt": "main"}, serving={"client_tools": False}),
    ],
)


@hookimpl
def sa_register_providers(register: Any) -> None:
    register(provider)


@hookimpl
def sa_register_packs(register: Any) -> None:
    register(pack)
