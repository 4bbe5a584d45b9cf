"""The ``anthropic`` provider: the Messages API, replayed from recorded traffic."""

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
    first_request,
    json_transport,
    run_conversation,
)

from sa_core.providers import (
    ProviderImage,
    ProviderMessage,
    ProviderRequest,
    ProviderToolCall,
    ReasoningConfig,
)
from sa_providers.anthropic import AnthropicProvider

COMMON = "TestAnthropicCommon/claude-sonnet-4"
THINKING = "TestAnthropicThinking/claude-sonnet-4"
KEY = "sk-ant-SECRET-0123456789"


def _request(**overrides: Any) -> ProviderRequest:
    base = ProviderRequest(
        model="claude-sonnet-4-20250514",
        messages=[ProviderMessage("system", "Be brief."), ProviderMessage("user", "Hi")],
        env=env_of(ANTHROPIC_API_KEY=KEY),
    )
    for name, value in overrides.items():
        setattr(base, name, value)
    return base


def _message(content: list[dict[str, Any]], stop: str = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "content": content,
        "stop_reason": stop,
        "usage": {"input_tokens": 10, "output_tokens": 2},
    }


async def _sent_body(request: ProviderRequest) -> dict[str, Any]:
    seen: list[httpx.Request] = []
    provider = AnthropicProvider(transport=json_transport(_message([]), seen=seen))
    await provider.generate(request)
    body: dict[str, Any] = json.loads(seen[0].content)
    return body


# ---------------------------------------------------------------------------------------------
# Recorded traffic
# ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("scenario", ["multi_tool", "multi_tool_streaming"])
async def test_parallel_tool_calls_replay_calls_both_tools_and_says_what_it_is_doing(
    scenario: str,
) -> None:
    # the replay itself, for every scenario: test_provider_conformance.py
    cassette = Cassette.load(f"{COMMON}/{scenario}.yaml")
    replay = Replay(cassette)
    request = first_request(cassette, parallel_tool_calls=True)
    responses = await run_conversation(
        AnthropicProvider(transport=replay.transport),
        request,
        stream=scenario.endswith("streaming"),
    )
    assert [c.name for c in responses[0].tool_calls] == ["add", "multiply"]
    assert all(c.arguments == {"a": 2, "b": 3} for c in responses[0].tool_calls)
    assert responses[0].finish_reason == "tool_calls"
    assert responses[0].content  # Claude says what it is about to do


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True])
async def test_thinking_blocks_and_signatures_round_trip(stream: bool) -> None:
    name = "thinking-streaming" if stream else "thinking"
    cassette = Cassette.load(f"{THINKING}/{name}.yaml")
    replay = Replay(cassette)
    request = first_request(
        cassette, reasoning=ReasoningConfig(max_tokens=4000), parallel_tool_calls=True
    )
    responses = await run_conversation(
        AnthropicProvider(transport=replay.transport), request, stream=stream
    )
    assert_same_requests(replay)
    first = responses[0]
    assert first.reasoning and "Florence" in first.reasoning
    (detail,) = first.reasoning_details or []
    assert detail["type"] == "reasoning.text"
    assert detail["format"] == "anthropic-claude-v1"
    assert detail["signature"].startswith("E")
    thinking = replay.sent_bodies[1]["messages"][1]["content"][0]
    assert thinking == {
        "type": "thinking",
        "thinking": first.reasoning,
        "signature": detail["signature"],
    }
    assert replay.sent_bodies[0]["thinking"] == {"type": "enabled", "budget_tokens": 4000}


@pytest.mark.asyncio
async def test_user_images_are_sent_as_base64_blocks() -> None:
    cassette = Cassette.load("TestImageUploadAgent/anthropic-claude-sonnet-4.yaml")
    replay = Replay(cassette)
    response = await AnthropicProvider(transport=replay.transport).generate(first_request(cassette))
    assert_same_requests(replay)
    assert response.content and response.usage.completion_tokens == 65


@pytest.mark.asyncio
async def test_requests_carry_the_key_and_version_headers() -> None:
    cassette = Cassette.load(f"{COMMON}/simple.yaml")
    replay = Replay(cassette)
    request = first_request(cassette, env=env_of(ANTHROPIC_API_KEY=KEY))
    await AnthropicProvider(transport=replay.transport).generate(request)
    headers = replay.sent[0].headers
    assert headers["x-api-key"] == KEY
    assert headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in headers


# ---------------------------------------------------------------------------------------------
# Request mapping
# ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("choice", "parallel", "wire"),
    [
        ("auto", None, {"type": "auto"}),
        ("required", None, {"type": "any"}),
        ("none", False, {"type": "none"}),
        ({"name": "weather"}, None, {"type": "tool", "name": "weather"}),
        ("auto", False, {"type": "auto", "disable_parallel_tool_use": True}),
    ],
)
async def test_tool_choice_and_parallel_calls_are_mapped(
    choice: Any, parallel: bool | None, wire: dict[str, Any]
) -> None:
    body = await _sent_body(
        _request(tools=[WEATHER], tool_choice=choice, parallel_tool_calls=parallel)
    )
    assert body["tool_choice"] == wire
    assert body["tools"][0]["input_schema"] == WEATHER.parameters


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("reasoning", "max_tokens", "budget", "sent_max"),
    [
        (ReasoningConfig(effort="low"), None, 2048, 4096),
        (ReasoningConfig(effort="high"), 32000, 16384, 32000),
        (ReasoningConfig(max_tokens=8000), 1000, 8000, 12096),
        (ReasoningConfig(max_tokens=10), None, 1024, 4096),
    ],
)
async def test_reasoning_becomes_a_thinking_budget_below_max_tokens(
    reasoning: ReasoningConfig, max_tokens: int | None, budget: int, sent_max: int
) -> None:
    body = await _sent_body(_request(reasoning=reasoning, max_tokens=max_tokens))
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert body["max_tokens"] == sent_max


@pytest.mark.asyncio
async def test_history_is_merged_into_alternating_roles() -> None:
    image = ProviderImage("aGVsbG8=", "image/png")
    messages = [
        ProviderMessage("system", "Be brief."),
        ProviderMessage("user", "Look"),
        ProviderMessage(
            "assistant",
            tool_calls=[ProviderToolCall("t1", "shot", {}), ProviderToolCall("t2", "shot", {})],
            reasoning_details=[
                {"type": "reasoning.encrypted", "data": "opaque", "format": "anthropic-claude-v1"},
                {"type": "reasoning.text", "text": "x", "signature": "s", "format": "other"},
            ],
        ),
        ProviderMessage("tool", "one", tool_call_id="t1", images=[image]),
        ProviderMessage("tool", "", tool_call_id="t2"),
        ProviderMessage("user", "And?"),
    ]
    body = await _sent_body(_request(messages=messages, user="thread-9"))
    assert body["system"] == [{"type": "text", "text": "Be brief."}]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assistant = body["messages"][1]["content"]
    assert assistant[0] == {"type": "redacted_thinking", "data": "opaque"}
    assert [b["type"] for b in assistant] == ["redacted_thinking", "tool_use", "tool_use"]
    results = body["messages"][2]["content"]
    assert results[0]["content"][1]["source"]["data"] == "aGVsbG8="
    assert results[1] == {"type": "tool_result", "tool_use_id": "t2"}
    assert results[2] == {"type": "text", "text": "And?"}
    assert body["metadata"] == {"user_id": "thread-9"}


# ---------------------------------------------------------------------------------------------
# Responses
# ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_usage_counts_cache_reads_and_writes_as_prompt_tokens() -> None:
    payload = _message([{"type": "text", "text": "hi"}])
    payload["usage"] = {
        "input_tokens": 10,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 5,
        "output_tokens": 7,
    }
    response = await AnthropicProvider(transport=json_transport(payload)).generate(_request())
    usage = response.usage
    assert (usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens) == (115, 100, 7)
    assert usage.total_tokens == 122


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("stop", "mapped"),
    [
        ("end_turn", "stop"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        ("tool_use", "tool_calls"),
    ],
)
async def test_stop_reasons_are_mapped(stop: str, mapped: str) -> None:
    payload = _message([{"type": "text", "text": "x"}], stop=stop)
    response = await AnthropicProvider(transport=json_transport(payload)).generate(_request())
    assert response.finish_reason == mapped


@pytest.mark.asyncio
async def test_redacted_thinking_is_kept_as_an_encrypted_detail() -> None:
    payload = _message(
        [{"type": "redacted_thinking", "data": "opaque"}, {"type": "text", "text": "ok"}]
    )
    response = await AnthropicProvider(transport=json_transport(payload)).generate(_request())
    assert response.reasoning_details == [
        {"type": "reasoning.encrypted", "data": "opaque", "format": "anthropic-claude-v1"}
    ]


@pytest.mark.asyncio
async def test_excluded_reasoning_is_not_shown_but_its_signature_is_kept() -> None:
    cassette = Cassette.load(f"{THINKING}/thinking-streaming.yaml")
    request = first_request(cassette, reasoning=ReasoningConfig(max_tokens=4000, exclude=True))
    provider = AnthropicProvider(transport=Replay(cassette).transport)
    chunks = [c async for c in provider.stream(request)]
    assert not [c for c in chunks if c.type == "reasoning-delta"]
    done = [c for c in chunks if c.type == "reasoning-done"]
    assert done[0].reasoning_details and done[0].reasoning_details[0]["signature"]


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# Listing and registration
# ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_list_models_follows_pages() -> None:
    pages = [
        {"data": [{"id": "claude-b"}], "has_more": True, "last_id": "claude-b"},
        {"data": [{"id": "claude-a"}], "has_more": False, "last_id": "claude-a"},
    ]
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=pages[len(seen) - 1])

    provider = AnthropicProvider(transport=httpx.MockTransport(handle))
    assert await provider.list_models(env_of(ANTHROPIC_API_KEY=KEY)) == ["claude-a", "claude-b"]
    assert seen[0].url.path == "/v1/models"
    assert seen[1].url.params["after_id"] == "claude-b"
