"""A remote agent's files given by URL: downloaded into the child's files, or a clear error.

The remote agent is :class:`a2a_sdk_agent.SdkAgent` (the a2a-sdk's server classes alone); its
``link NAME`` answer names ``<its base>/files/NAME`` in a ``url`` file part, served behind the
same bearer token as its A2A endpoint. The parent runs in-process with a scripted model.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

pytest.importorskip("a2a.server")

from a2a_sdk_agent import LINKED, SIGNATURE, SdkAgent  # noqa: E402

from sa_core import Pack, define_agent, define_model, define_prompt, define_remote_agent  # noqa: E402
from sa_core.testing import FunctionProvider  # noqa: E402

pytestmark = pytest.mark.asyncio
TOKEN = "file-token-5678"


def boss_pack(agent: SdkAgent) -> Pack:
    helper = define_remote_agent(
        name="helper", url=agent.base, headers={"Authorization": "Bearer ${HELPER_TOKEN}"}
    )
    main = define_prompt(
        name="main", model="m", prompt="Boss.", include_chat=True,
        tools=[{"name": "helper", "blocking": True}],
    )  # fmt: skip
    return Pack(
        name="desk",
        agents=[define_agent(name="boss", side_a={"prompt": "main"})],
        prompts=[main],
        models=[define_model(name="m", provider="test", model="boss")],
        remote_agents=[helper],
    )


def calling(message: str) -> FunctionProvider:
    """The parent's model: calls ``helper`` with ``message``, then says ``ok``."""
    said: list[str] = []

    def answer(request: Any) -> Any:
        said.append("x")
        if len(said) == 1:
            return {"tool_calls": [{"name": "helper", "arguments": {"message": message}}]}
        return "ok"

    return FunctionProvider(answer)


async def run(factory: Any, agent: SdkAgent, message: str) -> dict[str, Any]:
    """Run one blocking call; what the parent, the child and their logs hold afterwards."""
    async with factory(packs=[boss_pack(agent)], providers={"test": calling(message)}) as rt:
        thread = await rt.create_thread(
            "boss", env={"HELPER_TOKEN": TOKEN}, env_types={"HELPER_TOKEN": "secret"}
        )
        await thread.send_message("go")
        await rt.wait_idle()
        messages = (await thread.get_messages(include_silent=True)).messages
        [tool] = [m for m in messages if m.role == "tool"]
        child = await rt.get_thread(thread.children[0].reference)
        child_messages = (await child.get_messages(include_silent=True)).messages
        copies = {ref.name: await thread.read_file(ref.path) for ref in tool.attachments or []}
        logs = [*await thread.get_logs(limit=100), *await child.get_logs(limit=100)]
    stored = " ".join(
        [m.model_dump_json() for m in [*messages, *child_messages]]
        + [log.model_dump_json() for log in logs]
    )
    return {"tool": tool, "copies": copies, "stored": stored}


async def test_a_linked_file_is_downloaded_with_the_agents_headers(
    sa_runtime_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with SdkAgent(token=TOKEN) as agent:
        found = await run(sa_runtime_factory, agent, "link small.txt")
    assert found["copies"] == {"small.txt": LINKED["small.txt"]}
    ours = "\n".join(  # this server's log lines (the agent's own are its business)
        r.getMessage() for r in caplog.records if r.name.startswith(("httpx", "sa_core"))
    )
    assert f"POST {agent.base}/rpc" in ours  # the A2A requests are logged...
    assert SIGNATURE not in ours and TOKEN not in ours  # ...never a key of the file's URL
    assert found["tool"].content.startswith("Linked.")
    assert agent.file_authorizations == [f"Bearer {TOKEN}"]  # its own origin: its headers


@pytest.mark.parametrize(
    ("message", "env", "reason"),
    [
        ("link gone.txt", {}, "HTTP 404, an error"),
        ("link big.bin", {"SA_A2A_FILE_MAX_BYTES": "1000"}, "over the limit of 1000"),
        ("link-other small.txt", {}, "its host is not public"),
    ],
    ids=["missing", "too-big", "private-elsewhere"],
)
async def test_a_linked_file_that_cannot_be_fetched_is_a_clear_tool_error(
    sa_runtime_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
    message: str,
    env: dict[str, str],
    reason: str,
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with SdkAgent(token=TOKEN) as agent:
        found = await run(sa_runtime_factory, agent, message)
        base = agent.base
    result = found["tool"].content
    name = message.split(" ", 1)[1]
    host = base.replace("127.0.0.1", "localhost") if message.startswith("link-other") else base
    assert result.startswith(
        f"Failed to execute tool: Remote agent 'helper' ({base}/.well-known/agent-card.json) "
        f"answered with the file "
        f"'{name}' at {host}/files/{name}, which could not be fetched: "
    ), result
    assert reason in result
    assert found["copies"] == {}
    assert SIGNATURE not in found["stored"]  # a URL's query may be a key
    assert TOKEN not in found["stored"]
    if message.startswith("link-other"):
        assert agent.file_authorizations == []  # refused before any request


async def test_a_private_host_elsewhere_is_fetched_without_headers_when_allowed(
    sa_runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SA_A2A_FETCH_ALLOW_PRIVATE", "1")
    with SdkAgent() as agent:
        found = await run(sa_runtime_factory, agent, "link-other small.txt")
    assert found["copies"] == {"small.txt": LINKED["small.txt"]}
    assert agent.file_authorizations == [""]  # another origin: none of the agent's headers
