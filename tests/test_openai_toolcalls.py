"""Client tools in OpenAI-compatible request bodies: tools, tool_choice, calls and results."""

from __future__ import annotations

from typing import Any

import pytest

from sa_core import Pack, define_agent, define_model, define_prompt
from sa_core.errors import ClientToolsError
from sa_core.registry import Registry
from sa_core.server.protocols.openai.errors import OpenAIError
from sa_core.server.protocols.openai.models import Model
from sa_core.server.protocols.openai.requests import chat_request
from sa_core.server.protocols.openai.respparse import responses_request
from sa_core.server.protocols.openai.toolcalls import history_messages, trailing_results
from sa_core.server.protocols.openai.toolturns import tools_error

PACK = Pack(
    name="desk",
    entry_agents=["triage"],
    agents=[define_agent(name="triage", side_a={"prompt": "main"})],
    prompts=[define_prompt(name="main", model="m", prompt="Help.")],
    models=[define_model(name="m", provider="test", model="x")],
)
MODEL = Model(Registry([PACK]).scopes["desk"], "triage")
WEATHER = {"name": "get_weather", "parameters": {"type": "object"}}
CALL = {
    "id": "c1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "C"}'},
}


def chat(**fields: Any) -> Any:
    body = {"model": "desk/triage", "messages": [{"role": "user", "content": "Hi"}], **fields}
    return chat_request(body, "apply", MODEL)


def responses(**fields: Any) -> Any:
    return responses_request({"model": "desk/triage", "input": "Hi", **fields}, "apply", MODEL)


def refusal(call: Any, **fields: Any) -> OpenAIError:
    with pytest.raises(OpenAIError) as caught:
        call(**fields)
    assert caught.value.status == 400
    return caught.value


def test_both_apis_declare_function_tools_and_a_tool_choice() -> None:
    data = chat(
        tools=[{"type": "function", "function": {**WEATHER, "strict": True}}],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    assert data.client.tools == [{**WEATHER, "strict": True}]
    assert data.client.choice == {"name": "get_weather"}
    answer = responses(tools=[{"type": "function", **WEATHER}], tool_choice="required")
    assert (answer.client.tools, answer.client.choice) == ([WEATHER], "required")
    assert chat().client.declared is False
    assert chat(tools=[], tool_choice="none").client.choice == "none"


def test_tools_other_than_functions_and_unknown_choices_are_refused_together() -> None:
    error = refusal(
        responses,
        tools=[{"type": "function", **WEATHER}, {"type": "file_search"}],
        tool_choice={"type": "web_search"},
    )
    assert error.param == "tools[1].type,tool_choice"
    assert refusal(chat, tool_choice={"type": "function"}).param == "tool_choice"
    legacy = refusal(chat, functions=[WEATHER])
    assert (legacy.param, legacy.code) == ("functions", "unsupported")


def test_a_conversation_with_calls_reduces_to_the_same_pairs_in_both_apis() -> None:
    asked = {"role": "user", "content": "Weather?"}
    said = chat(
        messages=[
            asked,
            {"role": "assistant", "content": "Let me look.", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "c1", "content": "Sunny"},
        ]
    )
    given = responses(
        input=[
            asked,
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "Let me look."}]},
            {"type": "function_call", "call_id": "c1", "name": "get_weather",
             "arguments": '{"unit":"C","city":"Paris"}'},  # the same value, written otherwise
            {"type": "function_call_output", "call_id": "c1", "output": "Sunny"},
        ]
    )  # fmt: skip
    assert said.messages == given.items
    known, results = trailing_results(said.messages) or (0, {})
    assert (known, results) == (2, {"c1": "Sunny"})
    assert history_messages(said.messages) == [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "c1", "function": {"name": "get_weather",
                                      "arguments": '{"city":"Paris","unit":"C"}'}}]},
        {"role": "tool", "content": "Sunny", "tool_call_id": "c1", "name": "get_weather"},
    ]  # fmt: skip


def test_calls_need_their_results_right_after_them() -> None:
    missing = refusal(
        chat,
        messages=[
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "tool_calls": [CALL]},
            {"role": "user", "content": "Never mind"},
        ],
    )
    assert missing.param == "messages[1]" and "c1" in missing.message
    stray = refusal(chat, messages=[{"role": "tool", "tool_call_id": "c9", "content": "x"}])
    assert stray.param == "messages[0]"
    outputs = responses(
        input=[{"type": "function_call_output", "call_id": "c1", "output": "Sunny"}],
        previous_response_id="resp_x",
    )
    assert trailing_results(outputs.items) is None  # no call before: the id names the turn


def test_engine_problems_name_each_apis_field() -> None:
    problems = ClientToolsError(
        [("client_tools", "off"), ("client_tools[1].name", "taken"), ("tool_choice", "unknown")]
    )
    chat_error = tools_error(problems, chat=True)
    assert chat_error.param == "tools,tools[1].function.name,tool_choice"
    assert "'tools[1].function.name': taken" in chat_error.message
    assert tools_error(problems, chat=False).param == "tools,tools[1].name,tool_choice"
