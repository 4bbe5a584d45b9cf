"""How MCP calls map to turns: failures, variables, secrets, subagents, bad arguments.

A runtime with the server test packs (``alpha``, ``beta``) behind a real uvicorn server on
127.0.0.1 in the test's loop, called with the official ``mcp`` SDK client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp_serve_kit import ProgressLog, mcp_client
from test_server_packs import alpha_pack, beta_pack, brain

from sa_core import Runtime
from sa_core.errors import ProviderError
from sa_core.providers import ProviderRequest
from sa_core.server import create_app
from sa_core.server.protocols.mcp_progress import describe
from sa_core.server.testing import live_server
from sa_core.testing import FunctionProvider

pytest.importorskip("mcp")

SECRET = "tok-very-secret-1234"
HELPER = "alpha__helper"


def model(request: ProviderRequest) -> Any:
    """The server tests' model, plus a refusal and an answer that repeats the secret."""
    text = next((m.content or "" for m in reversed(request.messages) if m.role == "user"), "")
    if request.model == "parent-model" and request.messages[-1].role == "user":
        if "fail" in text:
            raise ProviderError("The request was refused: bad input.", code="invalid_request")
        if "secret" in text:
            return f"The token is {SECRET}."
    return brain(request)


@asynccontextmanager
async def serving(tmp_path: Path) -> AsyncIterator[tuple[Runtime, str, str]]:
    """The runtime, the server's base URL and a key."""
    runtime = Runtime(
        packs=[alpha_pack(), beta_pack()],
        providers={"test": FunctionProvider(model)},
        database_url=f"sqlite:///{tmp_path / 'sa.db'}",
        load_entrypoints=False,
        env={"ALPHA_TOKEN": SECRET},
    )
    async with live_server(create_app(runtime)) as base_url:
        token, _ = await runtime.store.create_api_key("mcp")
        yield runtime, base_url, token


@pytest.mark.asyncio
async def test_a_failed_turn_is_a_tool_error_with_its_cause(tmp_path: Path) -> None:
    async with serving(tmp_path) as (_, base, key), mcp_client(f"{base}/mcp", key) as client:
        failed = await client.call_tool(HELPER, {"message": "please fail"})
    assert failed.is_error
    text = failed.content[0].text
    assert text.startswith("The turn failed: ")
    assert "model call: The request was refused: bad input." in text


@pytest.mark.asyncio
async def test_missing_variables_and_terminated_threads_are_tool_errors(tmp_path: Path) -> None:
    async with serving(tmp_path) as (runtime, base, key), mcp_client(f"{base}/mcp", key) as client:
        beta = await client.call_tool("beta__helper", {"message": "Hi"})
        assert beta.is_error
        assert beta.content[0].text == (
            "Agent 'beta/helper' needs variables that have no value: BETA_KEY. "
            "Set them on the server (instance env)."
        )
        first = await client.call_tool(HELPER, {"message": "Hi"})
        assert first.structured_content is not None
        thread_id = first.structured_content["thread_id"]
        await (await runtime.get_thread(thread_id)).terminate()
        again = await client.call_tool(HELPER, {"message": "Hi", "thread_id": thread_id})
    assert again.is_error
    assert again.content[0].text == (
        f"Thread {thread_id} is terminated; call without thread_id to start a new one."
    )


@pytest.mark.asyncio
async def test_a_secret_variable_value_is_never_returned(tmp_path: Path) -> None:
    async with serving(tmp_path) as (_, base, key), mcp_client(f"{base}/mcp", key) as client:
        result = await client.call_tool(HELPER, {"message": "tell me the secret"})
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert result.structured_content["answer"] == "The token is [redacted]."
    assert all(SECRET not in item.text for item in result.content if item.type == "text")


@pytest.mark.asyncio
async def test_progress_carries_tool_calls_events_and_subagent_steps(tmp_path: Path) -> None:
    weather, summary = ProgressLog(), ProgressLog()
    async with serving(tmp_path) as (runtime, base, key), mcp_client(f"{base}/mcp", key) as client:
        checked = await client.call_tool(HELPER, {"message": "weather?"}, progress_callback=weather)
        summed = await client.call_tool(HELPER, {"message": "summarize"}, progress_callback=summary)
        assert summed.structured_content is not None
        parent = await runtime.get_thread(summed.structured_content["thread_id"])
        child = parent.children[0].reference
    assert checked.structured_content is not None
    assert checked.structured_content["answer"] == "Done."
    assert weather.messages == [
        "calling tool weather",
        "event weather_checked",
        "tool weather done (success)",
    ]
    assert summary.messages[0] == "calling tool summarizer"
    assert f"subagent {child}: calling tool finish" in summary.messages
    assert f"subagent {child}: tool finish done (success)" in summary.messages
    assert summary.messages[-1] == "tool summarizer done (success)"
    assert summary.values == sorted(summary.values)  # increasing, as MCP requires


@pytest.mark.asyncio
async def test_arguments_outside_the_schema_are_tool_errors(tmp_path: Path) -> None:
    async with serving(tmp_path) as (_, base, key), mcp_client(f"{base}/mcp", key) as client:
        empty = await client.call_tool(HELPER, {"message": "  "})
        extra = await client.call_tool(HELPER, {"message": "Hi", "env": {"A": "b"}})
        number = await client.call_tool(HELPER, {"message": "Hi", "thread_id": 7})
        unknown = await client.call_tool("alpha__summarizer", {"message": "Hi"})
    assert empty.is_error and "'message' is required" in empty.content[0].text
    assert extra.is_error and "Unknown argument(s) env" in extra.content[0].text
    assert number.is_error and "'thread_id' must be a string" in number.content[0].text
    assert unknown.is_error and "Unknown tool 'alpha__summarizer'" in unknown.content[0].text


def test_frames_without_anything_to_tell_give_no_progress() -> None:
    assert describe({"type": "message_chunk", "chunk": "Hel", "depth": 0}) is None
    assert describe({"type": "message_data", "data": {"role": "assistant"}}) is None
    assert describe({"type": "queued", "queue_id": "q", "role": "user", "silent": False}) is None
    child_answer = {
        "type": "message_data",
        "subagent_id": "c1",
        "data": {"role": "assistant", "status": "completed", "content": "ok"},
    }
    assert describe(child_answer) == "subagent c1: answered"
