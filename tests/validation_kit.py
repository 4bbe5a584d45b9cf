"""What the pack validation tests share: argument models, tools, prompts, agents, a pack builder
and the problems it reports.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from sa_core.errors import PackValidationError
from sa_core.spec import (
    AgentDefinition,
    Pack,
    PromptDefinition,
    ToolDefinition,
    define_agent,
    define_hook,
    define_model,
    define_prompt,
    define_tool,
)


class LookupArgs(BaseModel):
    query: str


class ApproveArgs(BaseModel):
    summary: str
    files: list[str] = []


class GiveUpArgs(BaseModel):
    reason: str


def noop(*_: Any) -> str:
    return "ok"


def tool(name: str, args: Any = None) -> ToolDefinition:
    return define_tool(name=name, description=f"The {name} tool.", args=args, execute=noop)


def base_tools() -> list[ToolDefinition]:
    return [
        tool("lookup", LookupArgs),
        tool("approve", ApproveArgs),
        tool("give_up", GiveUpArgs),
        tool("status", {"type": "object", "properties": {"text": {"type": "string"}}}),
    ]


def base_prompts() -> list[PromptDefinition]:
    return [
        define_prompt(
            name="main",
            model="fast",
            prompt="You help.",
            tools=["lookup", "summarize", "researcher"],
            hooks=["trim"],
        ),
        define_prompt(
            name="summarize", model="fast", prompt="Summarize.", tool_description="Summarize text."
        ),
        define_prompt(
            name="worker", model="fast", prompt="Research.", tools=["lookup", "give_up", "status"]
        ),
        define_prompt(name="reviewer", model="slow", prompt="Review.", tools=["approve"]),
    ]


def base_agents() -> list[AgentDefinition]:
    return [
        define_agent(name="main", side_a={"prompt": "main"}),
        define_agent(
            name="researcher",
            type="dual_ai",
            expose_as_tool=True,
            tool_description="Research a topic.",
            max_session_turns=6,
            side_a={
                "prompt": "worker",
                "session_fail": {"name": "give_up", "message_property": "reason"},
                "session_status": {"name": "status", "message_property": "text"},
            },
            side_b={
                "prompt": "reviewer",
                "stop_on_response": False,
                "session_stop": {
                    "name": "approve",
                    "message_property": "summary",
                    "attachments_property": "files",
                },
            },
        ),
    ]


def make_pack(
    *,
    agents: list[AgentDefinition] | None = None,
    prompts: list[PromptDefinition] | None = None,
    tools: list[ToolDefinition] | None = None,
    **fields: Any,
) -> Pack:
    fields.setdefault(
        "models",
        [
            define_model(name="fast", provider="test", model="fast-1"),
            define_model(name="slow", provider="test", model="slow-1", fallbacks=["fast"]),
        ],
    )
    fields.setdefault("hooks", [define_hook(id="trim", hook="filter_messages", execute=noop)])
    return Pack(
        name=fields.pop("name", "demo"),
        agents=base_agents() if agents is None else agents,
        prompts=base_prompts() if prompts is None else prompts,
        tools=base_tools() if tools is None else tools,
        **fields,
    )


def problems_of(pack: Pack, **kwargs: Any) -> list[str]:
    try:
        pack.validate(**kwargs)
    except PackValidationError as exc:
        assert exc.pack_name == pack.name
        return exc.problems
    return []


def only_problem(pack: Pack, **kwargs: Any) -> str:
    problems = problems_of(pack, **kwargs)
    assert len(problems) == 1, problems
    return problems[0]


def with_prompt(prompt: PromptDefinition, **pack_fields: Any) -> Pack:
    """The base pack plus one extra prompt."""
    return make_pack(prompts=[*base_prompts(), prompt], **pack_fields)


def with_main_tools(*extra: Any, agents: list[AgentDefinition] | None = None) -> Pack:
    """The base pack whose main prompt offers extra tools entries."""
    prompts = base_prompts()
    prompts[0] = define_prompt(
        name="main", model="fast", prompt="You help.", tools=["lookup", *extra]
    )
    return make_pack(prompts=prompts, agents=agents)
