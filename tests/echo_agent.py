"""The smallest chat pack: a ``helper`` agent on the ``test`` provider, and a model that echoes."""

from __future__ import annotations

from sa_core import Pack, define_agent, define_model, define_prompt
from sa_core.testing import FunctionProvider


def echo_pack() -> Pack:
    """Pack ``echo``: the one-sided ``helper`` agent, its prompt ``main`` on model ``m``."""
    prompt = define_prompt(name="main", model="m", prompt="Echo.", include_chat=True)
    return Pack(
        name="echo",
        agents=[define_agent(name="helper", side_a={"prompt": "main"})],
        prompts=[prompt],
        models=[define_model(name="m", provider="test", model="x")],
    )


def echo_provider() -> FunctionProvider:
    """Answers ``echo: <the last message>``."""
    return FunctionProvider(lambda request: f"echo: {request.messages[-1].content}")
