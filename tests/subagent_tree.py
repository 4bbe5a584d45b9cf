"""A lead agent that delegates to a blocking ``researcher`` subagent: a two-thread tree.

The usage, budget and prompt-caching tests roll their figures up over this tree; each brings
its own models (names and prices) and its own provider.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from sa_core import ModelDefinition, Pack, define_agent, define_prompt, define_tool


class Task(BaseModel):
    task: str


class Summary(BaseModel):
    summary: str


def research_tree(
    name: str, lead_model: ModelDefinition, worker_model: ModelDefinition, **lead_fields: Any
) -> Pack:
    """Pack ``name``: a ``lead`` agent whose ``coordinator`` prompt (on ``lead_model``) can call
    a blocking ``researcher`` subagent with a ``task``.

    The researcher is a ``dual_ai`` agent running the ``worker`` prompt (on ``worker_model``)
    on both sides, at most 3 session turns; it finishes when it calls ``approve`` with a
    ``summary``. ``lead_fields`` go to the lead's ``define_agent``.
    """
    approve = define_tool(
        name="approve", description="Finish.", args=Summary, execute=lambda state, args: "ok"
    )
    coordinator = define_prompt(
        name="coordinator",
        model=lead_model.name,
        prompt="Coordinate.",
        include_chat=True,
        tools=[{"name": "researcher", "blocking": True, "initUserMessageProperty": "task"}],
    )
    worker = define_prompt(
        name="worker",
        model=worker_model.name,
        prompt="Research.",
        include_chat=True,
        tools=["approve"],
        required_schema=Task,
    )
    researcher = define_agent(
        name="researcher",
        type="dual_ai",
        expose_as_tool=True,
        tool_description="Researches a task.",
        max_session_turns=3,
        side_a={
            "prompt": "worker",
            "stop_on_response": False,
            "session_stop": {"name": "approve", "message_property": "summary"},
        },
        side_b={"prompt": "worker", "stop_on_response": False},
    )
    lead = define_agent(name="lead", side_a={"prompt": "coordinator"}, **lead_fields)
    return Pack(
        name=name,
        agents=[lead, researcher],
        prompts=[coordinator, worker],
        models=[lead_model, worker_model],
        tools=[approve],
    )
