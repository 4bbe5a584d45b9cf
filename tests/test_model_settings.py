"""A turn's own model settings (``send_message(model_settings=...)``): checked, applied to that
turn's model calls over the prompt's and the model's values, and sent by every provider."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from replay import env_of, sse_transport

from sa_core import ModelSettings, Pack, define_agent, define_model, define_prompt
from sa_core.engine.model.turnsettings import apply_turn_settings
from sa_core.providers import ProviderMessage, ProviderRequest, ReasoningConfig
from sa_core.spec.modelsettings import check_model_settings
from sa_core.testing import TestProvider, TestScript
from sa_providers._chat_completions import ChatDialect, chat_body
from sa_providers._responses import responses_body
from sa_providers.anthropic import anthropic_body
from sa_providers.google import gemini_body
from sa_providers.openai_compatible import OpenAICompatibleProvider

ASKED = {"temperature": 0.9, "max_tokens": 50, "seed": 7}


def pack_with(provider: str = "test", **model_fields: Any) -> Pack:
    return Pack(
        name="s",
        agents=[define_agent(name="a", side_a={"prompt": "main"})],
        prompts=[define_prompt(name="main", model="fast", prompt="Answer.", include_chat=True)],
        models=[define_model(name="fast", provider=provider, model="m", **model_fields)],
    )


def test_settings_are_checked_naming_every_problem() -> None:
    assert check_model_settings({"temperature": 1, "stop": "END", "top_p": None}) == {
        "temperature": 1.0, "stop": ["END"],
    }  # fmt: skip
    assert check_model_settings(ModelSettings(seed=3)) == {"seed": 3}
    with pytest.raises(ValueError) as problems:
        check_model_settings(
            {"temperature": 3, "max_tokens": 0, "seed": True, "reasoning_effort": "max", "x": 1}
        )
    message = str(problems.value)
    for expected in (
        "model_settings.temperature: Input should be less than or equal to 2 (got 3)",
        "model_settings.max_tokens: Input should be greater than or equal to 1 (got 0)",
        "model_settings.seed: Input should be a valid integer (got True)",
        "model_settings.reasoning_effort: Input should be 'low', 'medium' or 'high'",
        "model_settings.x: unknown setting (the settings are temperature, top_p, max_tokens",
    ):
        assert expected in message
    with pytest.raises(ValueError, match="model_settings must be a dict"):
        check_model_settings([("temperature", 1)])


@pytest.mark.asyncio
async def test_settings_apply_to_their_turn_only(sa_runtime_factory: Any) -> None:
    provider = TestProvider(TestScript().add_text_response("one").add_text_response("two"))
    pack = pack_with(max_tokens=100)
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as rt:
        thread = await rt.create_thread("a")
        sent = await thread.send_message("Hi", model_settings={**ASKED, "stop": "END"})
        await thread.send_message("Again")
    assert sent.metadata == {"model_settings": {**ASKED, "stop": ["END"]}}
    first, second = provider.requests
    assert (first.temperature, first.max_tokens, first.seed, first.stop) == (0.9, 50, 7, ["END"])
    assert (second.temperature, second.max_tokens, second.seed, second.stop) == (
        None, 100, None, None,
    )  # fmt: skip


@pytest.mark.asyncio
async def test_bad_settings_are_refused_before_anything_is_stored(sa_runtime_factory: Any) -> None:
    provider = TestProvider(TestScript())
    async with sa_runtime_factory(packs=[pack_with()], providers={"test": provider}) as rt:
        thread = await rt.create_thread("a")
        with pytest.raises(ValueError, match="temperature.*top_p"):
            await thread.send_message("Hi", model_settings={"temperature": -1, "top_p": 2})
        assert (await thread.get_messages()).messages == []
    assert provider.requests == []


@pytest.mark.asyncio
async def test_a_queued_message_keeps_its_settings(sa_runtime_factory: Any) -> None:
    script = TestScript().add_text_response("first", delay=0.3).add_text_response("second")
    provider = TestProvider(script)
    async with sa_runtime_factory(packs=[pack_with()], providers={"test": provider}) as rt:
        thread = await rt.create_thread("a")
        await thread.send_message("one", wait=False)
        while not provider.requests:  # the first turn's model call is under way
            await asyncio.sleep(0.01)
        await thread.send_message("two", wait=False, model_settings={"top_p": 0.5})
        await rt.wait_idle(timeout=10)
    assert [r.top_p for r in provider.requests] == [None, 0.5]


@pytest.mark.asyncio
async def test_turn_settings_win_over_provider_options_on_the_wire(
    sa_runtime_factory: Any,
) -> None:
    seen: list[httpx.Request] = []
    chunk = {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}
    events = [f"data: {json.dumps(chunk)}", "data: [DONE]"]
    wire = OpenAICompatibleProvider(
        name="wire", base_url="http://wire.test/v1", transport=sse_transport(events, seen=seen)
    )
    options = {"temperature": 0.3, "max_completion_tokens": 80, "logit_bias": {"1": 2}}
    pack = pack_with("wire", max_tokens=100, provider_options=options)
    async with sa_runtime_factory(packs=[pack], providers={"wire": wire}) as rt:
        thread = await rt.create_thread("a")
        await thread.send_message("Hi", model_settings=ASKED)
        await thread.send_message("Again")
    asked, plain = (json.loads(r.content) for r in seen)
    assert {k: asked.get(k) for k in ("temperature", "max_tokens", "seed")} == ASKED
    assert "max_completion_tokens" not in asked and asked["logit_bias"] == {"1": 2}
    assert plain["temperature"] == 0.3 and plain["max_completion_tokens"] == 80
    assert "seed" not in plain


def request(**fields: Any) -> ProviderRequest:
    return ProviderRequest(
        model="m", messages=[ProviderMessage("user", "Hi")], env=env_of(), **fields
    )


SETTINGS = {
    "temperature": 0.5, "top_p": 0.8, "seed": 3, "stop": ["END"], "frequency_penalty": 0.1,
    "presence_penalty": -0.1, "verbosity": "low", "max_tokens": 40, "reasoning_effort": "high",
}  # fmt: skip


def applied(**fields: Any) -> ProviderRequest:
    built = request(**fields)
    apply_turn_settings(built, SETTINGS)
    return built


def test_each_provider_sends_the_settings_its_api_takes() -> None:
    chat = chat_body(applied(), ChatDialect(), stream=False)
    assert {k: chat.get(k) for k in SETTINGS} == SETTINGS
    responses = responses_body(applied(), stream=False)
    assert (responses["temperature"], responses["top_p"]) == (0.5, 0.8)
    assert responses["text"] == {"verbosity": "low"} and responses["max_output_tokens"] == 40
    assert responses["reasoning"]["effort"] == "high"
    assert not {"seed", "stop", "frequency_penalty", "presence_penalty"} & set(responses)
    anthropic = anthropic_body(applied(), stream=False)
    assert (anthropic["temperature"], anthropic["top_p"]) == (0.5, 0.8)
    assert anthropic["stop_sequences"] == ["END"] and "seed" not in anthropic
    generation = gemini_body(applied())["generationConfig"]
    assert {k: generation[k] for k in ("temperature", "topP", "seed", "stopSequences")} == {
        "temperature": 0.5, "topP": 0.8, "seed": 3, "stopSequences": ["END"],
    }  # fmt: skip
    assert (generation["frequencyPenalty"], generation["presencePenalty"]) == (0.1, -0.1)
    assert generation["maxOutputTokens"] == 40


def test_a_request_without_settings_sends_none_of_them() -> None:
    chat = chat_body(request(), ChatDialect(), stream=False)
    assert not set(SETTINGS) & set(chat)
    assert "generationConfig" not in gemini_body(request())
    assert "text" not in responses_body(request(), stream=False)


def test_settings_replace_the_prompts_reasoning_and_matching_options() -> None:
    options = {
        "temperature": 0.1, "generationConfig": {"topP": 0.2, "candidateCount": 1},
        "reasoning": {"effort": "low", "summary": "auto"}, "text": {"verbosity": "high"},
        "stop_sequences": ["x"], "base_url": "http://x",
    }  # fmt: skip
    built = applied(reasoning=ReasoningConfig(None, 4000, exclude=True), provider_options=options)
    assert built.reasoning == ReasoningConfig("high", None, exclude=True)
    assert built.provider_options == {
        "generationConfig": {"candidateCount": 1}, "reasoning": {"summary": "auto"},
        "text": {}, "base_url": "http://x",
    }  # fmt: skip
    assert options["temperature"] == 0.1  # the definition's own dict is left alone


@pytest.mark.asyncio
async def test_the_messages_api_takes_model_settings(tmp_path: Any) -> None:
    from sa_core import Runtime
    from sa_core.server import create_app
    from sa_core.server.testing import live_server

    provider = TestProvider(TestScript().add_text_response("one"))
    runtime = Runtime(
        packs=[pack_with()],
        providers={"test": provider},
        database_url=f"sqlite:///{tmp_path / 'sa.db'}",
        load_entrypoints=False,
    )
    async with live_server(create_app(runtime)) as base:
        key, _ = await runtime.store.create_api_key("t")
        thread = await runtime.create_thread("a")
        url = f"{base}/api/packages/s/threads/{thread.thread_id}/messages"
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http:
            bad = await http.post(
                url, json={"content": "Hi", "model_settings": {"seed": "x", "top_k": 3}}
            )
            posted = await http.post(url, json={"content": "Hi", "model_settings": ASKED})
            await runtime.wait_idle(timeout=10)
    assert bad.status_code == 400
    assert "model_settings.seed" in bad.text and "model_settings.top_k" in bad.text
    assert posted.status_code == 202, posted.text
    assert (provider.requests[0].temperature, provider.requests[0].seed) == (0.9, 7)
