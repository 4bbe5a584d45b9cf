"""Push notifications served by our A2A server (``sa serve`` on loopback, JSON-RPC over HTTP).

The pack's agent has a tool ``wait_release`` that waits until the test creates a file, so a
task stays ``working`` as long as a test needs. Notifications go to a webhook in this process
(:class:`push_receiver.PushReceiver`); push URLs on loopback are allowed with
``SA_A2A_PUSH_ALLOW_PRIVATE=1``, and retries start after 0.2 s.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a.client")

from push_receiver import PushReceiver  # noqa: E402
from serve_process import ServeProcess, free_port, offline_env  # noqa: E402

from sa_core.server.protocols.a2a.push_delivery import url_allowed  # noqa: E402

PACK = """
import asyncio, os, pathlib
from pydantic import BaseModel
from sa_core import Pack, define_agent, define_model, define_prompt, define_tool

class Name(BaseModel):
    name: str

async def wait_release(state, args):
    flag = pathlib.Path(os.environ["RELEASE_DIR"]) / args.name
    while not flag.exists():
        await asyncio.sleep(0.05)
    return f"released {args.name}"

pack = Pack(
    name="pushdemo",
    agents=[define_agent(name="helper", side_a={"prompt": "main"})],
    prompts=[define_prompt(name="main", model="m", prompt="Help.", include_chat=True,
                           tools=["wait_release"])],
    models=[define_model(name="m", provider="openai", model="gpt-4o-mini")],
    tools=[define_tool(name="wait_release", description="Waits.", args=Name,
                       execute=wait_release)],
)
"""
AGENT = "/a2a/pushdemo/helper"
COMPLETED = "TASK_STATE_COMPLETED"


class Server:
    """``sa serve`` with the pack on a SQLite file, restartable on its port."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.release_dir = tmp / "release"
        self.release_dir.mkdir()
        (tmp / "pack.py").write_text(PACK)
        self.port = free_port()
        self.process = self.start()
        key = self.process.printed_key()
        assert key, self.process.output()
        self.key = key

    def start(self) -> ServeProcess:
        env = {
            "RELEASE_DIR": str(self.release_dir),
            "SA_A2A_PUSH_ALLOW_PRIVATE": "1",
            "SA_A2A_PUSH_RETRY_SECONDS": "0.2",
        }
        process = ServeProcess(
            self.tmp, f"sqlite:///{self.tmp / 'sa.db'}", "--pack", str(self.tmp / "pack.py"),
            "--test-provider", env=offline_env(env), port=self.port,
        )  # fmt: skip
        process.wait_line("Try it")
        return process

    def http(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.key}"}
        return httpx.Client(base_url=self.process.url, headers=headers, timeout=30)

    def release(self, name: str) -> None:
        (self.release_dir / name).write_text("go")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    started = Server(tmp_path)
    try:
        yield started
    finally:
        started.process.stop()


def rpc(http: httpx.Client, method: str, params: dict[str, Any]) -> Any:
    """A JSON-RPC call (the v0.3 method names); its result, or the error object."""
    answer = http.post(AGENT, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    return body["error"] if "error" in body else body.get("result")


def start_task(http: httpx.Client, text: str, push: dict[str, Any] | None = None) -> str:
    """``message/send`` returning at once (``blocking: false``); the task's id."""
    message = {
        "kind": "message",
        "role": "user",
        "messageId": uuid.uuid4().hex,
        "parts": [{"kind": "text", "text": text}],
    }
    configuration: dict[str, Any] = {"blocking": False}
    if push is not None:
        configuration["pushNotificationConfig"] = push
    task = rpc(http, "message/send", {"message": message, "configuration": configuration})
    return str(task["id"])


def until(check: Any, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def wait_release(name: str) -> str:
    return "/tool wait_release " + json.dumps({"name": name})


def test_the_card_says_the_agent_pushes(server: Server) -> None:
    card = httpx.get(f"{server.process.url}{AGENT}/.well-known/agent-card.json").json()
    assert card["capabilities"]["pushNotifications"] is True


def test_configs_are_set_read_listed_and_deleted_and_the_task_pushes_to_those_left(
    server: Server,
) -> None:
    with PushReceiver() as first, PushReceiver() as second, server.http() as http:
        task_id = start_task(http, wait_release("r1"), {"url": first.url, "token": "first-token"})
        config = {
            "id": "second",
            "url": second.url,
            "token": "second-token",
            "authentication": {"schemes": ["Bearer"], "credentials": "hook-secret"},
        }
        added = rpc(
            http,
            "tasks/pushNotificationConfig/set",
            {"taskId": task_id, "pushNotificationConfig": config},
        )
        assert added["taskId"] == task_id
        assert added["pushNotificationConfig"]["url"] == second.url
        read = rpc(
            http,
            "tasks/pushNotificationConfig/get",
            {"id": task_id, "pushNotificationConfigId": "second"},
        )
        shown = read["pushNotificationConfig"]
        assert (shown["id"], shown["url"], shown["token"]) == ("second", second.url, "second-token")
        assert shown["authentication"] == {"schemes": ["Bearer"], "credentials": "[redacted]"}
        listed = rpc(http, "tasks/pushNotificationConfig/list", {"id": task_id})
        assert sorted(c["pushNotificationConfig"]["url"] for c in listed) == sorted(
            [first.url, second.url]
        )
        assert (
            rpc(
                http,
                "tasks/pushNotificationConfig/delete",
                {"id": task_id, "pushNotificationConfigId": "second"},
            )
            is None
        )
        left = rpc(http, "tasks/pushNotificationConfig/list", {"id": task_id})
        assert [c["pushNotificationConfig"]["url"] for c in left] == [first.url]
        unknown = rpc(http, "tasks/pushNotificationConfig/list", {"id": "nothing.here"})
        assert unknown["code"] == -32001  # TaskNotFoundError
        server.release("r1")
        done = first.wait_for(COMPLETED)
        task = rpc(http, "tasks/get", {"id": task_id})
    assert done["headers"]["x-a2a-notification-token"] == "first-token"
    assert done["body"]["task"]["id"] == task_id
    [artifact] = done["body"]["task"]["artifacts"]
    assert artifact["parts"][0]["text"] == "wait_release returned: released r1"
    assert first.states() == ["TASK_STATE_WORKING", COMPLETED]
    assert second.received == []  # deleted before the task moved on
    assert task["status"]["state"] == "completed"


def test_a_refused_notification_is_retried_until_delivered(server: Server) -> None:
    with PushReceiver(statuses=(500, 503, 500)) as hook, server.http() as http:
        start_task(http, wait_release("r2"), {"url": hook.url, "token": "t2"})
        server.release("r2")
        hook.wait_for(COMPLETED)
    refused = [r["status"] for r in hook.received if r["status"] >= 500]
    assert refused == [500, 503, 500]
    assert {r["headers"]["x-a2a-notification-token"] for r in hook.received} == {"t2"}
    assert hook.states()[-1] == COMPLETED


def test_owed_notifications_are_sent_after_a_kill_9_and_restart(server: Server) -> None:
    hook = PushReceiver()  # not listening yet: every try fails
    with server.http() as http:
        task_id = start_task(http, wait_release("r3"), {"url": hook.url, "token": "t3"})
        server.release("r3")
        until(
            lambda: rpc(http, "tasks/get", {"id": task_id})["status"]["state"] == "completed",
            "the task to complete",
        )
    server.process.proc.kill()  # kill -9 with the notifications still owed
    server.process.stop()
    with hook:
        server.process = server.start()
        done = hook.wait_for(COMPLETED)
    assert done["body"]["task"]["id"] == task_id
    assert done["headers"]["x-a2a-notification-token"] == "t3"


@pytest.mark.asyncio
async def test_push_urls_must_be_http_and_public_unless_private_ones_are_allowed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SA_A2A_PUSH_ALLOW_PRIVATE", raising=False)
    assert not await url_allowed("http://127.0.0.1:9/hook")
    assert not await url_allowed("http://169.254.169.254/latest/meta-data")
    assert not await url_allowed("ftp://203.0.113.7/hook")
    monkeypatch.setenv("SA_A2A_PUSH_ALLOW_PRIVATE", "1")
    assert await url_allowed("http://127.0.0.1:9/hook")
    assert not await url_allowed("file:///etc/passwd")
