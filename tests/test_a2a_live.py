"""The A2A endpoints of a real ``sa serve`` on 127.0.0.1, driven by the official a2a-sdk client.

Each test starts ``sa serve --test-provider`` on a SQLite file with a small pack (a chat agent
with an approval-gated tool, a tool that never returns, and a tool that writes a file), and
talks to it only over HTTP. The offline model calls a tool when a message is
``/tool NAME {json}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a.client")
pytestmark = pytest.mark.asyncio

from a2a.client import A2ACardResolver, Client, ClientConfig, create_client  # noqa: E402
from a2a.client.errors import A2AClientError  # noqa: E402
from a2a.types.a2a_pb2 import (  # noqa: E402
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError  # noqa: E402
from serve_process import ServeProcess, free_port, offline_env  # noqa: E402

PACK = """
import asyncio
from pydantic import BaseModel
from sa_core import Pack, define_agent, define_model, define_prompt, define_tool

class Pay(BaseModel):
    to: str
    amount: int

class Nothing(BaseModel):
    pass

async def hang(state, args):
    await asyncio.Event().wait()

async def report(state, args):
    await state.write_file("/out/report.txt", b"the report")
    return "written"

pack = Pack(
    name="a2ademo",
    agents=[define_agent(name="helper", description="Helps with payments.",
                         side_a={"prompt": "main"})],
    prompts=[define_prompt(name="main", model="m", prompt="You are helpful.", include_chat=True,
                           tools=["transfer", "hang", "report"])],
    models=[define_model(name="m", provider="openai", model="gpt-4o-mini")],
    tools=[
        define_tool(name="transfer", description="Send money.", args=Pay,
                    execute=lambda s, a: f"sent {a.amount} to {a.to}", requires_approval=True),
        define_tool(name="hang", description="Waits forever.", args=Nothing, execute=hang),
        define_tool(name="report", description="Writes a report.", args=Nothing, execute=report),
    ],
)
"""
OTHER_PACK = """
from sa_core import Pack, define_agent, define_model, define_prompt

pack = Pack(
    name="a2aother",
    agents=[define_agent(name="other", side_a={"prompt": "main"})],
    prompts=[define_prompt(name="main", model="m", prompt="Secret ways.", include_chat=True)],
    models=[define_model(name="m", provider="openai", model="gpt-4o-mini")],
)
"""
API = "/api/packages/a2ademo"
AGENT = "/a2a/a2ademo/helper"


class Server(ServeProcess):
    """``sa serve`` with the two test packs, on a port kept across restarts."""

    def __init__(self, tmp: Path, port: int, db: str | None = None) -> None:
        packs = ("--pack", str(tmp / "a2a_pack.py"), "--pack", str(tmp / "other_pack.py"))
        database = db or f"sqlite:///{tmp / 'sa.db'}"
        super().__init__(tmp, database, *packs, "--test-provider", env=offline_env(), port=port)


@pytest.fixture
def served(tmp_path: Path) -> Any:
    """Start servers on one database (the first prints the key); stop them all at the end."""
    (tmp_path / "a2a_pack.py").write_text(PACK)
    (tmp_path / "other_pack.py").write_text(OTHER_PACK)
    started: list[Server] = []
    port = free_port()

    def start() -> Server:
        server = Server(tmp_path, port)
        started.append(server)
        server.wait_line("Serving packages")
        server.wait_line("Try it")
        return server

    first = start()
    key = first.printed_key()
    assert key, first.output()
    try:
        yield start, first, key
    finally:
        for server in started:
            server.stop()


@asynccontextmanager
async def a2a(base: str, key: str, *, streaming: bool = False) -> AsyncIterator[Client]:
    """An official client for the agent, from its resolved card, sending the key."""
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        for _ in range(200):  # the server may still be binding right after its banner
            try:
                card = await A2ACardResolver(http, base + AGENT).get_agent_card()
                break
            except Exception:  # noqa: BLE001
                await asyncio.sleep(0.05)
        client = await create_client(card, ClientConfig(httpx_client=http, streaming=streaming))
        yield client


def user(text: str, *, context_id: str = "", task_id: str = "") -> SendMessageRequest:
    message = Message(
        role=Role.ROLE_USER,
        message_id=os.urandom(8).hex(),
        parts=[Part(text=text)],
        context_id=context_id,
        task_id=task_id,
    )
    return SendMessageRequest(message=message)


async def last_task(client: Client, request: SendMessageRequest) -> tuple[Task, list[Any]]:
    """Send, collect every streamed item; return the final task and the items."""
    items: list[StreamResponse] = []
    task: Task | None = None
    async for item in client.send_message(request):
        items.append(item)
        if item.HasField("task"):
            task = item.task
    assert task is not None or items, items
    if task is None or task.status.state == TaskState.TASK_STATE_SUBMITTED:
        first = items[0]
        task_id = first.task.id if first.HasField("task") else first.status_update.task_id
        task = await client.get_task(GetTaskRequest(id=task_id))
    return task, items


def text_of(task: Task) -> str:
    return "".join(p.text for a in task.artifacts for p in a.parts if p.text)


async def test_card_send_and_get_after_restart(served: Any) -> None:
    start, server, key = served
    async with httpx.AsyncClient() as http:
        card = (await http.get(server.url + AGENT + "/.well-known/agent-card.json")).json()
        index = await http.get(server.url + "/a2a", headers={"Authorization": f"Bearer {key}"})
    assert card["name"] == "helper" and card["description"] == "Helps with payments."
    assert card["supportedInterfaces"][0]["url"] == server.url + AGENT
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert {"helper", "tool:transfer", "tool:report"} <= {s["id"] for s in card["skills"]}
    assert AGENT in {
        c["supportedInterfaces"][0]["url"][-len(AGENT) :] for c in index.json()["agents"]
    }

    async with a2a(server.url, key) as client:
        task, _ = await last_task(client, user("hello"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert text_of(task) == "Test response received."
        again, _ = await last_task(client, user("/tool report {}", context_id=task.context_id))
    assert again.context_id == task.context_id  # the same thread, a second turn
    assert again.status.state == TaskState.TASK_STATE_COMPLETED
    files = [p for a in again.artifacts for p in a.parts if p.filename]
    assert [(f.filename, f.raw) for f in files] == [("report.txt", b"the report")]

    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http:
        messages = await http.get(f"{server.url}{API}/threads/{task.context_id}/messages")
    assert [m["content"] for m in messages.json()["messages"] if m["role"] == "user"] == [
        "hello",
        "/tool report {}",
    ]

    server.stop()
    restarted = start()
    async with a2a(restarted.url, key) as client:
        fetched = await client.get_task(GetTaskRequest(id=task.id))
        fetched_again = await client.get_task(GetTaskRequest(id=again.id))
    assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
    assert text_of(fetched) == "Test response received."
    assert fetched.history[0].parts[0].text == "hello"
    assert text_of(fetched_again) == "report returned: written"


async def test_streaming(served: Any) -> None:
    _, server, key = served
    async with a2a(server.url, key, streaming=True) as client:
        kinds = []
        final: Any = None
        async for item in client.send_message(user("/tool report {}")):
            kinds.append(item.WhichOneof("payload"))
            if item.HasField("status_update"):
                final = item.status_update
        assert kinds[0] == "task"
        assert "artifact_update" in kinds
        assert final.status.state == TaskState.TASK_STATE_COMPLETED
        task = await client.get_task(GetTaskRequest(id=final.task_id))
    assert text_of(task) == "report returned: written"


def docs_example() -> str:
    """The A2A example of docs/protocols.md."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "protocols.md").read_text()
    section = text.split("## A2A", 1)[1].split("### Example with the official client", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


GATED_PACK = """
import asyncio
import os
from pathlib import Path
from pydantic import BaseModel
from sa_core import Pack, define_agent, define_model, define_prompt, define_tool

class Nothing(BaseModel):
    pass

async def wait_for_go(state, args):
    while not Path(os.environ["GO_FILE"]).exists():
        await asyncio.sleep(0.01)
    return "go"

pack = Pack(
    name="a2astream",
    agents=[define_agent(name="writer", side_a={"prompt": "main"})],
    prompts=[define_prompt(name="main", model="m", prompt="Write.", tools=["wait_for_go"])],
    models=[define_model(name="m", provider="openai", model="gpt-4o-mini")],
    tools=[define_tool(name="wait_for_go", description="Waits.", args=Nothing,
                       execute=wait_for_go)],
)
"""
STREAMED_SCRIPT = """
stream: {chunk_size: 4}
responses:
  - text: Let me check.
    tool_calls: [{name: wait_for_go, arguments: {}}]
  - text: It is sunny.
"""


async def test_the_docs_example_prints_a_streamed_answer_once(tmp_path: Path) -> None:
    """A streaming model: each artifact in chunks (append), then whole again (last_chunk).

    The tool holds the turn until the example has printed the first answer, so its chunks
    are streamed while the turn runs (an instant turn would settle before any chunk is read).
    """
    (tmp_path / "gated_pack.py").write_text(GATED_PACK)
    (tmp_path / "stream.yaml").write_text(STREAMED_SCRIPT)
    go = tmp_path / "go"
    server = ServeProcess(
        tmp_path, f"sqlite:///{tmp_path / 'sa.db'}", "--pack", str(tmp_path / "gated_pack.py"),
        "--test-provider=stream.yaml", env=offline_env({"GO_FILE": str(go)}),
    )  # fmt: skip
    try:
        server.wait_line("Try it")
        key = server.printed_key()
        assert key, server.output()
        agent = server.url + "/a2a/a2astream/writer"
        async with httpx.AsyncClient() as http:  # the server may still be binding
            for _ in range(200):
                with contextlib.suppress(httpx.TransportError):
                    if (await http.get(agent + "/.well-known/agent-card.json")).is_success:
                        break
                await asyncio.sleep(0.05)
        (tmp_path / "example.py").write_text(docs_example())
        env = {**os.environ, "SA_API_KEY": key, "A2A_AGENT": agent}
        example = await asyncio.create_subprocess_exec(
            sys.executable, "example.py", cwd=tmp_path, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert example.stdout is not None
        printed = b""
        while b"Let me check." not in printed:  # streamed while the tool waits
            more = await asyncio.wait_for(example.stdout.read(64), timeout=60)
            assert more, f"the example ended: {printed!r}"
            printed += more
        go.touch()
        rest, errors = await asyncio.wait_for(example.communicate(), timeout=60)
    finally:
        server.stop()
    assert example.returncode == 0, errors.decode()
    lines = (printed + rest).decode().splitlines()
    assert lines[:2] == ["Let me check.", "It is sunny."], lines  # each answer once
    assert len(lines) == 3 and lines[2].startswith("TASK_STATE_COMPLETED "), lines


async def test_the_docs_example_shows_each_artifact_once_on_its_own_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from a2a.types.a2a_pb2 import Artifact, TaskArtifactUpdateEvent

    monkeypatch.setenv("SA_API_KEY", "sa_unused")
    namespace: dict[str, Any] = {}
    exec(docs_example().replace("asyncio.run(main())", ""), namespace)  # noqa: S102

    def update(key: str, text: str, *, append: bool, last: bool = False) -> Any:
        artifact = Artifact(artifact_id=key, parts=[Part(text=text)])
        return TaskArtifactUpdateEvent(artifact=artifact, append=append, last_chunk=last)

    stream = [
        update("a", "Let me ", append=False),
        update("a", "check.", append=True),
        update("b", "It is ", append=False),  # the answer after a tool call
        update("b", "sunny.", append=True),
        update("a", "Let me check.", append=False, last=True),
        update("b", "It is sunny.", append=False, last=True),
        update("c", "Not streamed.", append=False, last=True),
    ]
    shown: dict[str, str] = {}
    printed = "".join(namespace["added"](shown, u) for u in stream)
    assert printed == "Let me check.\nIt is sunny.\nNot streamed."


async def test_cancel(served: Any) -> None:
    _, server, key = served
    async with a2a(server.url, key) as client:
        request = user("/tool hang {}")
        request.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
        task, _ = await last_task(client, request)
        assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
        canceled = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        fetched = await client.get_task(GetTaskRequest(id=task.id))
        assert fetched.status.state == TaskState.TASK_STATE_CANCELED
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http:
        thread = (await http.get(f"{server.url}{API}/threads/{task.context_id}")).json()
    assert thread["running"] is False  # the turn was stopped, not left running


async def test_input_required_for_approval_then_completed(served: Any) -> None:
    _, server, key = served
    async with a2a(server.url, key) as client:
        task, _ = await last_task(client, user('/tool transfer {"to": "bob", "amount": 5}'))
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        note = task.status.message.parts[0].text
        assert "transfer" in note and "/approvals/" in note
        async with httpx.AsyncClient(
            base_url=server.url, headers={"Authorization": f"Bearer {key}"}
        ) as http:
            thread = f"{API}/threads/{task.context_id}"
            pending = (await http.get(f"{thread}/approvals")).json()["approvals"]
            assert [p["name"] for p in pending] == ["transfer"]
            decided = await http.post(
                f"{thread}/approvals/{pending[0]['tool_call_id']}", json={"approve": True}
            )
            assert decided.status_code == 202
            async with http.stream("GET", f"{thread}/stream") as events:
                done = await client.get_task(GetTaskRequest(id=task.id))
                async for line in events.aiter_lines():  # wait for the turn's answer frame
                    if done.status.state == TaskState.TASK_STATE_COMPLETED:
                        break
                    if line.startswith("data:") and "returned" in line:
                        done = await client.get_task(GetTaskRequest(id=task.id))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert text_of(done) == "transfer returned: sent 5 to bob"


async def test_keys_and_isolation(served: Any) -> None:
    _, server, key = served
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x.y"}}
    async with httpx.AsyncClient(base_url=server.url) as http:
        missing = await http.post(AGENT, json=body)
        wrong = await http.post(AGENT, json=body, headers={"Authorization": "Bearer sa_nope"})
        index = await http.get("/a2a")
    for answer in (missing, wrong, index):
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"] == "Bearer"

    created = subprocess.run(
        [
            sys.executable,
            "-m",
            "sa_core.cli",
            "keys",
            "create",
            "--name",
            "temp",
            "--db",
            server.db,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    temp = next(w for w in created.stdout.split() if w.startswith("sa_"))
    async with a2a(server.url, temp) as client:
        task, _ = await last_task(client, user("hello"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        subprocess.run(
            [sys.executable, "-m", "sa_core.cli", "keys", "revoke", temp, "--db", server.db],
            capture_output=True,
            text=True,
            check=True,
        )
        with pytest.raises(A2AClientError):
            await client.get_task(GetTaskRequest(id=task.id))

    async with httpx.AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {key}"}
    ) as http:
        other = await http.post("/api/packages/a2aother/threads", json={"agent": "other"})
        assert other.status_code == 201, other.text
        await http.post(
            f"/api/packages/a2aother/threads/{other.json()['id']}/messages",
            json={"content": "private"},
        )
    other_id = other.json()["id"]
    async with a2a(server.url, key) as client:
        with pytest.raises(InvalidParamsError, match="Unknown contextId"):
            await last_task(client, user("hi", context_id=other_id))
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=f"{other_id}.0123456789abcdef"))


async def test_two_workers_on_postgresql(tmp_path: Path, pg_database_url: str) -> None:
    """A task created through one worker is read, and cancelled, through another."""
    (tmp_path / "a2a_pack.py").write_text(PACK)
    (tmp_path / "other_pack.py").write_text(OTHER_PACK)
    one = Server(tmp_path, free_port(), pg_database_url)
    two: Server | None = None
    try:
        one.wait_line("Try it")
        key = one.printed_key()
        assert key, one.output()
        two = Server(tmp_path, free_port(), pg_database_url)
        two.wait_line("Try it")
        async with a2a(one.url, key) as first, a2a(two.url, key) as second:
            task, _ = await last_task(first, user("hello"))
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            fetched = await second.get_task(GetTaskRequest(id=task.id))
            assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
            assert text_of(fetched) == "Test response received."
            follow, _ = await last_task(second, user("again", context_id=task.context_id))
            assert follow.context_id == task.context_id
            assert follow.status.state == TaskState.TASK_STATE_COMPLETED

            request = user("/tool hang {}")
            request.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
            hanging, _ = await last_task(first, request)
            canceled = await second.cancel_task(CancelTaskRequest(id=hanging.id))
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED
            seen = await first.get_task(GetTaskRequest(id=hanging.id))
            assert seen.status.state == TaskState.TASK_STATE_CANCELED
    finally:
        one.stop()
        if two is not None:
            two.stop()
