"""Simulated users: a ``dual_ai`` agent whose side A is the target and side B plays the user.

``simulate: {goal, persona, opening, max_turns}`` builds, inside the target's package, an agent
``eval_user__<case>`` of type ``dual_ai``: side A is the target agent's own side A (its prompt,
tools and settings), side B a user prompt made from the goal and persona whose session bindings
are two tools, ``eval_user_done`` (``session_stop``: the goal is met) and ``eval_user_give_up``
(``session_fail``). The conversation starts with ``opening`` as the user's message and ends
through those bindings, or fails at ``max_turns``. ``simulate: {agent: <name>}`` runs a pack's
own ``dual_ai`` agent instead.

The definitions join the package's scope of the running runtime (they are data, no code of the
pack changes) and stay there after the run, so the trial's thread can be read and continued in
this runtime like any thread; a later run of the case replaces them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from sa_core.evals.view import DONE_TOOL, GIVE_UP_TOOL, SIM_PREFIX
from sa_core.spec import define_agent, define_prompt, define_tool

if TYPE_CHECKING:
    from sa_core.evals.suite import Case, Simulate
    from sa_core.registry import PackScope
    from sa_core.runtime import Runtime
    from sa_core.spec import AgentDefinition
    from sa_core.state import ThreadState


USER_PROMPT = """\
You are role-playing a USER talking to a customer-facing AI agent. Stay in character: write
only what this user would say, in one to three short sentences. Never act as the agent.

Your goal: {goal}
Your persona: {persona}

When the agent has fully achieved your goal, call {done} with a one-line reason.
If the agent clearly cannot achieve it, or asks for something you will not give, call
{give_up} with the reason. Otherwise reply to the agent as the user."""


class EndArgs(BaseModel):
    """Arguments of the simulated user's session tools."""

    reason: str = Field("", description="Why the conversation ends, in one line.")


def _end(state: ThreadState, args: EndArgs) -> str:
    return args.reason or "ended"


def sim_agent_name(case_id: str) -> str:
    """The simulated-user agent's name for a case (letters, digits and ``_`` only)."""
    return SIM_PREFIX + re.sub(r"[^A-Za-z0-9_]", "_", case_id)


def add_simulated_users(
    runtime: Runtime, package: str, target_agent: str, cases: list[Case], user_model: str | None
) -> None:
    """Add the simulated-user agents of ``cases`` (and their two tools) to the package's scope."""
    scope = runtime.registry.scope(package)
    target, _ = scope.agent(target_agent)
    if any(c.simulate is not None and c.simulate.agent is None for c in cases):
        for tool in (
            define_tool(
                name=DONE_TOOL,
                description="Your goal is met: end the conversation.",
                args=EndArgs,
                execute=_end,
            ),
            define_tool(
                name=GIVE_UP_TOOL,
                description="Your goal cannot be met: give up.",
                args=EndArgs,
                execute=_end,
            ),
        ):
            scope.tools.setdefault(tool.name, tool)
    for case in cases:
        sim = case.simulate
        if sim is not None and sim.agent is None:
            _add_sim(scope, target, case, sim, user_model)


def _add_sim(
    scope: PackScope, target: AgentDefinition, case: Case, sim: Simulate, user_model: str | None
) -> None:
    name = sim_agent_name(case.id)
    model = user_model or scope.prompts[target.side_a.prompt].model
    prompt = define_prompt(
        name=name,
        model=model,
        prompt=USER_PROMPT.format(
            goal=sim.goal or "get help",
            persona=sim.persona or "an ordinary customer",
            done=DONE_TOOL,
            give_up=GIVE_UP_TOOL,
        ),
        include_chat=True,
        tools=[DONE_TOOL, GIVE_UP_TOOL],
    )
    scope.prompts[name] = prompt
    scope.agents[name] = define_agent(
        name=name,
        type="dual_ai",
        title=f"Simulated user: {case.id}",
        side_a=target.side_a.model_dump(),
        side_b={
            "prompt": name,
            "label": "Simulated user",
            "session_stop": DONE_TOOL,
            "session_fail": GIVE_UP_TOOL,
        },
        max_session_turns=sim.max_turns,
        env=dict(target.env),
        variables=list(target.variables),
        hooks=list(target.hooks),
    )
