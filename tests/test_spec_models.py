"""Spec models: snake_case in Python, the spec's camelCase JSON on the wire, both ways."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from sa_core import (
    AgentDefinition,
    Message,
    PromptDefinition,
    SubagentToolConfig,
    ToolResult,
    define_agent,
    define_hook,
    define_prompt,
    define_tool,
)
from sa_core.spec import ModelDefinition, PromptToolConfig, SubpromptConfig

AGENT_JSON = {
    "name": "asset_subagent",
    "type": "dual_ai",
    "maxSessionTurns": 40,
    "exposeAsTool": True,
    "toolDescription": "Generate and QA top-down game assets.",
    "sideA": {
        "label": "Worker",
        "prompt": "asset_worker",
        "stopOnResponse": True,
        "sessionFail": {"name": "fail_asset", "messageProperty": "reason", "attachmentsProperty": "attachments"},
    },
    "sideB": {
        "label": "Reviewer",
        "prompt": "asset_reviewer",
        "stopOnResponse": False,
        "sessionStop": {"name": "approve_asset", "messageProperty": "summary", "attachmentsProperty": "attachments"},
        "sessionStatus": "update_asset_status",
    },
    "packageName": "@acme/assets",
    "version": "1.2.0",
    "author": "Acme",
    "license": "MIT",
}


def test_agent_reads_the_spec_example_and_writes_it_back():
    agent = AgentDefinition.model_validate(AGENT_JSON)
    assert agent.side_b.session_stop.message_property == "summary"
    assert agent.side_b.session_status.name == "update_asset_status"
    assert agent.max_session_turns == 40 and agent.package_name == "@acme/assets"
    dumped = agent.model_dump(by_alias=True, exclude_defaults=True, exclude_none=True)
    assert dumped["sideA"]["sessionFail"] == AGENT_JSON["sideA"]["sessionFail"]
    assert dumped["sideB"]["sessionStatus"] == {"name": "update_asset_status"}
    assert AgentDefinition.model_validate(json.loads(json.dumps(dumped))) == agent


def test_defaults_follow_the_spec():
    agent = define_agent(name="a", side_a={"prompt": "p"})
    prompt = define_prompt(name="p", model="m")
    assert agent.type == "ai_human" and agent.side_a.stop_on_response is True and agent.side_b is None
    assert prompt.include_chat is False and prompt.include_past_tools is False and prompt.tool_choice == "auto"


def test_legacy_session_tool_names_map_to_the_new_bindings():
    side = AgentDefinition.model_validate(
        {"name": "a", "sideA": {"prompt": "p", "endSessionTool": "done", "failSessionTool": "give_up"}}
    ).side_a
    assert side.session_stop.name == "done" and side.session_fail.name == "give_up"


def test_prompt_tool_entries_are_classified():
    prompt = PromptDefinition.model_validate(
        {
            "name": "p",
            "model": "m",
            "tools": [
                "search",
                {"name": "summarize", "initUserMessageProperty": "text", "includeErrors": False},
                {"name": "fetch", "env": {"TIMEOUT": "5"}},
                {"name": "researcher", "blocking": False, "resumable": {"receives_messages": "side_b", "maxInstances": 3}},
            ],
        }
    )
    search, summarize, fetch, researcher = prompt.tools
    assert search == "search"
    assert isinstance(summarize, SubpromptConfig) and summarize.include_errors is False
    assert isinstance(fetch, PromptToolConfig) and fetch.env == {"TIMEOUT": "5"}
    assert isinstance(researcher, SubagentToolConfig) and researcher.resumable.receives_messages == "side_b"
    dumped = prompt.model_dump(by_alias=True, exclude_defaults=True)
    assert dumped["tools"][3]["resumable"] == {"receives_messages": "side_b", "maxInstances": 3}


def test_prompt_parts_accept_current_and_legacy_shapes():
    prompt = PromptDefinition.model_validate(
        {
            "name": "p",
            "model": "m",
            "prompt": json.dumps([{"type": "string", "value": "Hi "}, {"type": "prompt", "id": "base"}, {"type": "env", "property": "USER"}]),
        }
    )
    assert [p.type for p in prompt.parts] == ["text", "include", "env"]


def test_model_definition_round_trips_prices_and_options():
    data = {"name": "fast", "provider": "openai", "model": "gpt-4o", "fallbacks": ["slow"], "inputPrice": 2.5,
            "outputPrice": 10, "providerOptions": {"baseUrl": "http://127.0.0.1:9/v1"}, "capabilities": {"supportsImages": False}}
    model = ModelDefinition.model_validate(data)
    assert model.input_price == 2.5 and model.capabilities.supports_images is False
    assert model.model_dump(by_alias=True, exclude_defaults=True)["providerOptions"] == data["providerOptions"]


def test_unknown_fields_are_rejected_with_the_field_named():
    with pytest.raises(PydanticValidationError, match="maxSessionTurn"):
        AgentDefinition.model_validate({"name": "a", "sideA": {"prompt": "p"}, "maxSessionTurn": 3})


def test_tools_dump_their_args_as_json_schema():
    class Args(BaseModel):
        city: str

    tool = define_tool(name="weather", description="w", args=Args, execute=lambda s, a: "x")
    dumped = tool.model_dump(by_alias=True)
    assert dumped["args"]["properties"]["city"]["type"] == "string" and "execute" not in dumped


def test_hook_names_are_checked():
    with pytest.raises(PydanticValidationError):
        define_hook(id="h", hook="before_everything", execute=lambda s, m: m)


def test_message_and_tool_result_carry_every_spec_field():
    message = Message.model_validate(
        {"id": "m1", "role": "tool", "content": "x", "tool_call_id": "c1", "tool_status": "error",
         "subagent_id": "s", "subagent_status": "idle", "depth": 1, "parent_id": "p", "silent": True,
         "metadata": {"status_kind": "subagent_event"}}
    )
    assert message.tool_status == "error" and message.subagent_status == "idle"
    result = ToolResult.model_validate({"status": "error", "error": "x", "error_code": "subagent_env_required", "error_data": {"missing": ["K"]}})
    assert result.error_data == {"missing": ["K"]}
