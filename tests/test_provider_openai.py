"""The ``openai`` provider: Chat Completions and Responses, replayed from recorded traffic."""

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
    canonical,
    env_of,
    failing_transport,
    first_request,
    json_transport,
    run_conversation,
    sse_transport,
)

from sa_core.errors import ProviderError
from sa_core.providers import (
    ProviderImage,
    ProviderMessage,
    ProviderRequest,
    ProviderToolCall,
    ReasoningConfig,
    collect_stream,
)
from sa_providers.openai import OpenAIProvider

CHAT = "TestOpenAICommon/openai-gpt-4o-mini"
RESPONSES = "TestOpenAIResponsesCommon/openai-gpt-4o"
SCENARIOS = ["simple", "simple_streaming", "tool", "tool_streaming", "multi_tool"]
KEY = "sk-test-SECRET-0123456789"


def _request(**overrides: Any) -> ProviderRequest:
    base = ProviderRequest(
        model="gpt-4o-mini",
        messages=[ProviderMessage("system", "Be brief."), ProviderMessage("user", "Hi")],
        env=env_of(OPENAI_API_KEY=KEY),
    )
    for name, value in overrides.items():
        setattr(base, name, value)
    return base


def _chat_ok(seen: list[httpx.Request]) -> httpx.MockTransport:
    return json_transport(
        {
            "id": "chatcmpl-1",
            "choices": [{"index": 0, "message": {"content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        },
        seen=seen,
    )


# ---------------------------------------------------------------------------------------------
# Recorded traffic
# ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("scenario", ["tool", "tool_streaming"])
async def test_chat_completions_tool_replay_reads_the_call_and_answers_with_its_result(
    scenario: str,
) -> None:
    # the replay itself, for every scenario: test_provider_conformance.py
    cassette = Cassette.load(f"{CHAT}/{scenario}.yaml")
    replay = Replay(cassette)
    provider = OpenAIProvider(transport=replay.transport)
    responses = await run_conversation(
        provider, first_request(cassette), stream=scenario.endswith("streaming")
    )
    assert responses[0].finish_reason == "tool_calls"
    assert "Florence" in responses[0].tool_calls[0].arguments["location"]
    assert "40" in (responses[-1].content or "")


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True])
async def test_chat_completions_parallel_tool_calls_are_assembled(stream: bool) -> None:
    name = "multi_tool_streaming" if stream else "multi_tool"
    cassette = Cassette.load(f"{CHAT}/{name}.yaml")
    provider = OpenAIProvider(transport=Replay(cassette).transport)
    first = (await run_conversation(provider, first_request(cassette), stream=stream))[0]
    assert [c.name for c in first.tool_calls] == ["add", "multiply"]
    assert [c.arguments for c in first.tool_calls] == [{"a": 2, "b": 3}, {"a": 2, "b": 3}]
    assert len({c.id for c in first.tool_calls}) == 2
    assert first.finish_reason == "tool_calls"


@pytest.mark.asyncio
async def test_chat_completions_stream_emits_spec_chunks_in_order() -> None:
    cassette = Cassette.load(f"{CHAT}/multi_tool_streaming.yaml")
    provider = OpenAIProvider(transport=Replay(cassette).transport)
    chunks = [c async for c in provider.stream(first_request(cassette))]
    kinds = [c.type for c in chunks]
    assert kinds.count("tool-call-start") == 2
    assert kinds.count("tool-call-done") == 2
    assert kinds[-1] == "finish"
    first_id = chunks[kinds.index("tool-call-start")].id
    deltas = "".join(
        c.arguments_delta or "" for c in chunks if c.type == "tool-call-delta" and c.id == first_id
    )
    assert json.loads(deltas) == {"a": 2, "b": 3}
    finish = chunks[-1]
    assert finish.finish_reason == "tool_calls"
    assert finish.usage is not None and finish.usage.prompt_tokens > 0


@pytest.mark.asyncio
async def test_chat_completions_usage_is_read() -> None:
    cassette = Cassette.load(f"{CHAT}/tool.yaml")
    provider = OpenAIProvider(transport=Replay(cassette).transport)
    response = await provider.generate(first_request(cassette))
    assert response.usage.prompt_tokens == 61
    assert response.usage.completion_tokens == 16
    assert response.usage.total_tokens == 77
    assert response.response_id == "chatcmpl-DuLdP8CI4un8TWs1V8tS3xfFpq7Ta"


@pytest.mark.asyncio
async def test_reasoning_models_get_max_completion_tokens_and_report_reasoning_tokens() -> None:
    cassette = Cassette.load("TestOpenAICommon/openai-gpt-5/simple.yaml")
    replay = Replay(cassette)
    response = await OpenAIProvider(transport=replay.transport).generate(first_request(cassette))
    assert_same_requests(replay)
    assert replay.sent_bodies[0]["max_completion_tokens"] == 4000
    assert response.usage.reasoning_tokens > 0


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "name",
    ["TestImageUploadAgent/openai-gpt-5", "TestImageUploadAgentStreaming/openai-gpt-5-stream"],
)
async def test_user_images_are_sent_as_data_urls(name: str) -> None:
    cassette = Cassette.load(f"{name}.yaml")
    replay = Replay(cassette)
    request = first_request(cassette)
    assert request.messages[-1].images
    responses = await run_conversation(
        OpenAIProvider(transport=replay.transport), request, stream=name.endswith("stream")
    )
    assert_same_requests(replay)
    assert "star" in (responses[0].content or "")


@pytest.mark.asyncio
async def test_responses_api_multi_tool_replay_calls_both_tools() -> None:
    cassette = Cassette.load(f"{RESPONSES}/multi_tool.yaml")
    replay = Replay(cassette)
    request = first_request(cassette, provider_options={"api": "responses"})
    responses = await run_conversation(
        OpenAIProvider(transport=replay.transport), request, stream=False
    )
    assert [c.name for c in responses[0].tool_calls] == ["add", "multiply"]


@pytest.mark.asyncio
async def test_responses_api_reasoning_round_trips_encrypted_items() -> None:
    cassette = Cassette.load("TestOpenAIResponsesWithSummaryThinking/openai-o4-mini/thinking.yaml")
    replay = Replay(cassette)
    request = first_request(
        cassette,
        reasoning=ReasoningConfig(effort="high"),
        provider_options={"api": "responses"},
    )
    responses = await run_conversation(
        OpenAIProvider(transport=replay.transport), request, stream=False
    )
    details = responses[0].reasoning_details or []
    assert details[0]["type"] == "reasoning.encrypted"
    assert details[0]["format"] == "openai-responses-v1"
    sent = replay.sent_bodies
    assert sent[0]["reasoning"] == {"effort": "high", "summary": "auto"}
    assert sent[0]["include"] == ["reasoning.encrypted_content"]
    reasoning_items = [i for i in sent[1]["input"] if i.get("type") == "reasoning"]
    assert reasoning_items[0]["encrypted_content"] == details[0]["data"]
    # Apart from the reasoning item (which the recording's client dropped) we match it.
    sent[1]["input"] = [i for i in sent[1]["input"] if i.get("type") != "reasoning"]
    for ours, theirs in zip(sent, replay.recorded_bodies, strict=True):
        assert canonical(ours) == canonical(theirs)
    assert responses[0].usage.reasoning_tokens > 0
    assert responses[-1].reasoning


@pytest.mark.asyncio
async def test_responses_stream_maps_failure_events_to_error_chunks() -> None:
    failed = {
        "type": "response.failed",
        "response": {"id": "r1", "status": "failed", "error": {"code": "server_error"}},
    }
    provider = OpenAIProvider(transport=sse_transport([f"data: {json.dumps(failed)}"]))
    request = _request(provider_options={"api": "responses"})
    chunks = [c async for c in provider.stream(request)]
    assert chunks[-1].type == "error"
    assert chunks[-1].code == "server_error"
    with pytest.raises(ProviderError):
        await collect_stream(provider.stream(request))


@pytest.mark.asyncio
async def test_responses_incomplete_maps_to_length() -> None:
    payload = {
        "id": "r1",
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [{"type": "message", "content": [{"type": "output_text", "text": "cut"}]}],
    }
    provider = OpenAIProvider(transport=json_transport(payload))
    response = await provider.generate(_request(provider_options={"api": "responses"}))
    assert response.finish_reason == "length"
    assert response.content == "cut"


# ---------------------------------------------------------------------------------------------
# Request mapping
# ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ({"name": "weather"}, {"type": "function", "function": {"name": "weather"}}),
    ],
)
async def test_tool_choice_is_mapped(choice: Any, wire: Any) -> None:
    seen: list[httpx.Request] = []
    provider = OpenAIProvider(transport=_chat_ok(seen))
    await provider.generate(
        _request(tools=[WEATHER], tool_choice=choice, parallel_tool_calls=False)
    )
    body = json.loads(seen[0].content)
    assert body["tool_choice"] == wire
    assert body["parallel_tool_calls"] is False


@pytest.mark.asyncio
async def test_request_options_are_mapped_and_passed_through() -> None:
    seen: list[httpx.Request] = []
    provider = OpenAIProvider(transport=_chat_ok(seen))
    request = _request(
        model="o4-mini",
        max_tokens=123,
        user="thread-1",
        reasoning=ReasoningConfig(max_tokens=20000),
        provider_options={"base_url": "https://proxy.example/v1", "temperature": 0.2, "seed": 7},
    )
    await provider.generate(request)
    sent = seen[0]
    assert str(sent.url) == "https://proxy.example/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    body = json.loads(sent.content)
    assert body["max_completion_tokens"] == 123
    assert body["reasoning_effort"] == "high"
    assert body["user"] == "thread-1"
    assert (body["temperature"], body["seed"]) == (0.2, 7)
    assert "base_url" not in body and "tools" not in body


@pytest.mark.asyncio
async def test_tool_result_images_follow_the_tool_results_as_a_user_message() -> None:
    seen: list[httpx.Request] = []
    provider = OpenAIProvider(transport=_chat_ok(seen))
    call = ProviderMessage(
        "assistant",
        tool_calls=[ProviderToolCall("c1", "shot", {})],
    )
    image = ProviderImage("aGVsbG8=", "image/jpeg")
    result = ProviderMessage("tool", "saved", tool_call_id="c1", tool_name="shot", images=[image])
    await provider.generate(_request(messages=[ProviderMessage("user", "go"), call, result]))
    messages = json.loads(seen[0].content)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user"]
    assert messages[2] == {"role": "tool", "tool_call_id": "c1", "content": "saved"}
    assert messages[3]["content"][1]["image_url"]["url"] == "data:image/jpeg;base64,aGVsbG8="


@pytest.mark.asyncio
async def test_responses_api_sends_tool_images_as_a_following_user_message() -> None:
    seen: list[httpx.Request] = []
    payload = {"id": "r", "status": "completed", "output": []}
    provider = OpenAIProvider(transport=json_transport(payload, seen=seen))
    call = ProviderMessage("assistant", tool_calls=[ProviderToolCall("c1", "shot", {"x": 1})])
    image = ProviderImage("aGVsbG8=", "image/png")
    result = ProviderMessage("tool", "saved", tool_call_id="c1", tool_name="shot", images=[image])
    request = _request(
        messages=[ProviderMessage("user", "go"), call, result],
        provider_options={"api": "responses"},
    )
    await provider.generate(request)
    items = json.loads(seen[0].content)["input"]
    assert [i.get("type", i.get("role")) for i in items] == [
        "user",
        "function_call",
        "function_call_output",
        "user",
    ]
    assert items[1]["arguments"] == '{"x": 1}'
    assert items[3]["content"][1] == {
        "type": "input_image",
        "image_url": "data:image/png;base64,aGVsbG8=",
    }


@pytest.mark.asyncio
async def test_responses_body_maps_tool_choice_and_max_tokens() -> None:
    seen: list[httpx.Request] = []
    payload = {"id": "r", "status": "completed", "output": []}
    provider = OpenAIProvider(transport=json_transport(payload, seen=seen))
    request = _request(
        tools=[WEATHER],
        tool_choice={"name": "weather"},
        max_tokens=50,
        provider_options={"api": "responses"},
    )
    await provider.generate(request)
    body = json.loads(seen[0].content)
    assert seen[0].url.path == "/v1/responses"
    assert body["tool_choice"] == {"type": "function", "name": "weather"}
    assert body["max_output_tokens"] == 50
    assert "api" not in body


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_key_echoed_by_the_server_is_redacted() -> None:
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}"}})
    provider = OpenAIProvider(transport=failing_transport(401, body))
    with pytest.raises(ProviderError) as caught:
        await provider.generate(_request())
    assert KEY not in str(caught.value)
    assert "[redacted]" in str(caught.value)
    assert KEY not in repr(provider) and KEY not in repr(_request())


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("wire", "mapped"),
    [("length", "length"), ("content_filter", "content_filter"), ("stop", "stop")],
)
async def test_finish_reasons_are_mapped(wire: str, mapped: str) -> None:
    payload = {"choices": [{"message": {"content": "x"}, "finish_reason": wire}]}
    response = await OpenAIProvider(transport=json_transport(payload)).generate(_request())
    assert response.finish_reason == mapped


# ---------------------------------------------------------------------------------------------
# Listing and registration
# ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_list_models_reads_the_models_endpoint() -> None:
    seen: list[httpx.Request] = []
    payload = {"data": [{"id": "gpt-4o"}, {"id": "gpt-4o-mini"}]}
    provider = OpenAIProvider(transport=json_transport(payload, seen=seen))
    assert await provider.list_models(env_of(OPENAI_API_KEY=KEY)) == ["gpt-4o", "gpt-4o-mini"]
    assert (seen[0].method, seen[0].url.path) == ("GET", "/v1/models")
