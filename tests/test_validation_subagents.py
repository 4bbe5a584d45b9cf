"""Pack validation of handoffs, subagents and session bindings, every problem at once."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from validation_kit import (
    base_agents,
    base_prompts,
    base_tools,
    make_pack,
    only_problem,
    problems_of,
    tool,
    with_main_tools,
)

from sa_core.spec import (
    AgentDefinition,
    define_agent,
    define_prompt,
)

# ---------------------------------------------------------------------------------------------
# Handoffs and subagents
# ---------------------------------------------------------------------------------------------


def unexposed_agents() -> list[AgentDefinition]:
    return [
        *base_agents(),
        define_agent(name="desk", side_a={"prompt": "summarize"}),
        define_agent(
            name="pair",
            type="dual_ai",
            max_session_turns=3,
            side_a={"prompt": "worker"},
            side_b={"prompt": "reviewer"},
        ),
    ]


def test_handoff_target_must_be_exposed() -> None:
    problem = only_problem(with_main_tools("desk", agents=unexposed_agents()))
    assert "names agent 'desk', a handoff target (ai_human), which is not exposed" in problem


@pytest.mark.parametrize("entry", ["pair", {"name": "pair"}, {"name": "pair", "include_errors": 0}])
def test_plain_or_subprompt_entry_naming_dual_ai_must_be_exposed(entry: Any) -> None:
    problem = only_problem(with_main_tools(entry, agents=unexposed_agents()))
    assert "names agent 'pair', a subagent (dual_ai), which is not exposed" in problem


def test_exposed_dual_ai_by_plain_name_is_a_subagent() -> None:
    assert problems_of(with_main_tools({"name": "researcher"})) == []


def test_subagent_config_target_must_be_exposed() -> None:
    problem = only_problem(
        with_main_tools({"name": "pair", "blocking": False}, agents=unexposed_agents())
    )
    assert "subagent entry 'pair': agent 'pair' is not exposed as a tool" in problem


@pytest.mark.parametrize(
    ("target", "what"), [("desk", "ai_human agent"), ("summarize", "a prompt")]
)
def test_subagent_config_target_must_be_dual_ai(target: str, what: str) -> None:
    agents = base_agents()
    agents.append(
        define_agent(
            name="desk", side_a={"prompt": "summarize"}, expose_as_tool=True, tool_description="D."
        )
    )
    problem = only_problem(with_main_tools({"name": target, "blocking": True}, agents=agents))
    assert "must target an exposed dual_ai agent" in problem and what in problem


def test_resumable_on_non_dual_ai_target() -> None:
    agents = [
        *base_agents(),
        define_agent(
            name="desk", side_a={"prompt": "summarize"}, expose_as_tool=True, tool_description="D."
        ),
    ]
    entry = {"name": "desk", "resumable": {"receives_messages": "side_a"}}
    problem = only_problem(with_main_tools(entry, agents=agents))
    assert "resumable is set but 'desk' is a ai_human agent" in problem


def test_max_instances_must_be_positive() -> None:
    entry = {"name": "researcher", "resumable": {"max_instances": 0}}
    assert "resumable.max_instances is 0" in only_problem(with_main_tools(entry))


def test_valid_resumable_subagent() -> None:
    entry = {
        "name": "researcher",
        "blocking": False,
        "immediate": {"name_env": "TOPIC", "scoped_env": ["TOPIC"]},
        "optional": "RESEARCH_ON",
        "resumable": {"receives_messages": "side_b", "max_instances": 3},
    }
    assert problems_of(with_main_tools(entry)) == []


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        ({"name": "researcher", "blocking": True, "optional": ""}, "optional is an empty string"),
        (
            {"name": "researcher", "immediate": {"name_env": ""}},
            "immediate.name_env is an empty string",
        ),
        (
            {"name": "researcher", "immediate": {"description_env": " "}},
            "immediate.description_env is an empty string",
        ),
        ({"name": "researcher", "immediate": {"scoped_env": [""]}}, "scoped_env contains an empty"),
        ({"name": "approve", "env": {}, "optional": ""}, "optional is an empty string"),
        (
            {"name": "summarize", "init_user_message_property": ""},
            "init_user_message_property is an empty string",
        ),
    ],
)
def test_empty_strings_are_reported(entry: dict[str, Any], fragment: str) -> None:
    assert fragment in only_problem(with_main_tools(entry))


def test_tool_config_must_name_a_tool() -> None:
    problem = only_problem(with_main_tools({"name": "summarize", "env": {"A": "b"}}))
    assert "has env/options (a tool config) but names a prompt" in problem


def test_init_property_must_exist_in_required_schema() -> None:
    class Brief(BaseModel):
        topic: str

    prompts = base_prompts()
    prompts[0] = define_prompt(
        name="main",
        model="fast",
        tools=[{"name": "brief", "init_user_message_property": "subject"}],
    )
    prompts.append(
        define_prompt(name="brief", model="fast", tool_description="B.", required_schema=Brief)
    )
    problem = only_problem(make_pack(prompts=prompts))
    assert "init_user_message_property='subject'" in problem
    assert "prompt 'brief'.required_schema has no such property" in problem


# ---------------------------------------------------------------------------------------------
# Session bindings
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("binding", ["session_stop", "session_fail", "session_status", "stop_tool"])
def test_binding_tool_must_be_offered_by_the_side_prompt(binding: str) -> None:
    agents = base_agents()
    agents[0] = define_agent(name="main", side_a={"prompt": "main", binding: "approve"})
    problem = only_problem(make_pack(agents=agents))
    assert problem.startswith(
        f"agent 'main' side_a: {binding} tool 'approve' is not offered by prompt 'main'"
    )


@pytest.mark.parametrize(
    ("side", "fragment"),
    [
        (
            {
                "prompt": "reviewer",
                "session_stop": {"name": "approve", "message_property": "sumary"},
            },
            "session_stop.message_property is 'sumary', but tool 'approve' has no such argument",
        ),
        (
            {
                "prompt": "reviewer",
                "session_stop": {"name": "approve", "attachments_property": "attachments"},
            },
            "session_stop.attachments_property is 'attachments'",
        ),
        (
            {
                "prompt": "reviewer",
                "stop_tool": "approve",
                "stop_tool_response_property": "result",
            },
            "stop_tool_response_property is 'result'",
        ),
        (
            {"prompt": "worker", "session_status": {"name": "status", "message_property": "msg"}},
            "session_status.message_property is 'msg', but tool 'status' has no such argument "
            "(takes text)",
        ),
    ],
)
def test_binding_property_must_be_a_tool_argument(side: dict[str, Any], fragment: str) -> None:
    agents = [*base_agents(), define_agent(name="solo", side_a=side)]
    assert fragment in only_problem(make_pack(agents=agents))


def test_binding_property_of_a_tool_without_args() -> None:
    prompts = [*base_prompts(), define_prompt(name="bare", model="fast", tools=["done"])]
    agents = [
        *base_agents(),
        define_agent(
            name="solo",
            side_a={"prompt": "bare", "session_stop": {"name": "done", "message_property": "x"}},
        ),
    ]
    problem = only_problem(
        make_pack(agents=agents, prompts=prompts, tools=[*base_tools(), tool("done")])
    )
    assert "takes no arguments" in problem


def test_free_form_json_schema_is_not_checked() -> None:
    prompts = [*base_prompts(), define_prompt(name="bare", model="fast", tools=["done"])]
    agents = [
        *base_agents(),
        define_agent(
            name="solo",
            side_a={"prompt": "bare", "session_stop": {"name": "done", "message_property": "x"}},
        ),
    ]
    tools = [*base_tools(), tool("done", {"type": "object"})]
    assert problems_of(make_pack(agents=agents, prompts=prompts, tools=tools)) == []


def test_stop_tool_response_property_needs_stop_tool() -> None:
    agents = base_agents()
    agents[0] = define_agent(
        name="main", side_a={"prompt": "main", "stop_tool_response_property": "query"}
    )
    assert "stop_tool_response_property is set without stop_tool" in only_problem(
        make_pack(agents=agents)
    )


def test_legacy_binding_names_are_checked_too() -> None:
    agents = base_agents()
    agents[0] = AgentDefinition.model_validate(
        {"name": "main", "sideA": {"prompt": "main", "endSessionTool": "finish"}}
    )
    assert "session_stop tool 'finish' is not offered" in only_problem(make_pack(agents=agents))
