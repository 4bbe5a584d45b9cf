"""Remote children with two ``sa serve`` workers on one PostgreSQL database.

The remote agent is the a2a-sdk's own server (:class:`a2a_sdk_agent.SdkAgent`): it does not
stream and it pushes. Each worker's public URL is the *other* worker's address, so every push
notification reaches the worker that does not follow the task; workers poll a task followed by
push only once an hour. Leases expire after 2 s, so a killed worker's threads are taken over
quickly.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a.client")

from a2a_sdk_agent import SdkAgent  # noqa: E402
from serve_process import ServeProcess, free_port, offline_env  # noqa: E402

from sa_core.store import open_store  # noqa: E402

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


def until(check: Any, what: str, seconds: float = 60) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class Cluster:
    """Two workers on one database, each giving the other's address as its public URL."""

    def __init__(self, tmp: Path, db: str, agent: SdkAgent) -> None:
        (tmp / "pack.py").write_text(PACK)
        ports = [free_port(), free_port()]
        env = {"SDK_URL": agent.base, "SA_A2A_PUSH_POLL_SECONDS": "3600"}
        self.workers = [
            ServeProcess(
                tmp,
                db,
                "--pack",
                str(tmp / "pack.py"),
                "--test-provider",
                "--lease-seconds",
                "2",
                "--public-url",
                f"http://127.0.0.1:{ports[1 - index]}",
                env=offline_env(env),
                port=port,
            )  # fmt: skip
            for index, port in enumerate(ports)
        ]
        for worker in self.workers:
            worker.wait_ready()

        async def key() -> str:
            async with await open_store(db) as store:
                return (await store.create_api_key("tests"))[0]

        self.key = asyncio.run(key())
        self.db = db

    def http(self, index: int) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.key}"}
        return httpx.Client(base_url=self.workers[index].url, headers=headers, timeout=30)

    def lease_holder(self, thread_id: str) -> str | None:
        async def owner() -> str | None:
            async with await open_store(self.db) as store:
                return await store.lease_owner(thread_id)

        return asyncio.run(owner())

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()


@pytest.fixture
def agent() -> Iterator[SdkAgent]:
    with SdkAgent(streaming=False, push=True) as started:
        yield started


@pytest.fixture
def cluster(tmp_path: Path, pg_database_url: str, agent: SdkAgent) -> Iterator[Cluster]:
    started = Cluster(tmp_path, pg_database_url, agent)
    try:
        yield started
    finally:
        started.stop()


def ask(http: httpx.Client, text: str) -> str:
    """Start a boss thread whose model calls ``helper`` (non-blocking) with ``text``."""
    boss = http.post(f"{API}/threads", json={"agent": "boss"}).json()["id"]
    call = "/tool helper " + json.dumps({"message": text})
    assert http.post(f"{API}/threads/{boss}/messages", json={"content": call}).status_code == 202
    return str(boss)


def results(http: httpx.Client, boss: str) -> list[str]:
    params = {"include_silent": "true", "limit": 500}
    page = http.get(f"{API}/threads/{boss}/messages", params=params).json()
    return [
        m["content"]
        for m in page["messages"]
        if (m.get("metadata") or {}).get("subagent_event") == "result"
    ]


def the_child(http: httpx.Client, boss: str) -> str:
    [child] = until(lambda: http.get(f"{API}/threads/{boss}").json()["children"], "the child")
    return str(child["reference"])


def worker_pid(owner: str) -> int:
    """The pid in a worker id (``host:pid:suffix``)."""
    return int(owner.split(":")[-2])


def test_a_push_reaching_the_other_worker_wakes_the_follower(
    cluster: Cluster, agent: SdkAgent
) -> None:
    with cluster.http(0) as http:
        boss = ask(http, "slow p1")
        until(lambda: agent.messages, "the agent to get the message")
        child = the_child(http, boss)
        follower = until(lambda: cluster.lease_holder(child), "the child's follower")
        until(lambda: agent.gets, "the follower's first read (then it waits for a push)")
        agent.release("p1")
        [note] = until(lambda: results(http, boss), "the result, through the relayed push")
    assert note.endswith("has returned the following result:\n\nreleased p1")
    assert agent.pushed and set(agent.pushed) == {200}
    [(_, task_id, _)] = agent.messages
    [config] = asyncio.run(agent.push_configs.get_info_for_dispatch(task_id))
    [other] = [w for w in cluster.workers if w.proc.pid != worker_pid(follower)]
    assert config.url == f"{other.url}/a2a/_push/{child}"  # received by the other worker
    assert cluster.lease_holder(child) in (None, follower)  # followed by one worker throughout
    assert agent.gets <= 1 + len(agent.pushed)  # a read after the send, then one per wake


def test_killing_the_follower_lets_the_other_worker_deliver_the_result_once(
    cluster: Cluster, agent: SdkAgent
) -> None:
    with cluster.http(0) as first, cluster.http(1) as second:
        boss = ask(first, "slow k1")
        child = the_child(first, boss)

        def acknowledged() -> bool:  # its first status note: the task is never sent again
            page = first.get(f"{API}/threads/{child}/messages").json()
            return "waiting for k1" in [m["content"] for m in page["messages"]]

        until(acknowledged, "the agent's first status note")
        follower = worker_pid(until(lambda: cluster.lease_holder(child), "the follower"))
        [victim] = [w for w in cluster.workers if w.proc.pid == follower]
        survivor = second if victim is cluster.workers[0] else first
        os.kill(follower, signal.SIGKILL)
        victim.proc.wait(timeout=30)
        agent.release("k1")
        until(lambda: results(survivor, boss), "the survivor to deliver the result", 90)

        def settled() -> bool:
            detail = survivor.get(f"{API}/threads/{boss}").json()
            return not detail["running"] and detail["children"][0]["status"] == "terminated"

        until(settled, "the parent and its child to settle")
        [found] = results(survivor, boss)
    assert found.endswith("has returned the following result:\n\nreleased k1")
    assert [text for _, _, text in agent.messages] == ["slow k1"]  # followed, never resent
