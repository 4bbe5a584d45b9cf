"""MCP tools end to end: a real MCP server (the ``mcp`` SDK) over stdio and streamable HTTP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sa_core import (
    Pack,
    PackValidationError,
    Runtime,
    define_agent,
    define_mcp_server,
    define_model,
    define_prompt,
)
from sa_core.providers import ProviderRequest
from sa_core.testing import FunctionProvider

pytest.importorskip("mcp")

SERVER = str(Path(__file__).with_name("support_mcp_server.py"))
MODEL = define_model(name="fast", provider="test", model="test-model")


def stdio_server(env: dict[str, str] | None = None) -> Any:
    return define_mcp_server(
        name="testing",
        command=[sys.executable, SERVER, "stdio"],
        env={"GREETING": "hello"} if env is None else env,
    )


def mcp_pack(tools: list[Any], server: Any | None = None) -> Pack:
    prompt = define_prompt(name="main", model="fast", prompt="You use tools.", tools=tools)
    agent = define_agent(name="helper", side_a={"prompt": "main"})
    return Pack(
        name="mcpdemo",
        agents=[agent],
        prompts=[prompt],
        models=[MODEL],
        mcp_servers=[server or stdio_server()],
    )


def calling(*calls: tuple[str, dict[str, Any]]) -> FunctionProvider:
    """A model that makes the given tool calls one step each, then says 'done: <last result>'."""

    def answer(request: ProviderRequest) -> Any:
        done = sum(1 for m in request.messages if m.role == "assistant")
        if done < len(calls):
            name, arguments = calls[done]
            return {"tool_calls": [{"name": name, "arguments": arguments}]}
        return "done: " + str(request.messages[-1].content)

    return FunctionProvider(answer)


async def run_once(runtime: Runtime, text: str = "go", ceiling: float = 60) -> list[Any]:
    thread = await runtime.create_thread("helper")
    await thread.send_message(text)
    await runtime.wait_idle(ceiling)
    return (await thread.get_messages()).messages


@pytest.mark.asyncio
async def test_stdio_mcp_tool_call_runs_on_the_server_with_schema_from_tools_list(
    sa_runtime_factory,
):
    provider = calling(("testing_add", {"a": 2, "b": 40}), ("testing_echo", {"text": "hey"}))
    pack = mcp_pack(["testing.add", "testing.echo"])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as runtime:
        messages = await run_once(runtime)
    tools = [m for m in messages if m.role == "tool"]
    assert [(m.name, m.content, m.tool_status) for m in tools] == [
        ("testing_add", "42", "success"),
        ("testing_echo", "hello: hey", "success"),
    ]
    assert messages[-1].content == "done: hello: hey"
    offered = {t.name: t for t in provider.requests[0].tools}
    assert sorted(offered) == ["testing_add", "testing_echo"]
    assert offered["testing_add"].description == "Add two integers."
    assert offered["testing_add"].parameters["required"] == ["a", "b"]
    assert offered["testing_add"].parameters["properties"]["a"]["type"] == "integer"


@pytest.mark.asyncio
async def test_server_wildcard_offers_every_tool_and_maps_images_and_errors(sa_runtime_factory):
    provider = calling(
        ("testing_pixel", {}), ("testing_broken", {"reason": "test"}), ("testing_add", {"a": "x"})
    )
    async with sa_runtime_factory(
        packs=[mcp_pack(["testing.*"])], providers={"test": provider}
    ) as runtime:
        messages = await run_once(runtime)
        pixel = [m for m in messages if m.role == "tool"][0]
        assert pixel.attachments and pixel.attachments[0].name == "pixel-1.png"
        image = await runtime.store.read_file(messages[0].thread_id, pixel.attachments[0].path)
    assert sorted(t.name for t in provider.requests[0].tools) == [
        "testing_add",
        "testing_broken",
        "testing_echo",
        "testing_pid",
        "testing_pixel",
        "testing_slow",
    ]
    pixel, broken, bad_args = [m for m in messages if m.role == "tool"]
    assert pixel.tool_status == "success"
    assert pixel.attachments and pixel.attachments[0].mime_type == "image/png"
    assert image is not None and image[:4] == b"\x89PNG"
    assert broken.tool_status == "error"
    assert broken.content.startswith("Failed to execute tool:")
    assert "broken on purpose: test" in broken.content
    assert bad_args.tool_status == "error" and "validation" in bad_args.content.lower()


@pytest.mark.asyncio
async def test_a_call_past_the_servers_timeout_fails_and_the_server_still_answers(
    sa_runtime_factory,
):
    server = define_mcp_server(
        name="testing", command=[sys.executable, SERVER, "stdio"], env={}, timeout=1
    )
    provider = calling(("testing_slow", {"seconds": 120}), ("testing_add", {"a": 2, "b": 3}))
    async with sa_runtime_factory(
        packs=[mcp_pack(["testing.*"], server)], providers={"test": provider}
    ) as runtime:
        started = time.monotonic()
        messages = await run_once(runtime, ceiling=110)
        took = time.monotonic() - started
    slow, add = [m for m in messages if m.role == "tool"]
    assert slow.tool_status == "error"
    assert "did not answer slow within 1 seconds" in slow.content
    assert add.tool_status == "success" and add.content == "5"
    assert took < 100  # the call gave up after its second, not after the tool's 120


@pytest.mark.asyncio
async def test_a_per_call_timeout_shorter_than_the_servers_start_still_lets_it_start_and_serve(
    sa_runtime_factory,
):
    # The server sleeps 3 s before serving: longer than the 1 s per-call timeout, well inside
    # the default 60 s start_timeout.
    server = define_mcp_server(
        name="testing",
        command=[sys.executable, SERVER, "stdio"],
        env={"MCP_START_DELAY": "3", "GREETING": "hi"},
        timeout=1,
    )
    assert server.start_timeout == 60
    provider = calling(("testing_add", {"a": 2, "b": 3}), ("testing_echo", {"text": "there"}))
    async with sa_runtime_factory(
        packs=[mcp_pack(["testing.*"], server)], providers={"test": provider}
    ) as runtime:
        started = time.monotonic()
        messages = await run_once(runtime)
        took = time.monotonic() - started
        starts = runtime.mcp.connections[("mcpdemo", "testing")].starts
    add, echo = [m for m in messages if m.role == "tool"]
    assert (add.content, add.tool_status) == ("5", "success")
    assert (echo.content, echo.tool_status) == ("hi: there", "success")
    assert starts == 1
    assert took >= 3  # the start really outlasted the per-call timeout


@pytest.mark.asyncio
async def test_a_server_slower_than_its_start_timeout_fails_the_step_naming_start_timeout(
    sa_runtime_factory,
):
    server = define_mcp_server(
        name="testing",
        command=[sys.executable, SERVER, "stdio"],
        env={"MCP_START_DELAY": "60"},
        start_timeout=0.5,
    )
    provider = calling(("testing_add", {"a": 1, "b": 1}))
    async with sa_runtime_factory(
        packs=[mcp_pack(["testing.add"], server)], providers={"test": provider}
    ) as runtime:
        messages = await run_once(runtime)
        logs = await runtime.store.list_logs(messages[0].thread_id)
    errors = [str(log) for log in logs if "step_error" in str(log)]
    assert any(
        "MCP server 'testing' did not start within 0.5 seconds (its start_timeout)" in e
        for e in errors
    ), errors
    assert not [m for m in messages if m.role == "tool"]


@pytest.mark.asyncio
async def test_crashed_server_restarts_on_the_next_call(sa_runtime_factory):
    provider = calling(("testing_pid", {}))
    async with sa_runtime_factory(
        packs=[mcp_pack(["testing.pid"])], providers={"test": provider}
    ) as runtime:
        first = [m for m in await run_once(runtime) if m.role == "tool"][0]
        os.kill(int(first.content), signal.SIGKILL)
        second = [m for m in await run_once(runtime) if m.role == "tool"][0]
        connection = runtime.mcp.connections[("mcpdemo", "testing")]
        starts = connection.starts
    assert second.tool_status == "success"
    assert second.content != first.content
    assert starts == 2


@pytest.mark.asyncio
async def test_server_is_shared_by_threads_and_stops_with_the_runtime(sa_runtime_factory):
    provider = calling(("testing_pid", {}))
    async with sa_runtime_factory(
        packs=[mcp_pack(["testing.pid"])], providers={"test": provider}
    ) as runtime:
        one = [m for m in await run_once(runtime) if m.role == "tool"][0].content
        two = [m for m in await run_once(runtime) if m.role == "tool"][0].content
        assert one == two
        assert runtime.mcp.connections[("mcpdemo", "testing")].starts == 1
    pid = int(one)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.asyncio
async def test_server_starts_only_when_a_step_needs_its_tools(sa_runtime_factory):
    pack = mcp_pack(["testing.add"])
    async with sa_runtime_factory(packs=[pack], providers={"test": calling()}) as runtime:
        await runtime.create_thread("helper")
        assert runtime.mcp.connections == {}


@pytest.mark.asyncio
async def test_server_env_variables_resolve_from_instance_env_and_stay_secret(
    sa_runtime_factory,
):
    provider = calling(("testing_echo", {"text": "hey"}))
    pack = mcp_pack(["testing.echo"], stdio_server({"GREETING": "${MCP_GREETING}"}))
    async with sa_runtime_factory(
        packs=[pack], providers={"test": provider}, env={"MCP_GREETING": "sekrit-greeting"}
    ) as runtime:
        messages = await run_once(runtime)
    tool = [m for m in messages if m.role == "tool"][0]
    assert tool.content == "[redacted]: hey"


@pytest.mark.asyncio
async def test_missing_server_variable_names_it(sa_runtime_factory):
    provider = calling(("testing_add", {"a": 1, "b": 1}))
    pack = mcp_pack(["testing.add"], stdio_server({"GREETING": "${MCP_GREETING}"}))
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as runtime:
        thread = await runtime.create_thread("helper")
        await thread.send_message("go")
        await runtime.wait_idle(60)
        logs = await runtime.store.list_logs(thread.thread_id)
    errors = [str(log) for log in logs if "step_error" in str(log)]
    assert any("MCP_GREETING" in e for e in errors)


def test_validation_checks_the_server_name_only():
    mcp_pack(["testing.anything", "testing.*"]).validate()
    with pytest.raises(PackValidationError) as caught:
        mcp_pack(["nosuch.add"]).validate()
    assert "MCP server 'nosuch'" in str(caught.value)
    assert "define_mcp_server(name='nosuch'" in str(caught.value)


def test_server_definition_needs_exactly_one_transport():
    with pytest.raises(ValueError, match="exactly one of command"):
        define_mcp_server(name="x")
    with pytest.raises(ValueError, match="exactly one of command"):
        define_mcp_server(name="x", command=["a"], url="http://127.0.0.1:1/mcp")
    with pytest.raises(ValueError, match="headers apply to url"):
        define_mcp_server(name="x", command=["a"], headers={"A": "b"})
    with pytest.raises(ValueError, match="must start with a letter"):
        define_mcp_server(name="a.b", command=["a"])


@pytest.mark.parametrize("field", ["timeout", "start_timeout"])
@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf")])
def test_server_timeouts_must_be_positive_finite_seconds_naming_the_field(field, value):
    with pytest.raises(ValueError, match=f"'x': {field} must be a positive number of seconds"):
        define_mcp_server(name="x", command=["a"], **{field: value})


# -- streamable HTTP ------------------------------------------------------------------------


@pytest.fixture
def http_server() -> Iterator[tuple[str, str]]:
    """A streamable HTTP MCP server on 127.0.0.1 requiring an Authorization header."""
    token = "Bearer mcp-secret-token-123"
    process = subprocess.Popen(
        [sys.executable, SERVER, "http"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "MCP_TEST_TOKEN": token, "GREETING": "remote"},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp", token
    finally:
        process.terminate()
        process.wait(60)
        if process.stdout is not None:
            process.stdout.close()


def http_pack(url: str) -> Pack:
    server = define_mcp_server(name="testing", url=url, headers={"Authorization": "${MCP_AUTH}"})
    return mcp_pack(["testing.echo", "testing.add"], server)


@pytest.mark.asyncio
async def test_http_mcp_server_gets_secret_header_and_runs_tool(sa_runtime_factory, http_server):
    url, token = http_server
    provider = calling(("testing_echo", {"text": f"say {token}"}))
    async with sa_runtime_factory(
        packs=[http_pack(url)], providers={"test": provider}, env={"MCP_AUTH": token}
    ) as runtime:
        messages = await run_once(runtime)
        logs = await runtime.store.list_logs(messages[0].thread_id)
    tool = [m for m in messages if m.role == "tool"][0]
    assert tool.tool_status == "success"
    assert tool.content == "remote: say [redacted]"
    dumped = json.dumps([m.model_dump(mode="json") for m in messages]) + str(logs)
    assert token not in dumped.replace(f"say {token}", "")


def test_mcp_tools_over_the_http_api(sa_database_url, http_server):
    from litestar.testing import TestClient

    from sa_core.server import create_app

    url, token = http_server
    runtime = Runtime(
        packs=[http_pack(url)],
        providers={"test": calling(("testing_add", {"a": 20, "b": 22}))},
        database_url=sa_database_url,
        load_entrypoints=False,
        env={"MCP_AUTH": token},
    )
    with TestClient(create_app(runtime)) as client:
        key, _ = client.blocking_portal.call(runtime.store.create_api_key, "tests")
        client.headers["Authorization"] = f"Bearer {key}"
        base = "/api/packages/mcpdemo"
        created = client.post(f"{base}/threads", json={"agent": "helper"})
        assert created.status_code == 201, created.text
        thread_id = created.json()["id"]
        sent = client.post(f"{base}/threads/{thread_id}/messages", json={"content": "add"})
        assert sent.status_code == 202, sent.text
        client.blocking_portal.call(runtime.wait_idle, 60)
        listed = client.get(f"{base}/threads/{thread_id}/messages").json()["messages"]
    tool = [m for m in listed if m["role"] == "tool"][0]
    assert (tool["name"], tool["content"], tool["tool_status"]) == ("testing_add", "42", "success")
    assert listed[-1]["content"] == "done: 42"


@pytest.mark.asyncio
async def test_prompt_config_puts_an_mcp_tool_behind_approval(sa_runtime_factory):
    provider = calling(("testing_add", {"a": 1, "b": 2}))
    pack = mcp_pack([{"name": "testing.add", "requires_approval": True}])
    async with sa_runtime_factory(packs=[pack], providers={"test": provider}) as runtime:
        thread = await runtime.create_thread("helper")
        await thread.send_message("go")
        await runtime.wait_idle(60)
        pending = await thread.pending_approvals()
        assert [(p["name"], p["arguments"]) for p in pending] == [("testing_add", {"a": 1, "b": 2})]
        await thread.approve(pending[0]["tool_call_id"], arguments={"a": 40, "b": 2})
        await runtime.wait_idle(60)
        messages = (await thread.get_messages()).messages
    tool = [m for m in messages if m.role == "tool"][0]
    assert (tool.content, tool.tool_status) == ("42", "success")
    assert messages[-1].content == "done: 42"


def test_an_agents_closure_carries_the_mcp_servers_its_prompts_use():
    from sa_core.packaging.closure import compute_closure

    pack = mcp_pack(["testing.add"])
    pack.mcp_servers = [*pack.mcp_servers, define_mcp_server(name="unused", command=["x"])]
    closure = compute_closure(pack, "helper")
    assert [s.name for s in closure.mcp_servers] == ["testing"]
    assert closure.names()["mcp_servers"] == ["testing"]
    assert any("MCP server 'testing'" in note for note in closure.external)
