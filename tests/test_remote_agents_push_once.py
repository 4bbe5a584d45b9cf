"""A push notification that arrives more than once still delivers the result once.

The remote agent is :class:`a2a_sdk_agent.SdkAgent` (the a2a-sdk's server classes alone): it
does not stream and it pushes, keeping every notification it posted so the test can post one
again, exactly as it was (:meth:`~a2a_sdk_agent.SdkAgent.repush`): a duplicate, or the retry
of a sender that did not hear back. Server A (``sa serve`` on loopback, a public URL, polling
a task followed by push once an hour) declares it as the non-blocking remote agent
``helper``.
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

from a2a_sdk_agent import SdkAgent  # noqa: E402
from serve_process import ServeProcess, free_port, offline_env  # noqa: E402

PACK = """
import os
from sa_core import Pack, define_agent, define_model, define_prompt, define_remote_agent

pack = Pack(
    name="adesk",
    agents=[define_agent(name="boss", side_a={"prompt": "boss_main"})],
    prompts=[define_prompt(name="boss_main", model="m", prompt="Boss.", include_chat=True,
                           tools=[{"name": "helper", "blocking": False}])],
    models=[define_model(name="m", provider="openai", model="gpt-4o-mini")],
    remote_agents=[define_remote_agent(name="helper", url=os.environ["SDK_URL"])],
)
"""
API = "/api/packages/adesk"
COMPLETED = "TASK_STATE_COMPLETED"


def until(check: Any, what: str, seconds: float = 60) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class ServerA:
    """``sa serve`` with the pack on a SQLite file, restartable on its port."""

    def __init__(self, tmp: Path, agent: SdkAgent) -> None:
        (tmp / "a_pack.py").write_text(PACK)
        self.tmp, self.agent, self.port = tmp, agent, free_port()
        self.server = self.start()
        key = self.server.printed_key()
        assert key, self.server.output()
        self.key = key

    def start(self) -> ServeProcess:
        env = {"SDK_URL": self.agent.base, "SA_A2A_PUSH_POLL_SECONDS": "3600"}
        server = ServeProcess(
            self.tmp, f"sqlite:///{self.tmp / 'a.db'}", "--pack", str(self.tmp / "a_pack.py"),
            "--test-provider", "--public-url", f"http://127.0.0.1:{self.port}",
            env=offline_env(env), port=self.port,
        )  # fmt: skip
        server.wait_line("Try it")
        return server

    def kill_and_restart(self) -> None:
        self.server.proc.kill()  # kill -9: no shutdown of any kind
        self.server.stop()
        self.server = self.start()

    def http(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.key}"}
        return httpx.Client(base_url=self.server.url, headers=headers, timeout=30)


@pytest.fixture
def agent() -> Iterator[SdkAgent]:
    with SdkAgent(streaming=False, push=True) as started:
        yield started


@pytest.fixture
def server_a(tmp_path: Path, agent: SdkAgent) -> Iterator[ServerA]:
    started = ServerA(tmp_path, agent)
    try:
        yield started
    finally:
        started.server.stop()


def ask(http: httpx.Client, text: str) -> str:
    """A boss thread whose model calls ``helper`` (non-blocking) with ``text``."""
    boss = str(http.post(f"{API}/threads", json={"agent": "boss"}).json()["id"])
    call = "/tool helper " + json.dumps({"message": text})
    assert http.post(f"{API}/threads/{boss}/messages", json={"content": call}).status_code == 202
    return boss


def messages(http: httpx.Client, thread_id: str) -> list[dict[str, Any]]:
    params = {"include_silent": "true", "limit": 500}
    return list(http.get(f"{API}/threads/{thread_id}/messages", params=params).json()["messages"])


def results(http: httpx.Client, boss: str) -> list[str]:
    """The result notifications the parent received from its child."""
    return [
        m["content"]
        for m in messages(http, boss)
        if (m.get("metadata") or {}).get("subagent_event") == "result"
    ]


def answers(http: httpx.Client, child: str) -> list[str]:
    """The answers stored on the child (one per exchange)."""
    return [
        m["content"]
        for m in messages(http, child)
        if (m.get("metadata") or {}).get("a2a", {}).get("kind") == "answer"
    ]


def acknowledged(http: httpx.Client, boss: str) -> str | None:
    """The child's reference once the remote acknowledged its task (its state or note shows)."""
    children = http.get(f"{API}/threads/{boss}").json()["children"]
    if children and children[0]["status"] in (
        "submitted",
        "working",
        "waiting for d1",
        "waiting for c1",
    ):
        return str(children[0]["reference"])
    return None


def settled(http: httpx.Client, *threads: str) -> bool:
    return not any(http.get(f"{API}/threads/{t}").json()["running"] for t in threads)


def test_a_notification_delivered_twice_reaches_the_parent_once(
    server_a: ServerA, agent: SdkAgent
) -> None:
    with server_a.http() as http:
        boss = ask(http, "slow d1")
        child = until(lambda: acknowledged(http, boss), "the remote to acknowledge the task")
        until(lambda: agent.notifications, "the agent's first notification")
        assert [agent.repush(), agent.repush()] == [200, 200]  # the working state, twice more
        agent.release("d1")
        until(lambda: COMPLETED in agent.notified_states(), "the completed notification")
        until(lambda: results(http, boss), "the result")
        completed = agent.notified_states().index(COMPLETED)
        assert [agent.repush(completed), agent.repush(completed)] == [200, 200]
        until(lambda: settled(http, boss, child), "the parent and the child to settle")
        assert [r.rsplit("\n\n", 1)[-1] for r in results(http, boss)] == ["released d1"]
        assert answers(http, child) == ["released d1"]
    assert [text for _, _, text in agent.messages] == ["slow d1"]  # never sent again


def test_a_notification_retried_after_a_crash_reaches_the_parent_once(
    server_a: ServerA, agent: SdkAgent
) -> None:
    """A is killed while the remote works; the remote's notification of the answer finds A
    down, and is retried once A is back (while A's restart follows the task by itself), and
    once more after the result was delivered."""
    with server_a.http() as http:
        boss = ask(http, "slow c1")
        child = until(lambda: acknowledged(http, boss), "the remote to acknowledge the task")
    server_a.server.proc.kill()
    server_a.server.stop()
    agent.release("c1")
    until(lambda: COMPLETED in agent.notified_states(), "the notification A missed")
    completed = agent.notified_states().index(COMPLETED)
    server_a.server = server_a.start()
    assert agent.repush(completed) == 200  # the retry, racing A's own recovery
    with server_a.http() as http:
        until(lambda: results(http, boss), "the result after the restart", 90)
        assert agent.repush(completed) == 200  # and once more, after delivery
        until(lambda: settled(http, boss, child), "the parent and the child to settle")
        assert [r.rsplit("\n\n", 1)[-1] for r in results(http, boss)] == ["released c1"]
        assert answers(http, child) == ["released c1"]
    assert [text for _, _, text in agent.messages] == ["slow c1"]
