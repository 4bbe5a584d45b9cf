"""The ``google`` provider: Gemini generateContent, replayed from recorded traffic."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from replay import (
    WEATHER,
    Cassette,
    Replay,
    assert_same_requests,
    env_of,
    failing_transport,
    first_request,
    json_transport,
    run_conversation,
)

from sa_core.errors import ProviderError
from sa_core.providers import (
    ProviderImage,
    ProviderMessage,
    ProviderRequest,
    ProviderTool,
    ProviderToolCall,
    ReasoningConfig,
)
from sa_providers._gemini_schema import gemini_schema
from sa_providers.google import GoogleProvider

COMMON = "TestGoogleCommon/gemini-2.5-flash"
THINKING = "TestGoogleThinking/gemini-3-pro-preview"
KEY = "AIza-SECRET-0123456789"


def _request(**overrides: Any) -> ProviderRequest:
    base = ProviderRequest(
        model="gemini-2.5-flash",
        messages=[ProviderMessage("system", "Be brief."), ProviderMessage("user", "Hi")],
        env=env_of(GOOGLE_API_KEY=KEY),
    )
    for name, value in overrides.items():
        setattr(base, name, value)
    return base


def _answer(parts: list[dict[str, Any]], finish: str = "STOP", **extra: Any) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish}],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2},
        **extra,
    }


async def _sent_body(request: ProviderRequest) -> dict[str, Any]:
    seen: list[httpx.Request] = []
    provider = GoogleProvider(transport=json_transport(_answer([{"text": "ok"}]), seen=seen))
    await provider.generate(request)
    body: dict[str, Any] = json.loads(seen[0].content)
    return body


# ---------------------------------------------------------------------------------------------
# Recorded traffic
# ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("scenario", ["multi_tool", "multi_tool_streaming"])
async def test_calls_without_ids_get_their_own_used_again_in_the_results(scenario: str) -> None:
    # the replay itself, for every scenario: test_provider_conformance.py
    cassette = Cassette.load(f"{COMMON}/{scenario}.yaml")
    replay = Replay(cassette)
    responses = await run_conversation(
        GoogleProvider(transport=replay.transport),
        first_request(cassette),
        stream=scenario.endswith("streaming"),
    )
    first = responses[0]
    assert [c.name for c in first.tool_calls] == ["add", "multiply"]
    assert first.finish_reason == "tool_calls"
    # Gemini 2.5 sends calls without ids: each gets its own, used again in the results.
    assert len({c.id for c in first.tool_calls}) == 2
    results = replay.sent_bodies[1]["contents"][2]["parts"]
    assert [r["functionResponse"]["id"] for r in results] == [c.id for c in first.tool_calls]
    assert [r["functionResponse"]["name"] for r in results] == ["add", "multiply"]


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True])
async def test_thought_signatures_round_trip_through_tool_calls(stream: bool) -> None:
    name = "thinking-streaming" if stream else "thinking"
    cassette = Cassette.load(f"{THINKING}/{name}.yaml")
    replay = Replay(cassette)
    request = first_request(cassette, reasoning=ReasoningConfig(effort="high"))
    responses = await run_conversation(
        GoogleProvider(transport=replay.transport), request, stream=stream
    )
    assert_same_requests(replay)
    call = responses[0].tool_calls[0]
    signature = (call.extra_content or {})["google"]["thought_signature"]
    sent_call = replay.sent_bodies[1]["contents"][1]["parts"][0]
    assert sent_call["thoughtSignature"] == signature
    assert sent_call["functionCall"]["id"] == call.id
    assert replay.sent_bodies[0]["generationConfig"]["thinkingConfig"] == {
        "includeThoughts": True,
        "thinkingLevel": "HIGH",
    }
    assert responses[0].usage.reasoning_tokens > 0
    if not stream:
        assert responses[0].reasoning and "Florence" in responses[0].reasoning
        # The final answer's text part carries a signature too; it is kept for the next turn.
        details = responses[-1].reasoning_details or []
        assert details[0]["format"] == "google-gemini-v1"


@pytest.mark.asyncio
async def test_user_images_are_sent_inline() -> None:
    cassette = Cassette.load("TestImageUploadAgent/gemini-2.5-pro.yaml")
    replay = Replay(cassette)
    response = await GoogleProvider(transport=replay.transport).generate(first_request(cassette))
    assert_same_requests(replay)
    assert response.content and "star" in response.content
    assert response.usage.reasoning_tokens == 641
    assert response.usage.completion_tokens == 86 + 641


@pytest.mark.asyncio
async def test_the_key_travels_in_a_header_never_in_the_url() -> None:
    seen: list[httpx.Request] = []
    provider = GoogleProvider(transport=json_transport(_answer([{"text": "ok"}]), seen=seen))
    await provider.generate(_request(model="models/gemini-2.5-pro"))
    assert seen[0].headers["x-goog-api-key"] == KEY
    assert KEY not in str(seen[0].url)
    assert seen[0].url.path == "/v1beta/models/gemini-2.5-pro:generateContent"


# ---------------------------------------------------------------------------------------------
# Request mapping
# ---------------------------------------------------------------------------------------------


def test_json_schema_is_converted_to_geminis_dialect() -> None:
    schema = {
        "type": "object",
        "additionalProperties": False,
        "$schema": "http://json-schema.org/draft-07/schema#",
        "properties": {
            "name": {"type": ["string", "null"], "format": "email", "default": "x"},
            "when": {"type": "string", "format": "date-time"},
            "kind": {"const": "a"},
            "tags": {"type": "array", "items": {"anyOf": [{"type": "integer"}, {"type": "null"}]}},
            "either": {"anyOf": [{"type": "string"}, {"type": "number"}]},
        },
        "required": ["name"],
    }
    assert gemini_schema(schema) == {
        "type": "OBJECT",
        "properties": {
            "name": {"type": "STRING", "nullable": True},
            "when": {"type": "STRING", "format": "date-time"},
            "kind": {"enum": ["a"]},
            "tags": {"type": "ARRAY", "items": {"type": "INTEGER", "nullable": True}},
            "either": {"anyOf": [{"type": "STRING"}, {"type": "NUMBER"}]},
        },
        "required": ["name"],
    }


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("choice", "config"),
    [
        ("auto", {"mode": "AUTO"}),
        ("none", {"mode": "NONE"}),
        ("required", {"mode": "ANY"}),
        ({"name": "weather"}, {"mode": "ANY", "allowedFunctionNames": ["weather"]}),
    ],
)
async def test_tool_choice_is_mapped(choice: Any, config: dict[str, Any]) -> None:
    no_args = ProviderTool("now", "The time", {"type": "object", "properties": {}})
    body = await _sent_body(_request(tools=[WEATHER, no_args], tool_choice=choice))
    assert body["toolConfig"] == {"functionCallingConfig": config}
    declarations = body["tools"][0]["functionDeclarations"]
    assert declarations[1] == {"name": "now", "description": "The time"}


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("model", "reasoning", "thinking"),
    [
        (
            "gemini-2.5-flash",
            ReasoningConfig(effort="low"),
            {"includeThoughts": True, "thinkingBudget": 1024},
        ),
        (
            "gemini-2.5-pro",
            ReasoningConfig(max_tokens=128),
            {"includeThoughts": True, "thinkingBudget": 128},
        ),
        (
            "gemini-3-pro-preview",
            ReasoningConfig(effort="low", exclude=True),
            {"includeThoughts": False, "thinkingLevel": "LOW"},
        ),
    ],
)
async def test_reasoning_becomes_a_thinking_config(
    model: str, reasoning: ReasoningConfig, thinking: dict[str, Any]
) -> None:
    body = await _sent_body(_request(model=model, reasoning=reasoning, max_tokens=99))
    assert body["generationConfig"] == {"maxOutputTokens": 99, "thinkingConfig": thinking}


@pytest.mark.asyncio
async def test_provider_options_deep_merge_into_the_body() -> None:
    options = {"generationConfig": {"temperature": 0.1}, "safetySettings": []}
    body = await _sent_body(_request(max_tokens=5, provider_options=options))
    assert body["generationConfig"] == {"maxOutputTokens": 5, "temperature": 0.1}
    assert body["safetySettings"] == []


@pytest.mark.asyncio
async def test_tool_results_find_their_function_name_from_the_call() -> None:
    image = ProviderImage("aGVsbG8=", "image/png")
    messages = [
        ProviderMessage("user", "go"),
        ProviderMessage("assistant", "calling", tool_calls=[ProviderToolCall("c1", "look", {})]),
        ProviderMessage("tool", "found", tool_call_id="c1", images=[image]),
    ]
    body = await _sent_body(_request(messages=messages))
    assert body["contents"][1] == {
        "role": "model",
        "parts": [{"text": "calling"}, {"functionCall": {"id": "c1", "name": "look", "args": {}}}],
    }
    response, inline = body["contents"][2]["parts"]
    assert response["functionResponse"] == {
        "id": "c1",
        "name": "look",
        "response": {"result": "found"},
    }
    assert inline == {"inlineData": {"mimeType": "image/png", "data": "aGVsbG8="}}


# ---------------------------------------------------------------------------------------------
# Responses
# ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("payload", "mapped"),
    [
        (_answer([{"text": "x"}], "MAX_TOKENS"), "length"),
        (_answer([{"text": "x"}], "SAFETY"), "content_filter"),
        (_answer([], "MALFORMED_FUNCTION_CALL"), "error"),
        ({"promptFeedback": {"blockReason": "SAFETY"}}, "content_filter"),
    ],
)
async def test_finish_reasons_are_mapped(payload: dict[str, Any], mapped: str) -> None:
    response = await GoogleProvider(transport=json_transport(payload)).generate(_request())
    assert response.finish_reason == mapped


@pytest.mark.asyncio
async def test_an_invalid_key_is_an_auth_error() -> None:
    body = json.dumps(
        {
            "error": {
                "code": 400,
                "message": "API key not valid. Please pass a valid API key.",
                "status": "INVALID_ARGUMENT",
                "details": [{"reason": "API_KEY_INVALID"}],
            }
        }
    )
    provider = GoogleProvider(transport=failing_transport(400, body))
    with pytest.raises(ProviderError) as caught:
        await provider.generate(_request())
    assert caught.value.code == "auth_error"
    assert "GOOGLE_API_KEY" in str(caught.value)


@pytest.mark.asyncio
async def test_retry_info_in_the_body_sets_retry_after() -> None:
    body = json.dumps(
        {"error": {"code": 429, "details": [{"@type": "RetryInfo", "retryDelay": "38s"}]}}
    )
    provider = GoogleProvider(transport=failing_transport(429, body))
    with pytest.raises(ProviderError) as caught:
        await provider.generate(_request())
    assert caught.value.retry_after == 38.0


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# Listing and registration
# ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_list_models_follows_pages_and_strips_the_prefix() -> None:
    pages = [
        {"models": [{"name": "models/gemini-2.5-pro"}], "nextPageToken": "p2"},
        {"models": [{"name": "models/gemini-2.5-flash"}]},
    ]
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=pages[len(seen) - 1])

    provider = GoogleProvider(transport=httpx.MockTransport(handle))
    models = await provider.list_models(env_of(GOOGLE_API_KEY=KEY))
    assert models == ["gemini-2.5-flash", "gemini-2.5-pro"]
    assert seen[1].url.params["pageToken"] == "p2"
