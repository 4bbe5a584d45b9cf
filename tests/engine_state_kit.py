"""What the ThreadState tests share: a model and a one-agent pack builder."""

from __future__ import annotations

from sa_core import (
    Pack,
    define_agent,
    define_model,
    define_prompt,
)

MODEL = define_model(name="fast", provider="test", model="m")


def make_pack(*, tools=(), effects=(), prompt_env=None, agent_env=None, variables=(), prompt_tools=None) -> Pack:
    prompt = define_prompt(
        name="main",
        model="fast",
        prompt="Hi.",
        include_chat=True,
        tools=prompt_tools if prompt_tools is not None else [t.name for t in tools],
        env=prompt_env or {},
        variables=list(variables),
    )
    agent = define_agent(name="helper", side_a={"prompt": "main"}, env=agent_env or {})
    return Pack(name="demo", agents=[agent], prompts=[prompt], models=[MODEL], tools=list(tools), effects=list(effects))
