"""Structured output on each wire protocol, over real HTTP to a replay server on 127.0.0.1.

The recorded sessions of ``test_provider_agent_runs`` are replayed with their answer text
replaced by JSON (Anthropic's recorded tool call becomes the ``final_answer`` call), so each
provider module sends its native schema field (or the forced tool) and parses a real-shaped
stream; the tests read the request bodies and the validated ``output``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import BaseModel
from replay import Cassette
from test_provider_agent_runs import ReplayServer

from sa_core import Pack, Runtime, define_agent, define_model, define_prompt
from sa_core.spec.schemas import json_schema_of


class Person(BaseModel):
    name: str
    age: int


CLOSED = {
    "type": "object",
    "properties": {"location": {"type": "string"}},
    "required": ["location"],
    "additionalProperties": False,
}
CLOSED_PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
PERSON_SCHEMA = json_schema_of(Person)  # as sent: pydantic's schema without its title
FIRST, SECOND = '{\\"name\\":\\"Ada\\",', '\\"age\\":36}'


def as_json_answer(path: str) -> Cassette:
    """A recorded simple answer ("Olá!", streamed as "Olá" + "!") that says JSON instead."""
    cassette = Cassette.load(path)
    body = cassette.interactions[0].body
    body = body.replace("Olá!", FIRST + SECOND).replace("Olá", FIRST)
    body = body.replace('"content":"!"', f'"content":"{SECOND}"')
    body = body.replace('"delta":"!"', f'"delta":"{SECOND}"')
    interaction = dataclasses.replace(cassette.interactions[0], body=body)
    return dataclasses.replace(cassette, interactions=(interaction,))


async def run(
    cassette: Cassette, provider: str, model: str, key: str, base: str, schema: Any, **opts: Any
) -> tuple[list[dict[str, Any]], Any]:
    """Run one structured turn against the replay; return the bodies sent and the answer."""
    with ReplayServer(cassette) as server:
        pack = Pack(
            name="structured",
            agents=[define_agent(name="assistant", side_a={"prompt": "main"})],
            prompts=[
                define_prompt(
                    name="main",
                    model="m",
                    prompt="Answer.",
                    include_chat=True,
                    output_schema=schema,
                )
            ],
            models=[
                define_model(
                    name="m",
                    provider=provider,
                    model=model,
                    provider_options={"base_url": server.url + base, **opts},
                )
            ],
        )
        async with Runtime(
            packs=[pack], database_url="sqlite:///:memory:", env={key: "replay-key-123"}
        ) as runtime:
            thread = await runtime.create_thread("assistant")
            await thread.send_message("Who?")
            answer = (await thread.get_messages()).messages[-1]
    return server.bodies, answer


@pytest.mark.asyncio
async def test_openai_chat_sends_response_format_json_schema():
    cassette = as_json_answer("TestOpenAICommon/openai-gpt-4o-mini/simple_streaming.yaml")
    bodies, answer = await run(cassette, "openai", "gpt-4o-mini", "OPENAI_API_KEY", "/v1", Person)
    assert bodies[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "main", "schema": PERSON_SCHEMA, "strict": False},
    }
    assert "tools" not in bodies[0]
    assert answer.metadata["output"] == {"name": "Ada", "age": 36}


@pytest.mark.asyncio
async def test_openai_responses_sends_text_format_json_schema():
    cassette = as_json_answer("TestOpenAIResponsesCommon/openai-gpt-4o/simple_streaming.yaml")
    bodies, answer = await run(
        cassette, "openai", "gpt-4o", "OPENAI_API_KEY", "/v1", CLOSED_PERSON, api="responses"
    )
    assert bodies[0]["text"]["format"] == {
        "type": "json_schema",
        "name": "main",
        "schema": CLOSED_PERSON,
        "strict": True,  # closed, every property required: OpenAI's strict mode applies
    }
    assert answer.metadata["output"] == {"name": "Ada", "age": 36}


@pytest.mark.asyncio
async def test_gemini_sends_response_json_schema():
    cassette = as_json_answer("TestGoogleCommon/gemini-2.5-flash/simple_streaming.yaml")
    bodies, answer = await run(
        cassette, "google", "gemini-2.5-flash", "GOOGLE_API_KEY", "/v1beta", Person
    )
    generation = bodies[0]["generationConfig"]
    assert generation["responseMimeType"] == "application/json"
    assert generation["responseJsonSchema"] == PERSON_SCHEMA
    assert "tools" not in bodies[0]
    assert answer.metadata["output"] == {"name": "Ada", "age": 36}


@pytest.mark.asyncio
async def test_anthropic_gets_the_forced_final_answer_tool():
    cassette = Cassette.load("TestAnthropicCommon/claude-sonnet-4/tool_streaming.yaml")
    first = cassette.interactions[0]
    body = first.body.replace('"name":"weather"', '"name":"final_answer"')
    cassette = dataclasses.replace(cassette, interactions=(dataclasses.replace(first, body=body),))
    bodies, answer = await run(
        cassette, "anthropic", "claude-sonnet-4-20250514", "ANTHROPIC_API_KEY", "/v1", CLOSED
    )
    choice = bodies[0]["tool_choice"]
    assert choice["type"] == "tool" and choice["name"] == "final_answer"
    assert [t["name"] for t in bodies[0]["tools"]] == ["final_answer"]
    assert bodies[0]["tools"][0]["input_schema"] == CLOSED
    assert answer.metadata["output"] == {"location": "Florence,Italy"}
    assert not answer.tool_calls


def test_gemini_with_function_tools_gets_the_final_answer_tool_instead():
    from sa_core.engine.model.structured import apply_to_request, output_schema_for
    from sa_core.providers import ProviderMessage, ProviderRequest, ProviderTool
    from sa_providers.google import GoogleProvider, gemini_body

    prompt = define_prompt(name="main", model="m", output_schema=Person)
    weather = ProviderTool("weather", "Weather.", {"type": "object", "properties": {}})
    request = ProviderRequest("gemini-2.5-flash", [ProviderMessage("user", "Hi")], [weather])
    apply_to_request(GoogleProvider(), request, output_schema_for(prompt))
    body = gemini_body(request)
    assert "generationConfig" not in body  # no responseMimeType beside function declarations
    names = [d["name"] for d in body["tools"][0]["functionDeclarations"]]
    assert names == ["weather", "final_answer"]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
