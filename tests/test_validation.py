"""Pack.validate() / validate_pack: every check is reported, all at once; and pack warnings."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from sa_core.errors import PackValidationError
from sa_core.spec import (
    AgentDefinition,
    Pack,
    PromptDefinition,
    ToolDefinition,
    define_agent,
    define_effect,
    define_hook,
    define_model,
    define_prompt,
    define_thread_endpoint,
    define_tool,
)
from sa_core.spec.validation import validate_pack


class LookupArgs(BaseModel):
    query: str


class ApproveArgs(BaseModel):
    summary: str
    files: list[str] = []


class GiveUpArgs(BaseModel):
    reason: str


def _noop(*_: Any) -> str:
    return "ok"


def tool(name: str, args: Any = None) -> ToolDefinition:
    return define_tool(name=name, description=f"The {name} tool.", args=args, execute=_noop)


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
    fields.setdefault("hooks", [define_hook(id="trim", hook="filter_messages", execute=_noop)])
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


# ---------------------------------------------------------------------------------------------
# A clean pack
# ---------------------------------------------------------------------------------------------


def test_clean_pack_passes_without_warnings() -> None:
    pack = make_pack()
    pack.validate()
    assert validate_pack(pack) == []
    assert pack.warnings() == []


def test_validate_pack_returns_the_problem_list() -> None:
    pack = make_pack(prompts=[*base_prompts(), define_prompt(name="x", model="nope")])
    problems = validate_pack(pack)
    assert len(problems) == 1
    assert "prompt 'x'" in problems[0] and "model 'nope'" in problems[0]


def test_every_problem_is_reported_in_one_error() -> None:
    prompts = base_prompts()
    prompts[0] = define_prompt(
        name="main", model="missing_model", prompt="Hi.", tools=["ghost"], hooks=["nohook"]
    )
    agents = base_agents()
    agents.append(define_agent(name="broken", type="dual_ai", side_a={"prompt": "absent"}))
    pack = make_pack(prompts=prompts, agents=agents, tools=[*base_tools(), tool("lookup")])
    with pytest.raises(PackValidationError) as caught:
        pack.validate()
    problems = caught.value.problems
    expected = [
        "tool 'lookup' is defined 2 times",
        "model 'missing_model'",
        "hook 'nohook'",
        "tools entry 'ghost'",
        "prompt 'absent'",
        "needs side_b",
    ]
    for fragment in expected:
        assert any(fragment in p for p in problems), (fragment, problems)
    assert len(problems) == len(expected)
    assert f"{len(expected)} problem(s)" in str(caught.value)


# ---------------------------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "items", "fragment"),
    [
        ("agents", lambda: [*base_agents(), base_agents()[0]], "agent 'main' is defined 2 times"),
        (
            "prompts",
            lambda: [*base_prompts(), base_prompts()[1]],
            "prompt 'summarize' is defined 2 times",
        ),
        (
            "models",
            lambda: [
                define_model(name="fast", provider="test", model="a"),
                define_model(name="slow", provider="test", model="b"),
                define_model(name="fast", provider="test", model="c"),
            ],
            "model 'fast' is defined 2 times",
        ),
        ("tools", lambda: [*base_tools(), tool("status")], "tool 'status' is defined 2 times"),
        (
            "hooks",
            lambda: [
                define_hook(id="trim", hook="filter_messages", execute=_noop),
                define_hook(id="trim", hook="after_create_message", execute=_noop),
            ],
            "hook id 'trim' is defined 2 times",
        ),
        (
            "effects",
            lambda: [define_effect(name="ping", execute=_noop)] * 2,
            "effect 'ping' is defined 2 times",
        ),
        (
            "endpoints",
            lambda: [
                define_thread_endpoint(path="items/{item_id}", method="POST", handler=_noop),
                define_thread_endpoint(path="/items/{id}/", method="POST", handler=_noop),
                define_thread_endpoint(path="items/{id}", method="GET", handler=_noop),
            ],
            "endpoint 'POST /items/{}' is defined 2 times",
        ),
    ],
)
def test_duplicate_names_are_reported(field: str, items: Any, fragment: str) -> None:
    assert fragment in only_problem(make_pack(**{field: items()}))


def test_pack_name_must_not_contain_a_slash() -> None:
    assert "must not contain '/'" in only_problem(make_pack(name="acme/demo"))


def test_unknown_entry_agent_is_reported() -> None:
    problem = only_problem(make_pack(entry_agents=["main", "mian"]))
    assert "entry_agents lists 'mian'" in problem


# ---------------------------------------------------------------------------------------------
# References
# ---------------------------------------------------------------------------------------------


def test_unknown_side_prompt() -> None:
    agents = [*base_agents(), define_agent(name="solo", side_a={"prompt": "mian"})]
    problem = only_problem(make_pack(agents=agents))
    assert problem.startswith("agent 'solo' side_a: prompt 'mian' is not a prompt of the pack")
    assert "did you mean 'main'" in problem


def test_ai_human_side_b_is_ignored() -> None:
    agents = [
        *base_agents(),
        define_agent(name="chat", side_a={"prompt": "main"}, side_b={"prompt": "nowhere"}),
    ]
    assert problems_of(make_pack(agents=agents)) == []


def test_unknown_prompt_model() -> None:
    problem = only_problem(with_prompt(define_prompt(name="extra", model="fsat")))
    assert "prompt 'extra': model 'fsat'" in problem and "did you mean 'fast'" in problem


def test_model_may_come_from_a_known_pack() -> None:
    other = Pack(name="shared", models=[define_model(name="big", provider="test", model="b")])
    pack = with_prompt(define_prompt(name="extra", model="big"))
    assert problems_of(pack, known_packs=[other]) == []


def test_unknown_model_fallback() -> None:
    models = [
        define_model(name="fast", provider="test", model="a", fallbacks=["fast"]),
        define_model(name="slow", provider="test", model="b", fallbacks=["medium"]),
    ]
    problems = problems_of(make_pack(models=models))
    assert len(problems) == 2
    assert "model 'fast': fallbacks lists the model itself" in problems[0]
    assert "model 'slow': fallback 'medium'" in problems[1]


def test_unknown_tool_entry() -> None:
    problem = only_problem(with_main_tools("lookpu"))
    assert "prompt 'main': tools entry 'lookpu' is not a tool, prompt or agent" in problem
    assert "did you mean 'lookup'" in problem


def test_tool_entry_may_name_a_plugin_tool() -> None:
    pack = with_main_tools("web_search")
    assert "web_search" in only_problem(pack)
    assert problems_of(pack, known_tools=["web_search"]) == []


def test_tool_entry_listed_twice() -> None:
    assert "lists 'lookup' more than once" in only_problem(with_main_tools("lookup"))


def test_provider_tool_entry_must_be_declared_by_the_model() -> None:
    problem = only_problem(with_main_tools("provider:web_search"))
    assert "model 'fast' does not list it in provider_tools" in problem
    models = [
        define_model(name="fast", provider="test", model="a", provider_tools=["web_search"]),
        define_model(name="slow", provider="test", model="b"),
    ]
    prompts = base_prompts()
    prompts[0] = define_prompt(name="main", model="fast", tools=["provider:web_search"])
    assert problems_of(make_pack(prompts=prompts, models=models)) == []


def test_unknown_prompt_hook_and_agent_hook() -> None:
    agents = base_agents()
    agents[0] = define_agent(name="main", side_a={"prompt": "main"}, hooks=["trim", "audit"])
    prompts = base_prompts()
    prompts[1] = define_prompt(name="summarize", model="fast", hooks=["trim2"])
    problems = problems_of(make_pack(agents=agents, prompts=prompts))
    assert len(problems) == 2
    assert any("prompt 'summarize': hook 'trim2'" in p for p in problems)
    assert any("agent 'main': hook 'audit'" in p for p in problems)


# ---------------------------------------------------------------------------------------------
# Cross-pack references
# ---------------------------------------------------------------------------------------------


def other_pack() -> Pack:
    return Pack(
        name="crm",
        agents=[
            define_agent(
                name="crm_agent",
                type="dual_ai",
                expose_as_tool=True,
                tool_description="CRM work.",
                side_a={"prompt": "p"},
                side_b={"prompt": "p"},
            ),
            define_agent(name="internal", side_a={"prompt": "p"}, expose_as_tool=True),
        ],
        prompts=[define_prompt(name="p", model="m")],
        models=[define_model(name="m", provider="test", model="m")],
        entry_agents=["crm_agent"],
    )


def test_cross_pack_entry_agent_is_reachable() -> None:
    assert problems_of(with_main_tools("crm/crm_agent"), known_packs=[other_pack()]) == []
    assert problems_of(with_main_tools("crm_agent"), known_packs=[other_pack()]) == []


def test_cross_pack_non_entry_agent_is_not_reachable() -> None:
    problem = only_problem(with_main_tools("crm/internal"), known_packs=[other_pack()])
    assert "only entry agents are reachable across packs" in problem
    assert "crm_agent" in problem


def test_cross_pack_unknown_pack_or_agent() -> None:
    assert "names pack 'crm'" in only_problem(with_main_tools("crm/crm_agent"))
    problem = only_problem(with_main_tools("crm/nobody"), known_packs=[other_pack()])
    assert "pack 'crm' has no agent 'nobody'" in problem


# ---------------------------------------------------------------------------------------------
# Lifecycle names
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["subagent_create", "subagent_message", "subagents"])
def test_lifecycle_names_cannot_be_defined_as_tools(name: str) -> None:
    problem = only_problem(make_pack(tools=[*base_tools(), tool(name)]))
    assert f"tool '{name}': this name is reserved" in problem


def test_lifecycle_tool_in_a_prompt_is_reported() -> None:
    problem = only_problem(with_main_tools("subagent_create"))
    assert "subagent lifecycle tool" in problem and "remove the entry" in problem


# ---------------------------------------------------------------------------------------------
# Agents
# ---------------------------------------------------------------------------------------------


def test_dual_ai_without_side_b() -> None:
    agents = [
        *base_agents(),
        define_agent(name="pair", type="dual_ai", max_session_turns=3, side_a={"prompt": "worker"}),
    ]
    problem = only_problem(make_pack(agents=agents))
    assert "agent 'pair': type='dual_ai' needs side_b" in problem


def test_expose_as_tool_without_tool_description() -> None:
    agents = [
        *base_agents(),
        define_agent(name="desk", side_a={"prompt": "main"}, expose_as_tool=True),
    ]
    assert "agent 'desk': expose_as_tool=True needs a tool_description" in only_problem(
        make_pack(agents=agents)
    )


def test_non_positive_limits() -> None:
    agents = base_agents()
    agents[0] = define_agent(name="main", side_a={"prompt": "main", "max_steps": 0})
    problem = only_problem(make_pack(agents=agents))
    assert "agent 'main' side_a: max_steps is 0" in problem


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


# ---------------------------------------------------------------------------------------------
# Prompt parts
# ---------------------------------------------------------------------------------------------


def test_include_cycle_reports_the_path() -> None:
    prompts = [
        *base_prompts(),
        define_prompt(name="a", model="fast", prompt=[{"type": "include", "prompt": "b"}]),
        define_prompt(
            name="b",
            model="fast",
            prompt=[{"type": "text", "content": "x"}, {"type": "include", "prompt": "c"}],
        ),
        define_prompt(name="c", model="fast", prompt=[{"type": "include", "prompt": "a"}]),
        define_prompt(name="self", model="fast", prompt=[{"type": "include", "prompt": "self"}]),
    ]
    problems = problems_of(make_pack(prompts=prompts))
    assert len(problems) == 2, problems
    assert any("include cycle a -> b -> c -> a" in p for p in problems)
    assert any("include cycle self -> self" in p for p in problems)


def test_include_of_unknown_prompt() -> None:
    prompt = define_prompt(
        name="extra", model="fast", prompt='[{"type": "prompt", "id": "sumarize"}]'
    )
    problem = only_problem(with_prompt(prompt))
    assert "prompt 'extra': includes prompt 'sumarize'" in problem


def test_env_part_must_not_name_a_secret() -> None:
    tools = [
        *base_tools(),
        define_tool(
            name="mail",
            execute=_noop,
            variables=[{"name": "GMAIL_API_KEY", "type": "secret"}, {"name": "LOCATION"}],
        ),
    ]
    prompt = define_prompt(
        name="extra",
        model="fast",
        prompt=[
            {"type": "text", "content": "Near "},
            {"type": "env", "property": "LOCATION"},
            {"type": "env", "property": "GMAIL_API_KEY"},
        ],
    )
    problem = only_problem(with_prompt(prompt, tools=tools))
    assert "env part 'GMAIL_API_KEY' names a secret variable" in problem
    assert "tool 'mail'" in problem


def test_tool_choice_required_needs_tools() -> None:
    prompt = define_prompt(name="extra", model="fast", tool_choice="required")
    assert "tool_choice='required' but the prompt offers no tools" in only_problem(
        with_prompt(prompt)
    )


# ---------------------------------------------------------------------------------------------
# Warnings
# ---------------------------------------------------------------------------------------------


def warnings_for(**fields: Any) -> list[str]:
    pack = make_pack(**fields)
    pack.validate()  # warnings never come with problems here
    return pack.warnings()


def test_dual_ai_without_any_boundary_may_never_end() -> None:
    agents = [
        *base_agents(),
        define_agent(
            name="pair",
            type="dual_ai",
            side_a={"prompt": "worker"},
            side_b={"prompt": "reviewer"},
        ),
    ]
    warnings = warnings_for(agents=agents)
    assert len(warnings) == 1
    assert "agent 'pair'" in warnings[0] and "may never end" in warnings[0]


def test_dual_ai_missing_some_boundaries() -> None:
    agents = base_agents()
    agents[1] = agents[1].model_copy(update={"max_session_turns": None})
    warnings = warnings_for(agents=agents)
    assert len(warnings) == 1
    assert "dual_ai agent has no max_session_turns" in warnings[0]


def test_more_than_eight_tools_warns() -> None:
    many = [tool(f"t{i}") for i in range(9)]
    prompt = define_prompt(name="big", model="fast", tools=[t.name for t in many])
    warnings = warnings_for(prompts=[*base_prompts(), prompt], tools=[*base_tools(), *many])
    assert len(warnings) == 1
    assert "prompt 'big': offers 9 tools" in warnings[0] and "~8" in warnings[0]
    prompt8 = define_prompt(name="big", model="fast", tools=[t.name for t in many[:8]])
    assert warnings_for(prompts=[*base_prompts(), prompt8], tools=[*base_tools(), *many]) == []


def test_side_b_with_the_same_prompt_warns() -> None:
    agents = base_agents()
    agents[1] = agents[1].model_copy(
        update={"side_b": agents[1].side_a.model_copy(update={"session_stop": None})}
    )
    warnings = warnings_for(agents=agents)
    assert any("side_b uses the same prompt as side_a" in w for w in warnings), warnings


def test_side_that_never_stops_warns() -> None:
    agents = base_agents()
    agents[0] = define_agent(name="main", side_a={"prompt": "main", "stop_on_response": False})
    warnings = warnings_for(agents=agents)
    assert len(warnings) == 1 and "side_a: stop_on_response=False" in warnings[0]


def test_long_prompt_warns() -> None:
    prompt = define_prompt(name="essay", model="fast", prompt="line\n" * 200)
    warnings = warnings_for(prompts=[*base_prompts(), prompt])
    assert len(warnings) == 1 and "prompt 'essay': its text is 201 lines long" in warnings[0]


def test_subprompt_without_tool_description_warns() -> None:
    prompts = base_prompts()
    prompts[1] = define_prompt(name="summarize", model="fast", prompt="Summarize.")
    warnings = warnings_for(prompts=prompts)
    assert len(warnings) == 1
    assert "prompt 'summarize': used as a tool by prompt 'main'" in warnings[0]


def test_agent_and_prompt_sharing_a_tool_entry_name_warns() -> None:
    prompts = base_prompts()
    prompts[0] = define_prompt(name="main", model="fast", prompt="You help.", tools=["helper"])
    helper_prompt = define_prompt(name="helper", model="fast", prompt="Help.", tool_description="x")
    helper_agent = define_agent(name="helper", side_a={"prompt": "main"})
    warnings = warnings_for(
        prompts=[*prompts, helper_prompt], agents=[*base_agents(), helper_agent]
    )
    assert len(warnings) == 1
    assert warnings[0].startswith("agent 'helper': prompt 'helper' has the same name")
    assert "runs the prompt as a subprompt, not the agent" in warnings[0]


def test_agent_named_after_its_prompt_alone_does_not_warn() -> None:
    # base_agents() has agent 'main' running prompt 'main', as `sa new` scaffolds it.
    assert warnings_for() == []
