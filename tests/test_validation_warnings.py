"""Pack warnings: what validates but may not do what its author meant."""

from __future__ import annotations

from typing import Any

from validation_kit import (
    base_agents,
    base_prompts,
    base_tools,
    make_pack,
    tool,
)

from sa_core.spec import (
    define_agent,
    define_prompt,
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
