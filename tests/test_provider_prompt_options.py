"""A prompt's ``provider_options`` and ``parallel_tool_calls``, as each provider sends them.

Agents run through the public API against a replay server on 127.0.0.1 (the recorded sessions of
``test_provider_agent_runs``); the tests read the request bodies the real provider modules sent.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from replay import WEATHER as WEATHER_TOOL
from replay import Cassette, env_of, json_transport
from test_provider_agent_runs import (
    ADD,
    CASES,
    MULTIPLY,
    WEATHER,
    Case,
    ReplayServer,
    recorded_prompt,
)

from sa_core import Pack, Runtime, define_agent, define_model, define_prompt
from sa_core.providers import ProviderMessage, ProviderRequest
from sa_core.spec import PromptDefinition
from sa_providers.openai import OpenAIProvider
from sa_providers.openai_compatible import ChatDialect, OpenAICompatibleProvider


async def run_agent(
    spec: Case, tmp_path: Any, *, model_options: dict[str, Any] | None = None, **prompt_fields: Any
) -> list[dict[str, Any]]:
    """Run the recorded session of ``spec`` through an agent; return the bodies sent."""
    cassette = Cassette.load(spec.cassette)
    system, user = recorded_prompt(cassette)
    tools = [ADD, MULTIPLY] if spec.parallel else [WEATHER]
    with ReplayServer(cassette) as server:
        model = define_model(
            name="main_model",
            provider=spec.provider,
            model=spec.model,
            provider_options={
                "base_url": server.url + spec.base_path,
                **spec.options,
                **(model_options or {}),
            },
        )
        prompt = define_prompt(
            name="main",
            model="main_model",
            prompt=system,
            include_chat=True,
            tools=[t.name for t in tools],
            **prompt_fields,
        )
        pack = Pack(
            name="runs",
            agents=[define_agent(name="assistant", side_a={"prompt": "main"})],
            prompts=[prompt],
            models=[model],
            tools=tools,
        )
        async with Runtime(
            packs=[pack],
            database_url=f"sqlite:///{tmp_path}/run.db",
            env={spec.key: "replay-key-123"},
        ) as runtime:
            thread = await runtime.create_thread("assistant")
            await thread.send_message(user)
            roles = [m.role for m in (await thread.get_messages()).messages]
    assert roles[-1] == "assistant" and "tool" in roles, roles
    return server.bodies


# -- provider_options on prompts ------------------------------------------------------------------


@pytest.mark.asyncio
async def test_prompt_provider_options_override_the_models_key_by_key_on_the_wire(tmp_path):
    bodies = await run_agent(
        CASES["openai-chat"],
        tmp_path,
        model_options={"temperature": 0.7, "top_p": 0.5, "metadata": {"team": "a", "tier": "gold"}},
        provider_options={"temperature": 0.1, "metadata": {"team": "b"}},
    )
    assert len(bodies) == 2
    for body in bodies:  # every model call of the prompt, the tool loop's second one too
        assert body["temperature"] == 0.1  # the prompt wins
        assert body["top_p"] == 0.5  # the model's key the prompt does not set stays
        assert body["metadata"] == {"team": "b"}  # a key is replaced whole, not merged into


@pytest.mark.asyncio
async def test_prompt_provider_options_can_select_the_responses_api(tmp_path):
    spec = CASES["openai-responses"]
    chat_model = Case(spec.cassette, spec.provider, spec.model, spec.key, spec.base_path)
    bodies = await run_agent(chat_model, tmp_path, provider_options={"api": "responses"})
    assert "input" in bodies[0] and "messages" not in bodies[0]  # sent to /responses


def test_prompt_provider_options_read_camel_case_json_and_write_it_back():
    prompt = PromptDefinition.model_validate(
        {"name": "main", "model": "fast", "providerOptions": {"response_format": {"type": "json"}}}
    )
    assert prompt.provider_options == {"response_format": {"type": "json"}}
    assert prompt.model_dump(by_alias=True)["providerOptions"] == {
        "response_format": {"type": "json"}
    }
    assert define_prompt(name="p", model="fast").provider_options == {}


def test_prompt_provider_options_that_are_not_an_object_fail_naming_the_field():
    with pytest.raises(ValidationError) as caught:
        define_prompt(name="p", model="fast", provider_options=["temperature", 0.1])
    assert "provider_options" in str(caught.value)


# -- parallel_tool_calls: false unless the prompt allows parallel calls ---------------------------


def parallel_flag(provider: str, body: dict[str, Any]) -> Any:
    """What a request body says about parallel tool calls, in its provider's terms."""
    if provider == "anthropic":
        return body["tool_choice"].get("disable_parallel_tool_use", "absent")
    return body.get("parallel_tool_calls", "absent")


# what each wire protocol carries for a prompt that does not allow (False) / allows (True)
# parallel calls: Anthropic's flag is inverted, Gemini's generateContent has no such field
WIRE = {
    "openai-chat": {False: False, True: True},
    "openai-responses": {False: False, True: True},
    "anthropic": {False: True, True: False},
    "google": {False: "absent", True: "absent"},
    "openai-compatible-groq": {False: False, True: True},
    "openrouter": {False: False, True: True},
}


@pytest.mark.asyncio
@pytest.mark.parametrize("name", sorted(WIRE))
async def test_prompts_ask_for_one_tool_call_at_a_time_unless_they_allow_parallel_calls(
    name: str, tmp_path: Any
) -> None:
    spec = CASES[name]
    default = await run_agent(spec, tmp_path / "default")
    allowed = await run_agent(spec, tmp_path / "allowed", parallel_tool_calls=True)
    assert [parallel_flag(spec.provider, b) for b in default] == [WIRE[name][False]] * 2
    assert [parallel_flag(spec.provider, b) for b in allowed] == [WIRE[name][True]] * 2


def _chat_body(provider: Any, request: ProviderRequest) -> dict[str, Any]:
    body: dict[str, Any] = provider.chat_body(request, stream=False)
    return body


def _chat_request(model: str, **fields: Any) -> ProviderRequest:
    return ProviderRequest(
        model=model,
        messages=[ProviderMessage("user", "Hi")],
        env=env_of(OPENAI_API_KEY="k"),
        **fields,
    )


def test_parallel_tool_calls_is_sent_only_with_tools():
    provider = OpenAIProvider()
    without = _chat_body(provider, _chat_request("gpt-4o-mini", parallel_tool_calls=False))
    assert "parallel_tool_calls" not in without and "tools" not in without


@pytest.mark.parametrize(
    ("model", "sent"), [("o3-mini", False), ("o4-mini", False), ("gpt-5", True), ("gpt-4.1", True)]
)
def test_openai_o_series_chat_requests_leave_out_the_parallel_field_they_reject(model, sent):
    request = _chat_request(model, tools=[WEATHER_TOOL], parallel_tool_calls=False)
    assert ("parallel_tool_calls" in _chat_body(OpenAIProvider(), request)) is sent


@pytest.mark.asyncio
async def test_a_dialect_can_leave_out_parallel_tool_calls_for_servers_that_reject_it():
    seen: list[httpx.Request] = []
    answer = {
        "choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]
    }
    provider = OpenAICompatibleProvider(
        name="strict",
        base_url="http://strict.test/v1",
        dialect=ChatDialect(send_parallel_tool_calls=False),
        transport=json_transport(answer, seen=seen),
    )
    await provider.generate(_chat_request("m", tools=[WEATHER_TOOL], parallel_tool_calls=False))
    body = json.loads(seen[0].content)
    assert "tools" in body and "parallel_tool_calls" not in body
