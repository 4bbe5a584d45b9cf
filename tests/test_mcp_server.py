"""The MCP server of a real ``sa serve`` on loopback, driven by the official ``mcp`` SDK client.

One ``sa serve --test-provider`` (SQLite) serves the example packs for the whole module; each
test talks to it over HTTP only, as an MCP host would. The last test points a second
``Runtime``'s pack at it with ``define_mcp_server(url=...)``: our client against our server.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from mcp_serve_kit import (
    LOOKUP,
    ProgressLog,
    Served,
    create_key,
    mcp_client,
    new_key,
    revoke_key,
)

from sa_core import Pack, Runtime, define_agent, define_mcp_server, define_model, define_prompt
from sa_core.testing import TestProvider, TestScript

pytest.importorskip("mcp")

TRIAGE = "support_desk__triage"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The served example packs: base URL, database and a key."""
    tmp = tmp_path_factory.mktemp("mcp-serve")
    db = f"sqlite:///{tmp / 'sa.db'}"
    (tmp / "notes").mkdir()
    served = Served(tmp, db, env={"NOTES_DIR": str(tmp / "notes")})  # the notes pack's folder
    try:
        assert served.wait_line("  MCP:") == f"  MCP:     {served.url}/mcp"  # in the banner
        served.wait_ready()
        yield {"url": served.url, "db": db, "key": create_key(db), "served": served}
    finally:
        served.stop()


@pytest.mark.asyncio
async def test_list_tools_names_every_entry_agent_with_its_schemas(server: dict[str, Any]) -> None:
    async with mcp_client(f"{server['url']}/mcp", server["key"]) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert {TRIAGE, "reminders__reminder_assistant", "notes__notes_keeper"} <= set(tools)
    assert "support_desk__billing" not in tools  # not an entry agent of its pack
    triage = tools[TRIAGE]
    assert triage.description is not None
    assert triage.description.startswith("Front desk. Greets customers and routes them")
    assert triage.input_schema["required"] == ["message"]
    assert set(triage.input_schema["properties"]) == {"message", "thread_id"}
    assert triage.output_schema is not None
    assert triage.output_schema["required"] == ["answer", "thread_id"]

    async with mcp_client(f"{server['url']}/api/packages/reminders/mcp", server["key"]) as one:
        assert [t.name for t in (await one.list_tools()).tools] == ["reminders__reminder_assistant"]


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_call_reports_progress_and_a_second_call_continues_its_thread(
    server: dict[str, Any], mode: str
) -> None:
    progress = ProgressLog()
    async with mcp_client(f"{server['url']}/mcp", server["key"], mode=mode) as client:
        first = await client.call_tool(TRIAGE, {"message": LOOKUP}, progress_callback=progress)
        assert not first.is_error, first.content
        answer = first.structured_content
        assert answer is not None
        assert "Ada Lovelace" in answer["answer"]  # the tool's result, as the offline model says
        thread_id = answer["thread_id"]
        texts = [item.text for item in first.content if item.type == "text"]
        assert texts == [answer["answer"], f"thread_id: {thread_id}"]
        assert progress.messages == [
            "calling tool lookup_order",
            "tool lookup_order done (success)",
        ]
        assert progress.values == [1, 2]

        second = await client.call_tool(TRIAGE, {"message": "Thanks!", "thread_id": thread_id})
        era = client.protocol_version
    assert era.startswith("2025-") if mode == "legacy" else era.startswith("2026-")
    assert not second.is_error, second.content
    assert second.structured_content == {
        "answer": "Test response received.",
        "thread_id": thread_id,
    }
    # the HTTP API shows one thread holding both turns
    api = f"{server['url']}/api/packages/support_desk/threads/{thread_id}"
    headers = {"Authorization": f"Bearer {server['key']}"}
    messages = httpx.get(f"{api}/messages", headers=headers, timeout=30).json()["messages"]
    users = [m["content"] for m in messages if m["role"] == "user"]
    assert users == [LOOKUP, "Thanks!"]
    thread = httpx.get(api, headers=headers, timeout=30).json()
    assert thread["agent"] == "triage" and "mcp" in thread["tags"]


@pytest.mark.asyncio
async def test_a_thread_of_another_package_or_agent_is_never_continued(
    server: dict[str, Any],
) -> None:
    async with mcp_client(f"{server['url']}/mcp", server["key"]) as client:
        other = await client.call_tool("reminders__reminder_assistant", {"message": "Hi"})
        assert not other.is_error, other.content
        assert other.structured_content is not None
        foreign = other.structured_content["thread_id"]
        refused = await client.call_tool(TRIAGE, {"message": "Hi", "thread_id": foreign})
    assert refused.is_error
    assert refused.content[0].text == f"Agent 'support_desk/triage' has no thread {foreign!r}."

    async with mcp_client(f"{server['url']}/api/packages/support_desk/mcp", server["key"]) as one:
        missing = await one.call_tool("reminders__reminder_assistant", {"message": "Hi"})
        assert missing.is_error
        assert "Unknown tool 'reminders__reminder_assistant'" in missing.content[0].text
        bad = await one.call_tool(TRIAGE, {"message": "Hi", "thread_id": foreign})
        assert bad.is_error and "has no thread" in bad.content[0].text


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


HOW_TO = "configure your MCP host to send 'Authorization: Bearer <key>'"


@pytest.mark.asyncio
async def test_no_key_or_a_revoked_key_is_refused_with_a_message_the_sdk_shows(
    server: dict[str, Any],
) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    for path in ("/mcp", "/api/packages/support_desk/mcp"):
        refused = httpx.post(f"{server['url']}{path}", json=body, headers=headers, timeout=30)
        assert refused.status_code == 403, refused.text  # a 401 would start MCP's OAuth flow
        assert "www-authenticate" not in refused.headers
        error = refused.json()["error"]
        assert error["message"].startswith("No API key was sent.") and HOW_TO in error["message"]
    for mode in ("auto", "legacy"):  # 2026 hosts probe first; 2025 hosts send initialize
        statuses: list[int] = []
        with pytest.raises(BaseException) as no_key:
            async with mcp_client(f"{server['url']}/mcp", None, statuses, mode=mode) as client:
                await client.list_tools()
        errors = [leaf for leaf in leaves(no_key.value) if isinstance(leaf, MCPError)]
        assert errors, no_key.value
        assert "No API key was sent." in str(errors[0]) and HOW_TO in str(errors[0])
        assert statuses and set(statuses) == {403}

    key = await new_key(server["db"], "to-revoke")
    async with mcp_client(f"{server['url']}/mcp", key) as client:
        assert (await client.list_tools()).tools
    await revoke_key(server["db"], key)
    with pytest.raises(BaseException) as revoked:
        async with mcp_client(f"{server['url']}/mcp", key) as client:
            await client.list_tools()
    errors = [leaf for leaf in leaves(revoked.value) if isinstance(leaf, MCPError)]
    assert errors and str(errors[0]).startswith("Unknown or revoked API key.")


@pytest.mark.asyncio
async def test_a_client_ready_for_oauth_starts_no_oauth_flow_and_shows_the_message(
    server: dict[str, Any],
) -> None:
    """Hosts such as the MCP Inspector carry an OAuth provider; our refusal must not wake it."""
    import httpx2
    from mcp import Client
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

    class Storage:
        async def get_tokens(self) -> OAuthToken | None:
            return None

        async def set_tokens(self, tokens: OAuthToken) -> None:
            raise AssertionError("no OAuth flow should run")

        async def get_client_info(self) -> OAuthClientInformationFull | None:
            return None

        async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
            raise AssertionError("no client should be registered")

    url = f"{server['url']}/mcp"
    oauth = OAuthClientProvider(
        url,
        OAuthClientMetadata(redirect_uris=["http://127.0.0.1:9/callback"]),
        Storage(),
    )
    asked: list[str] = []

    async def record(request: Any) -> None:
        asked.append(f"{request.method} {request.url.path}")

    with pytest.raises(BaseException) as refused:
        async with (
            httpx2.AsyncClient(auth=oauth, event_hooks={"request": [record]}) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            await client.list_tools()
    errors = [leaf for leaf in leaves(refused.value) if isinstance(leaf, MCPError)]
    assert errors and "No API key was sent." in str(errors[0]), refused.value
    assert asked and all(line == "POST /mcp" for line in asked), asked  # no discovery


@pytest.mark.asyncio
async def test_a_runtime_calls_an_agent_of_another_sa_serve_as_an_mcp_tool(
    server: dict[str, Any], tmp_path: Path
) -> None:
    remote = define_mcp_server(
        name="desk",
        url=f"{server['url']}/mcp",
        headers={"Authorization": "Bearer ${DESK_KEY}"},
        timeout=120,
    )
    prompt = define_prompt(
        name="main", model="m", prompt="Ask the desk.", include_chat=True,
        tools=[f"desk.{TRIAGE}"],
    )  # fmt: skip
    pack = Pack(
        name="client_side",
        agents=[define_agent(name="asker", side_a={"prompt": "main"})],
        prompts=[prompt],
        models=[define_model(name="m", provider="test", model="m")],
        mcp_servers=[remote],
    )
    script = (
        TestScript()
        .add_tool_call_response([{"name": f"desk_{TRIAGE}", "arguments": {"message": LOOKUP}}])
        .add_text_response("The order is delivered.")
    )
    async with Runtime(
        packs=[pack],
        providers={"test": TestProvider(script)},
        database_url=f"sqlite:///{tmp_path / 'client.db'}",
        load_entrypoints=False,
        env={"DESK_KEY": server["key"]},
    ) as runtime:
        thread = await runtime.create_thread("asker")
        await thread.send_message("Where is order A1001?")
        messages = (await thread.get_messages()).messages
    tool = next(m for m in messages if m.role == "tool")
    assert tool.tool_status == "success", tool.content
    assert tool.content is not None
    assert "Ada Lovelace" in tool.content
    assert "thread_id: " in tool.content
    assert server["key"] not in tool.content
    assert messages[-1].content == "The order is delivered."


def test_the_python_example_of_the_docs_runs_as_written(
    server: dict[str, Any], tmp_path: Path
) -> None:
    text = (ROOT / "docs" / "protocols.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    example = next(block for block in blocks if "streamable_http_client" in block)
    (tmp_path / "example.py").write_text(example)
    env = {**os.environ, "MCP_URL": f"{server['url']}/mcp", "SA_API_KEY": server["key"]}
    done = subprocess.run(
        [sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert TRIAGE in lines
    assert "  ... calling tool lookup_order" in lines
    assert any("Ada Lovelace" in line for line in lines)
    assert lines[-1].startswith("Test response received. on thread ")


@pytest.mark.asyncio
async def test_a_turn_waiting_for_an_approval_says_so(server: dict[str, Any]) -> None:
    async with mcp_client(f"{server['url']}/mcp", server["key"]) as client:
        result = await client.call_tool(
            "notes__notes_keeper", {"message": '/tool publish_note {"name": "groceries"}'}
        )
    assert result.is_error
    text = result.content[0].text
    assert text.startswith("The turn waits for a human to approve a tool call (thread ")
    thread_id = text.split("(thread ", 1)[1].split(")", 1)[0]
    approvals = httpx.get(
        f"{server['url']}/api/packages/notes/threads/{thread_id}/approvals",
        headers={"Authorization": f"Bearer {server['key']}"},
        timeout=30,
    ).json()["approvals"]
    assert [item["name"] for item in approvals] == ["publish_note"]
