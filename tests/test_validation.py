"""Pack.validate() / validate_pack: every check is reported, all at once: names, references,
lifecycle names, agents and prompt parts (subagents: test_validation_subagents.py; warnings:
test_validation_warnings.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from validation_kit import (
    base_agents,
    base_prompts,
    base_tools,
    make_pack,
    noop,
    only_problem,
    problems_of,
    tool,
    with_main_tools,
    with_prompt,
)

from sa_core.errors import PackValidationError
from sa_core.spec import (
    Pack,
    define_agent,
    define_effect,
    define_hook,
    define_model,
    define_prompt,
    define_thread_endpoint,
    define_tool,
)
from sa_core.spec.validation import validate_pack

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
                define_hook(id="trim", hook="filter_messages", execute=noop),
                define_hook(id="trim", hook="after_create_message", execute=noop),
            ],
            "hook id 'trim' is defined 2 times",
        ),
        (
            "effects",
            lambda: [define_effect(name="ping", execute=noop)] * 2,
            "effect 'ping' is defined 2 times",
        ),
        (
            "endpoints",
            lambda: [
                define_thread_endpoint(path="items/{item_id}", method="POST", handler=noop),
                define_thread_endpoint(path="/items/{id}/", method="POST", handler=noop),
                define_thread_endpoint(path="items/{id}", method="GET", handler=noop),
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
            execute=noop,
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
