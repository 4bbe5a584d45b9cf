"""The test kit's FunctionProvider: a Python function answers each model call."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kit_requests import CALL_ID, chunks_of, request, tool_round_trip

from sa_core.errors import ProviderError
from sa_core.providers import (
    ProviderRequest,
    ProviderResponse,
    Usage,
    collect_stream,
)
from sa_core.testing import (
    FunctionProvider,
    ScriptedResponse,
    sa_database_url,  # noqa: F401  (the fixture, used without the plugin installed)
)

# -- FunctionProvider ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_function_provider_text_reply_and_recording() -> None:
    provider = FunctionProvider(lambda req: f"echo: {req.messages[-1].content}")
    response = await provider.generate(request("ping"))
    assert response.content == "echo: ping" and response.finish_reason == "stop"
    assert response.usage.total_tokens > 0
    streamed = await collect_stream(provider.stream(request("pong")))
    assert streamed.content == "echo: pong"
    assert [provider.last_user_message(r) for r in provider.requests] == ["ping", "pong"]
    provider.reset()
    assert provider.requests == []


@pytest.mark.asyncio
async def test_function_provider_dict_with_tool_calls() -> None:
    def decide(req: ProviderRequest) -> dict[str, Any]:
        if req.messages[-1].role == "tool":
            return {"content": "done"}
        return {
            "tool_calls": [{"name": "lookup", "arguments": {"q": "x"}}],
            "content": "Looking.",
            "reasoning": "Need data.",
        }

    provider = FunctionProvider(decide)
    response = await provider.generate(request("go"))
    assert response.finish_reason == "tool_calls"
    assert (response.content, response.reasoning) == ("Looking.", "Need data.")
    call = response.tool_calls[0]
    assert call.name == "lookup" and call.arguments == {"q": "x"} and CALL_ID.match(call.id)
    followup = (await provider.generate(tool_round_trip())).content
    assert followup == "done"


@pytest.mark.asyncio
async def test_function_provider_async_function_and_scripted_response() -> None:
    async def answer(req: ProviderRequest) -> ScriptedResponse:
        await asyncio.sleep(0)
        return ScriptedResponse(content="async", usage=Usage(prompt_tokens=1, completion_tokens=1))

    response = await FunctionProvider(answer).generate(request("x"))
    assert response.content == "async" and response.usage.total_tokens == 2


@pytest.mark.asyncio
async def test_function_provider_provider_response_passes_through() -> None:
    fixed = ProviderResponse(content="raw", finish_reason="length", response_id="r1")
    provider = FunctionProvider(lambda req: fixed)
    assert await provider.generate(request("x")) is fixed
    streamed = await collect_stream(provider.stream(request("x")))
    assert (streamed.content, streamed.finish_reason, streamed.response_id) == (
        "raw",
        "length",
        "r1",
    )


@pytest.mark.asyncio
async def test_function_provider_errors() -> None:
    provider = FunctionProvider(lambda req: {"error": {"message": "down", "status": 502}})
    with pytest.raises(ProviderError) as caught:
        await provider.generate(request("x"))
    assert (caught.value.code, caught.value.status) == ("server_error", 502)

    def fail(req: ProviderRequest) -> str:
        raise ProviderError("nope", "auth_error", 401)

    with pytest.raises(ProviderError, match="nope"):
        await collect_stream(FunctionProvider(fail).stream(request("x")))


@pytest.mark.asyncio
async def test_function_provider_rejects_bad_returns() -> None:
    with pytest.raises(TypeError, match="unknown keys \\['text'\\]"):
        await FunctionProvider(lambda req: {"text": "x"}).generate(request("x"))
    with pytest.raises(TypeError, match="not int"):
        await FunctionProvider(lambda req: 3).generate(request("x"))  # type: ignore[arg-type,return-value]


@pytest.mark.asyncio
async def test_function_provider_streaming_simulation() -> None:
    provider = FunctionProvider(lambda req: "abcdefg", chunk_size=3)
    chunks = await chunks_of(provider, request("x"))
    assert [c.delta for c in chunks if c.type == "content-delta"] == ["abc", "def", "g"]
