"""OpenAI-compatible vendors: one class configured per vendor, replayed from recorded traffic."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from replay import (
    Cassette,
    Replay,
    assert_same_requests,
    env_of,
    failing_transport,
    first_request,
    json_transport,
    raising_transport,
    run_conversation,
    sse_transport,
)

from sa_core.errors import ProviderError
from sa_core.providers import (
    ProviderMessage,
    ProviderRequest,
    ReasoningConfig,
    StreamChunk,
    collect_stream,
)
from sa_providers import openai_compatible
from sa_providers._chat_completions import ChatDialect
from sa_providers.openai_compatible import (
    OpenAICompatibleProvider,
    generic,
    groq,
    ollama,
    openrouter,
)

GROQ = "TestOpenAICompatibleCommon/groq-kimi-k2"
OPENROUTER = "TestOpenRouterCommon/gemini"
LLAMA = "TestOpenAICompatibleThinking/llama-cpp-gpt-oss/thinking.yaml"


def _request(**overrides: Any) -> ProviderRequest:
    base = ProviderRequest(
        model="some-model", messages=[ProviderMessage("user", "Hi")], env=env_of()
    )
    for name, value in overrides.items():
        setattr(base, name, value)
    return base


async def _stream(events: list[str], **overrides: Any) -> list[StreamChunk]:
    provider = ollama(transport=sse_transport(events))
    return [c async for c in provider.stream(_request(**overrides))]


def _data(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload)}"


# ---------------------------------------------------------------------------------------------
# Recorded traffic
# ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("scenario", ["multi_tool", "multi_tool_streaming"])
async def test_groq_replay_sends_the_key_as_a_bearer_token_and_keeps_its_call_ids(
    scenario: str,
) -> None:
    # the replay itself, for every scenario: test_provider_conformance.py
    cassette = Cassette.load(f"{GROQ}/{scenario}.yaml")
    replay = Replay(cassette)
    request = first_request(cassette, env=env_of(GROQ_API_KEY="gsk-1"))
    responses = await run_conversation(
        groq(transport=replay.transport), request, stream=scenario.endswith("streaming")
    )
    assert replay.sent[0].headers["authorization"] == "Bearer gsk-1"
    assert [c.id for c in responses[0].tool_calls] == [
        "functions.add:0",
        "functions.multiply:1",
    ]


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True])
async def test_openrouter_round_trips_reasoning_details_and_reports_cost(stream: bool) -> None:
    name = "multi_tool_streaming" if stream else "multi_tool"
    cassette = Cassette.load(f"{OPENROUTER}/{name}.yaml")
    replay = Replay(cassette)
    request = first_request(cassette, env=env_of(OPENROUTER_API_KEY="or-1"))
    responses = await run_conversation(
        openrouter(transport=replay.transport), request, stream=stream
    )
    assert_same_requests(replay)
    details = responses[0].reasoning_details or []
    assert details[0]["type"] == "reasoning.encrypted"
    assert details[0]["format"] == "google-gemini-v1"
    assert replay.sent_bodies[1]["messages"][2]["reasoning_details"] == details
    assert replay.sent_bodies[0]["usage"] == {"include": True}
    assert responses[0].usage.cost is not None and responses[0].usage.cost > 0


@pytest.mark.asyncio
async def test_reasoning_content_round_trips_when_the_dialect_echoes_it() -> None:
    cassette = Cassette.load(LLAMA)
    replay = Replay(cassette)
    provider = OpenAICompatibleProvider(
        name="llamacpp",
        base_url="http://localhost:8080/v1",
        dialect=ChatDialect(echo_reasoning_content=True),
        transport=replay.transport,
    )
    request = first_request(cassette, reasoning=ReasoningConfig(effort="high"))
    responses = await run_conversation(provider, request, stream=False)
    assert_same_requests(replay)
    assert responses[0].reasoning and "weather" in responses[0].reasoning
    assert "authorization" not in replay.sent[0].headers


@pytest.mark.asyncio
async def test_the_generic_provider_takes_base_url_and_key_variable_from_options() -> None:
    cassette = Cassette.load(f"{GROQ}/simple.yaml")
    replay = Replay(cassette)
    options = {"base_url": "https://api.groq.com/openai/v1", "key_variable": "MY_KEY"}
    request = first_request(cassette, provider_options=options, env=env_of(MY_KEY="k-1"))
    await generic(transport=replay.transport).generate(request)
    assert_same_requests(replay)
    assert replay.sent[0].headers["authorization"] == "Bearer k-1"


@pytest.mark.asyncio
async def test_the_generic_provider_without_base_url_says_how_to_set_one() -> None:
    with pytest.raises(ProviderError) as caught:
        await generic(transport=failing_transport(500)).generate(_request())
    assert caught.value.code == "invalid_request"
    assert "provider_options.base_url" in str(caught.value)


# ---------------------------------------------------------------------------------------------
# Streams from servers that bend the protocol
# ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_tool_calls_without_index_or_with_object_arguments_are_assembled() -> None:
    chunk = {
        "choices": [
            {
                "delta": {
                    "tool_calls": [
                        {"id": "a", "function": {"name": "add", "arguments": {"a": 1}}},
                        {"id": "b", "function": {"name": "mul", "arguments": '{"b": 2}'}},
                    ]
                },
                "finish_reason": "stop",
            }
        ]
    }
    response = await collect_stream(_stream_iter([_data(chunk), "data: [DONE]"]))
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("a", "add", {"a": 1}),
        ("b", "mul", {"b": 2}),
    ]
    assert response.finish_reason == "tool_calls"


@pytest.mark.asyncio
async def test_calls_sharing_one_index_stay_separate() -> None:
    def call(call_id: str, name: str) -> str:
        function = {"name": name, "arguments": '{"a": 2}'}
        return _data(
            {
                "choices": [
                    {"delta": {"tool_calls": [{"index": 0, "id": call_id, "function": function}]}}
                ]
            }
        )

    events = [call("a", "add"), call("b", "mul"), "data: [DONE]"]
    response = await collect_stream(_stream_iter(events))
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("a", "add", {"a": 2}),
        ("b", "mul", {"a": 2}),
    ]


def _stream_iter(events: list[str]) -> Any:
    return ollama(transport=sse_transport(events)).stream(_request())


@pytest.mark.asyncio
async def test_reasoning_deltas_and_detail_pieces_are_merged() -> None:
    def detail(text: str, **extra: Any) -> dict[str, Any]:
        piece = {"type": "reasoning.text", "text": text, "index": 0, "format": "x"}
        return {"choices": [{"delta": {"reasoning_details": [piece | extra]}}]}

    events = [
        _data({"choices": [{"delta": {"reasoning_content": "Let me "}}]}),
        _data({"choices": [{"delta": {"reasoning_content": "think."}}]}),
        _data(detail("Let me ")),
        _data(detail("think.", signature="sig")),
        _data({"choices": [{"delta": {"content": "Done"}, "finish_reason": "stop"}]}),
        _data({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 3}}),
    ]
    chunks = await _stream(events)
    kinds = [c.type for c in chunks]
    assert kinds == [
        "reasoning-delta",
        "reasoning-delta",
        "reasoning-done",
        "content-delta",
        "reasoning-done",
        "content-done",
        "finish",
    ]
    assert chunks[4].reasoning_details == [
        {
            "type": "reasoning.text",
            "text": "Let me think.",
            "index": 0,
            "format": "x",
            "signature": "sig",
        }
    ]
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 7


@pytest.mark.asyncio
async def test_detail_only_reasoning_is_shown_as_text() -> None:
    piece = {"type": "reasoning.summary", "summary": "Short plan", "index": 0}
    events = [_data({"choices": [{"delta": {"reasoning_details": [piece]}}]}), "data: [DONE]"]
    response = await collect_stream(_stream_iter(events))
    assert response.reasoning == "Short plan"


@pytest.mark.asyncio
async def test_openrouter_reasoning_request_uses_a_reasoning_object() -> None:
    seen: list[httpx.Request] = []
    payload = {"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}]}
    provider = openrouter(transport=json_transport(payload, seen=seen))
    request = _request(
        reasoning=ReasoningConfig(max_tokens=2000, exclude=True),
        env=env_of(OPENROUTER_API_KEY="or-1"),
        provider_options={"provider": {"only": ["openai"]}},
    )
    await provider.generate(request)
    body = json.loads(seen[0].content)
    assert body["reasoning"] == {"max_tokens": 2000, "exclude": True}
    assert body["provider"] == {"only": ["openai"]}
    assert body["usage"] == {"include": True}


# ---------------------------------------------------------------------------------------------
# Keys, errors, registration
# ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_ollama_needs_no_key_and_says_when_it_is_not_running() -> None:
    def refuse(request: httpx.Request) -> Exception:
        return httpx.ConnectError("All connection attempts failed", request=request)

    with pytest.raises(ProviderError) as caught:
        await ollama(transport=raising_transport(refuse)).generate(_request())
    assert caught.value.code == "server_error"
    assert "http://127.0.0.1:11434/v1" in str(caught.value)
    assert "running" in str(caught.value)


@pytest.mark.asyncio
async def test_list_models_reads_the_models_endpoint() -> None:
    seen: list[httpx.Request] = []
    payload = {"object": "list", "data": [{"id": "llama3.2"}, {"id": "qwen3"}]}
    provider = ollama(transport=json_transport(payload, seen=seen))
    assert await provider.list_models(env_of()) == ["llama3.2", "qwen3"]
    assert str(seen[0].url) == "http://127.0.0.1:11434/v1/models"


def test_the_plugin_registers_the_configured_vendors() -> None:
    registered: list[Any] = []
    openai_compatible.sa_register_providers(registered.append)
    assert all(isinstance(p, OpenAICompatibleProvider) for p in registered)
    keys = {p.name: (p.key_variable, p.key_required) for p in registered}
    assert keys["ollama"] == (None, False)
    assert keys["groq"] == ("GROQ_API_KEY", True)
