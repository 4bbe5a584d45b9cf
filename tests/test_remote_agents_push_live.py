"""Push notifications between two real ``sa serve`` processes on loopback.

Server B serves pack ``bdesk`` (agent ``writer``, tool ``wait_release`` waiting until the test
creates a file) over A2A; its card says it pushes. Server A has a public URL and polls a task
followed by push only once an hour (``SA_A2A_PUSH_POLL_SECONDS=3600``); its pack declares B's
``writer`` as the remote agent ``scout`` (non-blocking). So once A's stream to B is gone, the
answer can reach A in time only through B's push notification to A.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a.client")

from serve_process import ServeProcess, free_port, offline_env  # noqa: E402

B_PACK = """
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
    name="bdesk",
    agents=[define_agent(name="writer", side_a={"prompt": "main"})],
    prompts=[define_prompt(name="main", model="m", prompt="You write.", include_chat=True,
                           tools=["wait_release"])],
    models=[define_model(name="m", provider="openai", model="gpt-4o-mini")],
    tools=[define_tool(name="wait_release", description="Waits.", args=Name,
                       execute=wait_release)],
)
"""
A_PACK = """
import os
from sa_core import Pack, define_agent, define_model, define_prompt, define_remote_agent

pack = Pack(
    name="adesk",
    agents=[define_agent(name="boss", side_a={"prompt": "boss_main"},
                         variables=[{"name": "B_KEY", "type": "secret"}])],
    prompts=[define_prompt(name="boss_main", model="m", prompt="Boss.", include_chat=True,
                           tools=[{"name": "scout", "blocking": False}])],
    models=[define_model(name="m", provider="openai", model="gpt-4o-mini")],
    remote_agents=[define_remote_agent(name="scout", url=os.environ["B_CARD"],
                                       headers={"Authorization": "Bearer ${B_KEY}"})],
)
"""
A_API = "/api/packages/adesk"
B_API = "/api/packages/bdesk"


def until(check: Any, what: str, seconds: float = 60) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class Pair:
    """Server B (restartable on its port), then server A with a public URL pointing at B."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.release_dir = tmp / "release"
        self.release_dir.mkdir()
        (tmp / "b_pack.py").write_text(B_PACK)
        (tmp / "a_pack.py").write_text(A_PACK)
        self.b_port = free_port()
        self.b = self.start_b()
        b_key = self.b.printed_key()
        assert b_key, self.b.output()
        self.b_key = b_key
        a_port = free_port()
        env = {
            "B_CARD": f"{self.b.url}/a2a/bdesk/writer/.well-known/agent-card.json",
            "B_KEY": b_key,
            "SA_A2A_PUSH_POLL_SECONDS": "3600",
        }
        self.a = ServeProcess(
            tmp, f"sqlite:///{tmp / 'a.db'}", "--pack", str(tmp / "a_pack.py"), "--test-provider",
            "--public-url", f"http://127.0.0.1:{a_port}", env=offline_env(env), port=a_port,
        )  # fmt: skip
        self.a.wait_line("Try it")
        a_key = self.a.printed_key()
        assert a_key, self.a.output()
        self.a_key = a_key

    def start_b(self) -> ServeProcess:
        env = {"RELEASE_DIR": str(self.release_dir), "SA_A2A_PUSH_ALLOW_PRIVATE": "1"}
        server = ServeProcess(
            self.tmp, f"sqlite:///{self.tmp / 'b.db'}", "--pack", str(self.tmp / "b_pack.py"),
            "--test-provider", env=offline_env(env), port=self.b_port,
        )  # fmt: skip
        server.wait_line("Try it")
        return server

    def http(self, server: ServeProcess, key: str) -> httpx.Client:
        return httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=30
        )


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    started = Pair(tmp_path)
    try:
        yield started
    finally:
        started.a.stop()
        started.b.stop()


def messages(http: httpx.Client, api: str, thread_id: str) -> list[dict[str, Any]]:
    params = {"include_silent": "true", "limit": 500}
    answer = http.get(f"{api}/threads/{thread_id}/messages", params=params)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["messages"])


def results(http: httpx.Client, thread_id: str) -> list[str]:
    return [
        m["content"]
        for m in messages(http, A_API, thread_id)
        if (m.get("metadata") or {}).get("subagent_event") == "result"
    ]


def test_b_restarted_mid_task_pushes_its_answer_to_a(pair: Pair) -> None:
    """A's stream to B dies with B (kill -9); B resumes the turn after its restart and, when it
    finishes, notifies A, which reads the answer: once, without any resend to B."""
    with pair.http(pair.a, pair.a_key) as a:
        boss = a.post(f"{A_API}/threads", json={"agent": "boss"}).json()["id"]
        text = "/tool wait_release " + json.dumps({"name": "n1"})
        call = "/tool scout " + json.dumps({"message": text})
        assert a.post(f"{A_API}/threads/{boss}/messages", json={"content": call}).status_code == 202
        children = until(
            lambda: [
                c
                for c in a.get(f"{A_API}/threads/{boss}").json()["children"]
                if c["status"] in ("submitted", "working")
            ],
            "B to acknowledge the task",
        )
        pair.b.proc.kill()  # kill -9: A's stream breaks, B's executor is gone
        pair.b.stop()
        pair.b = pair.start_b()
        pair.b.wait_ready()  # its push loop runs: the turn it resumed finishes after this
        (pair.release_dir / "n1").write_text("go")
        started = time.monotonic()
        [note] = until(lambda: results(a, boss), "the answer, pushed by B", 120)
        took = time.monotonic() - started
    assert note.endswith("has returned the following result:\n\nwait_release returned: released n1")
    assert took < 120  # A polls once an hour: only the push brought it
    with pair.http(pair.b, pair.b_key) as b:
        threads = b.get(f"{B_API}/threads", params={"limit": 100}).json()["threads"]
        sent = [
            m["content"]
            for t in threads
            for m in messages(b, B_API, t["id"])
            if m["role"] == "user"
        ]
    assert sent == [text]  # followed again, never sent again
    [child] = children
    assert child["name"] == "scout"
