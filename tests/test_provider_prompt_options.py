"""A prompt's ``provider_options``, as each provider sends them.

Agents run through the public API against a replay server on 127.0.0.1 (the recorded sessions of
``test_provider_agent_runs``); the tests read the request bodies the real provider modules sent.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from replay import Cassette
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
from sa_core.spec import PromptDefinition


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
