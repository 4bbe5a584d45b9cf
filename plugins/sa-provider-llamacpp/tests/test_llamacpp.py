"""The llamacpp provider plugin, tested against traffic recorded from a real llama.cpp server."""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import sa_provider_llamacpp
import yaml
from sa_provider_llamacpp import DEFAULT_BASE_URL, llamacpp_provider

from sa_core.errors import ProviderError
from sa_core.plugins import create_plugin_host
from sa_core.providers import (
    ProviderMessage,
    ProviderRequest,
    ProviderResponse,
    ProviderTool,
    ReasoningConfig,
    collect_stream,
)

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
COMMON = FIXTURES / "TestOpenAICompatibleCommon" / "llama-cpp-gpt-oss"
THINKING = FIXTURES / "TestOpenAICompatibleThinking" / "llama-cpp-gpt-oss"
WEATHER = ProviderTool(
    "weather",
    "Get weather information for a location",
    {
        "properties": {"location": {"description": "the city", "type": "string"}},
        "required": ["location"],
        "type": "object",
    },
)


class Cassette:
    """Serves a go-vcr recording's responses in order and keeps what we sent."""

    def __init__(self, path: Path) -> None:
        self.interactions = yaml.safe_load(path.read_text())["interactions"]
        self.sent: list[dict[str, Any]] = []
        self.headers: list[httpx.Headers] = []
        self.transport = httpx.MockTransport(self._handle)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        recorded = self.interactions[len(self.sent)]
        assert request.url.path == httpx.URL(recorded["request"]["url"]).path
        self.sent.append(json.loads(request.content))
        self.headers.append(request.headers)
        response = recorded["response"]
        content_type = response["headers"]["Content-Type"][0]
        return httpx.Response(
            response["code"], headers={"content-type": content_type}, text=response["body"]
        )

    def recorded(self, index: int) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.interactions[index]["request"]["body"])
        return body


def conversation_view(body: dict[str, Any]) -> dict[str, Any]:
    """The parts of a request our provider must reproduce exactly (arguments decoded)."""
    messages = json.loads(json.dumps(body["messages"]))
    for message in messages:
        for call in message.get("tool_calls", []):
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    keys = ("model", "tools", "tool_choice", "reasoning_effort", "stream")
    return {"messages": messages, **{k: body.get(k) for k in keys}}


async def converse(cassette: Cassette, request: ProviderRequest, *, stream: bool) -> list[Any]:
    provider = llamacpp_provider(transport=cassette.transport)
    responses: list[ProviderResponse] = []
    for _ in cassette.interactions:
        response = (
            await collect_stream(provider.stream(request))
            if stream
            else await provider.generate(request)
        )
        responses.append(response)
        if not response.tool_calls:
            break
        assistant = ProviderMessage(
            "assistant",
            response.content,
            tool_calls=response.tool_calls,
            reasoning=response.reasoning,
        )
        results = [ProviderMessage("tool", "40 C", tool_call_id=c.id) for c in response.tool_calls]
        request = replace(request, messages=[*request.messages, assistant, *results])
    return responses


def weather_request(user: str, **overrides: Any) -> ProviderRequest:
    return ProviderRequest(
        model="openai/gpt-oss-20b",
        messages=[
            ProviderMessage("system", "You are a helpful assistant"),
            ProviderMessage("user", user),
        ],
        tools=[WEATHER],
        env=lambda name: None,
        **overrides,
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True])
async def test_a_tool_round_trip_matches_the_recorded_requests(stream: bool) -> None:
    cassette = Cassette(COMMON / ("tool_streaming.yaml" if stream else "tool.yaml"))
    request = weather_request("What's the weather in Florence,Italy?")
    responses = await converse(cassette, request, stream=stream)
    assert responses[0].tool_calls[0].name == "weather"
    assert responses[0].reasoning  # gpt-oss thinks before calling
    assert responses[-1].content and "40" in responses[-1].content
    for index, sent in enumerate(cassette.sent):
        assert conversation_view(sent) == conversation_view(cassette.recorded(index))


@pytest.mark.asyncio
async def test_reasoning_effort_and_reasoning_content_round_trip() -> None:
    cassette = Cassette(THINKING / "thinking.yaml")
    request = weather_request(
        "What's the weather in Florence, Italy?", reasoning=ReasoningConfig(effort="high")
    )
    await converse(cassette, request, stream=False)
    assert "authorization" not in cassette.headers[0]
    assert cassette.sent[0]["reasoning_effort"] == "high"
    assert cassette.sent[1]["messages"][2]["reasoning_content"].startswith("The user asks")
    assert conversation_view(cassette.sent[1]) == conversation_view(cassette.recorded(1))


@pytest.mark.asyncio
async def test_no_key_is_needed_but_one_is_sent_when_set() -> None:
    cassette = Cassette(COMMON / "simple.yaml")
    provider = llamacpp_provider(transport=cassette.transport)
    request = ProviderRequest(
        model="openai/gpt-oss-20b",
        messages=[ProviderMessage("user", "Say hi in Portuguese")],
        env={"LLAMACPP_API_KEY": "local-secret"}.get,
    )
    response = await provider.generate(request)
    assert response.content
    assert cassette.headers[0]["authorization"] == "Bearer local-secret"


@pytest.mark.asyncio
async def test_a_stopped_server_is_a_server_error_naming_the_url() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    provider = llamacpp_provider(transport=httpx.MockTransport(refuse))
    with pytest.raises(ProviderError) as caught:
        await provider.generate(weather_request("hi"))
    assert caught.value.code == "server_error"
    assert DEFAULT_BASE_URL in str(caught.value)


def test_the_plugin_registers_through_the_plugin_host() -> None:
    host = create_plugin_host(load_entrypoints=False, plugins=[sa_provider_llamacpp])
    provider = host.providers["llamacpp"]
    assert provider.name == "llamacpp"
    assert getattr(provider, "base_url", None) == DEFAULT_BASE_URL


def test_the_entry_point_names_the_module() -> None:
    project = tomllib.loads((HERE.parent / "pyproject.toml").read_text())
    entry_points = project["project"]["entry-points"]["sa"]
    assert entry_points == {"sa_provider_llamacpp": "sa_provider_llamacpp"}
