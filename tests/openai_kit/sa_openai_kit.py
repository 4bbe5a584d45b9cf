"""A test-only plugin for the OpenAI-compatible API tests: a pack and a model that reports what
it was asked.

``sa serve`` loads it through the ``sa`` entry point that the ``sa_openai_kit-0.1.0.dist-info``
folder next to this file declares, when this folder is on ``PYTHONPATH``. The model
(provider ``openai_kit``) answers from the request it receives, so a test reads in the answer
what reached the provider:

- ``/tool NAME {json}`` as the last user message: a call of that tool; after the tool's result,
  ``NAME returned: RESULT``;
- anything else: a JSON object of the request's settings (``temperature``, ``max_tokens``,
  ``seed``, ``top_p``, ``stop``) and the ``temperature`` left in its ``provider_options``.

Every agent uses one prompt whose model sets ``max_tokens=100`` and
``provider_options={"temperature": 0.3}`` (the prompt's own values); they differ only in their
serving policy: ``echo`` (unset: the server's default), ``applying``, ``ignoring`` and
``refusing``.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool
from sa_core.providers import ProviderRequest
from sa_core.testing import FunctionProvider
from sa_hooks import hookimpl

PACKAGE = "settings_kit"


class ColorArgs(BaseModel):
    color: str


async def remember_color(state: Any, args: ColorArgs) -> str:
    await state.set_value("color", args.color)
    return "saved"


async def recall_color(state: Any) -> str:
    return str(await state.get_value("color"))


async def recall_metadata(state: Any) -> str:
    return json.dumps(await state.get_value("sa:openai:metadata"))


def answer(request: ProviderRequest) -> Any:
    last = request.messages[-1]
    if last.role == "tool":
        return f"{last.tool_name} returned: {last.content}"
    text = last.content or ""
    if text.startswith("/tool "):
        name, _, arguments = text.removeprefix("/tool ").partition(" ")
        return {"tool_calls": [{"name": name, "arguments": json.loads(arguments or "{}")}]}
    report = {
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "seed": request.seed,
        "top_p": request.top_p,
        "stop": request.stop,
        "options_temperature": request.provider_options.get("temperature"),
    }
    return json.dumps(report, sort_keys=True)


provider = FunctionProvider(answer, name="openai_kit")

pack = Pack(
    name=PACKAGE,
    description="Agents that report the settings their model calls receive.",
    entry_agents=["echo", "applying", "ignoring", "refusing"],
    models=[
        define_model(
            name="kit_model",
            provider="openai_kit",
            model="kit-1",
            max_tokens=100,
            provider_options={"temperature": 0.3},
        )
    ],
    tools=[
        define_tool(
            name="remember_color", description="Remember a color.", args=ColorArgs,
            execute=remember_color,
        ),
        define_tool(name="recall_color", description="Recall the color.", execute=recall_color),
        define_tool(
            name="recall_metadata", description="The client's metadata.", execute=recall_metadata
        ),
    ],  # fmt: skip
    prompts=[
        define_prompt(
            name="main",
            model="kit_model",
            prompt="Report your settings.",
            include_chat=True,
            tools=["remember_color", "recall_color", "recall_metadata"],
        )
    ],
    agents=[
        define_agent(name="echo", side_a={"prompt": "main"}),
        define_agent(
            name="applying", side_a={"prompt": "main"}, serving={"client_settings": "apply"}
        ),
        define_agent(
            name="ignoring", side_a={"prompt": "main"}, serving={"client_settings": "ignore"}
        ),
        define_agent(
            name="refusing", side_a={"prompt": "main"}, serving={"client_settings": "refuse"}
        ),
    ],
)


@hookimpl
def sa_register_providers(register: Any) -> None:
    register(provider)


@hookimpl
def sa_register_packs(register: Any) -> None:
    register(pack)
