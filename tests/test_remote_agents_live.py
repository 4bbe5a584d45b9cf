"""Remote subagents between two real ``sa serve`` processes on loopback.

Server B serves pack ``bdesk`` (agent ``writer``: tools ``shout`` and ``wait_release``, which
waits until the test creates a file) over A2A. Server A's pack ``adesk`` declares four remote
agents on B's ``writer`` card (one per mode) with ``Authorization: Bearer ${B_KEY}``, B's API
key, and two parent agents: ``boss`` (blocking, non-blocking and resumable entries) and
``overseer`` (an immediate one). Both servers answer offline (``--test-provider``); A's model
calls a tool when a message is ``/tool NAME {json}``. The tests talk to both servers over HTTP
only.
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
import asyncio
import os
import pathlib
from pydantic import BaseModel
from sa_core import Pack, define_agent, define_model, define_prompt, define_tool

class Text(BaseModel):
    text: str

class Name(BaseModel):
    name: str

class Out(BaseModel):
    big: bool = False

async def swap_files(state, args):
    seen = []
    for record in await state.find_files("/attachments/**"):
        if not record.is_directory:
            seen.append((await state.read_file(record.path)).decode())
    await state.write_file(f"/out/reply{len(seen)}.txt", "got " + ",".join(seen), "text/plain")
    if args.big:
        await state.write_file("/out/big.bin", b"0123456789" * 30_000, "application/octet-stream")
    return ";".join(seen)

async def wait_release(state, args):
    flag = pathlib.Path(os.environ["RELEASE_DIR"]) / args.name
    while not flag.exists():
        await asyncio.sleep(0.05)
    return f"released {args.name}"

pack = Pack(
    name="bdesk",
    agents=[define_agent(name="writer", description="Writes and shouts.",
                         side_a={"prompt": "main"})],
    prompts=[define_prompt(name="main", model="m", prompt="You write.", include_chat=True,
                           tools=["shout", "wait_release", "swap_files"])],
    models=[define_model(name="m", provider="openai", model="gpt-4o-mini")],
    tools=[
        define_tool(name="shout", description="Shouts.", args=Text,
                    execute=lambda state, args: args.text.upper()),
        define_tool(name="wait_release", description="Waits.", args=Name, execute=wait_release),
        define_tool(name="swap_files", description="Reads its files, writes a reply.", args=Out,
                    execute=swap_files),
    ],
)
"""
A_PACK = """
import os
from sa_core import Pack, define_agent, define_model, define_prompt, define_remote_agent

CARD = os.environ["B_CARD"]
HEADERS = {"Authorization": "Bearer ${B_KEY}"}
remotes = [define_remote_agent(name=name, url=CARD, headers=HEADERS)
           for name in ("researcher", "scout", "analyst", "watcher")]
boss = define_prompt(name="boss_main", model="m", prompt="Boss.", include_chat=True, tools=[
    {"name": "researcher", "blocking": True},
    {"name": "scout", "blocking": False},
    {"name": "analyst", "blocking": True, "resumable": {"maxInstances": 2}},
])
over = define_prompt(name="over_main", model="m", prompt="Oversee.", include_chat=True,
                     tools=[{"name": "watcher", "blocking": False, "immediate": True}])
pack = Pack(
    name="adesk",
    agents=[
        define_agent(name="boss", side_a={"prompt": "boss_main"},
                     variables=[{"name": "B_KEY", "type": "secret"}]),
        define_agent(name="overseer", side_a={"prompt": "over_main"}),
    ],
    prompts=[boss, over],
    models=[define_model(name="m", provider="openai", model="gpt-4o-mini")],
    remote_agents=remotes,
)
"""
A_API = "/api/packages/adesk"
B_API = "/api/packages/bdesk"


class Pair:
    """Server B, then server A pointing at it; A can be killed and restarted."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.release_dir = tmp / "release"
        self.release_dir.mkdir()
        (tmp / "b_pack.py").write_text(B_PACK)
        (tmp / "a_pack.py").write_text(A_PACK)
        self.b = ServeProcess(
            tmp, f"sqlite:///{tmp / 'b.db'}", "--pack", str(tmp / "b_pack.py"),
            "--test-provider", env=offline_env({"RELEASE_DIR": str(self.release_dir)}),
        )  # fmt: skip
        self.b.wait_line("Try it")
        key = self.b.printed_key()
        assert key, self.b.output()
        self.b_key = key
        self.a_port = free_port()
        self.a = self.start_a()
        a_key = self.a.printed_key()
        assert a_key, self.a.output()
        self.a_key = a_key

    def start_a(self) -> ServeProcess:
        card = f"{self.b.url}/a2a/bdesk/writer/.well-known/agent-card.json"
        env = offline_env({"B_CARD": card, "B_KEY": self.b_key})
        server = ServeProcess(
            self.tmp, f"sqlite:///{self.tmp / 'a.db'}", "--pack", str(self.tmp / "a_pack.py"),
            "--test-provider", "--log-level", "info", env=env, port=self.a_port,
        )  # fmt: skip
        server.wait_line("Try it")
        return server

    def http_a(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.a_key}"}
        return httpx.Client(base_url=self.a.url, headers=headers, timeout=30)

    def http_b(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.b_key}"}
        return httpx.Client(base_url=self.b.url, headers=headers, timeout=30)

    def release(self, name: str) -> None:
        (self.release_dir / name).write_text("go")

    def stop(self) -> None:
        self.a.stop()
        self.b.stop()


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    started = Pair(tmp_path)
    try:
        yield started
    finally:
        started.stop()


def until(check: Any, what: str, seconds: float = 60) -> Any:
    """Poll ``check()`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def tool(tool_name: str, /, **args: Any) -> str:
    return f"/tool {tool_name} {json.dumps(args)}"


def thread_of(http: httpx.Client, agent: str) -> str:
    created = http.post(f"{A_API}/threads", json={"agent": agent})
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def detail(http: httpx.Client, api: str, thread_id: str) -> dict[str, Any]:
    answer = http.get(f"{api}/threads/{thread_id}")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def messages(http: httpx.Client, api: str, thread_id: str, silent: bool = False) -> list[Any]:
    params = {"include_silent": "true" if silent else "false", "limit": 500}
    answer = http.get(f"{api}/threads/{thread_id}/messages", params=params)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["messages"])


def say(http: httpx.Client, thread_id: str, text: str) -> None:
    """Post a message on an A thread and wait until its turn is over."""
    posted = http.post(f"{A_API}/threads/{thread_id}/messages", json={"content": text})
    assert posted.status_code == 202, posted.text
    until(lambda: not detail(http, A_API, thread_id)["running"], "the turn to end")


def tool_results(http: httpx.Client, thread_id: str) -> list[str]:
    return [m["content"] for m in messages(http, A_API, thread_id) if m["role"] == "tool"]


def results(http: httpx.Client, thread_id: str) -> list[str]:
    """The result notifications a parent received from its children."""
    return [
        m["content"]
        for m in messages(http, A_API, thread_id, silent=True)
        if (m.get("metadata") or {}).get("subagent_event") == "result"
    ]


def answer_meta(http: httpx.Client, child_id: str) -> dict[str, Any]:
    found = [
        m["metadata"]["a2a"]
        for m in messages(http, A_API, child_id)
        if (m.get("metadata") or {}).get("a2a", {}).get("kind") == "answer"
    ]
    return found[-1]


def test_blocking_call_through_another_server(pair: Pair) -> None:
    with pair.http_a() as a, pair.http_b() as b:
        boss = thread_of(a, "boss")
        say(a, boss, tool("researcher", message=tool("shout", text="hello b")))
        [result] = tool_results(a, boss)
        [child] = detail(a, A_API, boss)["children"]
        assert result == f"shout returned: HELLO B\n\nReference: {child['reference']}"
        assert child["name"] == "researcher" and child["status"] == "terminated"
        mirrored = [(m["role"], m["content"]) for m in messages(a, A_API, child["reference"])]
        assert mirrored == [
            ("user", tool("shout", text="hello b")),
            ("assistant", "shout returned: HELLO B"),
        ]
        assert detail(a, A_API, child["reference"])["parent_id"] == boss
        context = answer_meta(a, child["reference"])["context_id"]
        remote = [m["content"] for m in messages(b, B_API, context) if m["role"] == "user"]
        assert remote == [tool("shout", text="hello b")]


def test_nonblocking_call_reports_once(pair: Pair) -> None:
    with pair.http_a() as a:
        boss = thread_of(a, "boss")
        say(a, boss, tool("scout", message=tool("wait_release", name="n1")))
        [initiated] = tool_results(a, boss)
        assert initiated.startswith("The subagent was initiated successfully. Reference: ")
        until(
            lambda: detail(a, A_API, boss)["children"][0]["status"] in ("submitted", "working"),
            "the remote to acknowledge the task",
        )
        pair.release("n1")
        until(lambda: results(a, boss), "the result notification")
        until(lambda: not detail(a, A_API, boss)["running"], "the parent's turn to end")
        [note] = results(a, boss)
        assert note.endswith(
            "has returned the following result:\n\nwait_release returned: released n1"
        )
        assert detail(a, A_API, boss)["children"][0]["status"] == "terminated"


def test_resumable_instance_keeps_one_remote_conversation(pair: Pair) -> None:
    with pair.http_a() as a, pair.http_b() as b:
        boss = thread_of(a, "boss")
        create = {"agent": "analyst", "name": "a1", "message": "first", "attachments": []}
        say(a, boss, tool("subagent_create", **create))
        [child] = detail(a, A_API, boss)["children"]
        ref = child["reference"]
        for text in ("second", "third"):
            say(a, boss, tool("subagent_message", referenceId=ref, message=text, attachments=[]))
        found = tool_results(a, boss)
        assert [r.endswith(f"Reference: {ref}") for r in found] == [True, True, True]
        [entry] = detail(a, A_API, boss)["children"]
        assert entry["status"] == "idle"
        contexts = {
            m["metadata"]["a2a"]["context_id"]
            for m in messages(a, A_API, ref)
            if m["metadata"].get("a2a", {}).get("kind") == "answer"
        }
        assert len(contexts) == 1
        [context] = contexts
        remote = [m["content"] for m in messages(b, B_API, context) if m["role"] == "user"]
        assert remote == ["first", "second", "third"]
        child_users = [m["content"] for m in messages(a, A_API, ref) if m["role"] == "user"]
        assert child_users == ["first", "second", "third"]


def test_immediate_remote_child_starts_with_its_parent(pair: Pair) -> None:
    with pair.http_a() as a, pair.http_b() as b:
        over = thread_of(a, "overseer")
        [child] = until(lambda: detail(a, A_API, over)["children"], "the immediate child")
        assert child["name"] == "watcher"
        until(lambda: results(a, over), "the immediate child's result")
        first = [
            m["content"] for m in messages(a, A_API, child["reference"]) if m["role"] == "user"
        ]
        assert first == ["Begin your work as watcher."]
        context = answer_meta(a, child["reference"])["context_id"]
        remote = [m["content"] for m in messages(b, B_API, context) if m["role"] == "user"]
        assert remote == ["Begin your work as watcher."]


def test_files_go_to_the_remote_and_come_back(pair: Pair) -> None:
    """The parent's attachments reach B's thread as files; B's files come back as attachments:
    a small one inline, a big one (over B's inline limit) fetched from the URL B gives."""
    with pair.http_a() as a, pair.http_b() as b:
        boss = thread_of(a, "boss")
        for name, body in (("brief.txt", b"the brief"), ("more.txt", b"more facts")):
            put = a.put(f"{A_API}/threads/{boss}/files/attachments/{name}", content=body,
                        headers={"Content-Type": "text/plain"})  # fmt: skip
            assert put.status_code == 201, put.text
        create = {"agent": "analyst", "name": "f1", "message": tool("swap_files"),
                  "attachments": ["/attachments/brief.txt"]}  # fmt: skip
        say(a, boss, tool("subagent_create", **create))
        [entry] = detail(a, A_API, boss)["children"]
        ref = entry["reference"]
        again = tool("swap_files", big=True)
        say(a, boss, tool("subagent_message", referenceId=ref, message=again,
                          attachments=["/attachments/more.txt"]))  # fmt: skip
        context = answer_meta(a, ref)["context_id"]
        remote_users = [m for m in messages(b, B_API, context) if m["role"] == "user"]
        assert [[f["name"] for f in m["attachments"]] for m in remote_users] == [
            ["brief.txt"],
            ["more.txt"],
        ]
        answers = [
            m for m in messages(a, A_API, ref)
            if (m.get("metadata") or {}).get("a2a", {}).get("kind") == "answer"
        ]  # fmt: skip
        assert answers[0]["content"] == "swap_files returned: the brief"
        assert answers[1]["content"] == ("swap_files returned: the brief;more facts")
        assert [f["name"] for f in answers[0]["attachments"]] == ["reply1.txt"]
        assert sorted(f["name"] for f in answers[1]["attachments"]) == ["big.bin", "reply2.txt"]
        files = {f["name"]: f for f in answers[1]["attachments"]}
        got = a.get(f"{A_API}/threads/{ref}/files{files['reply2.txt']['path']}")
        assert got.content == b"got the brief,more facts"
        big = a.get(f"{A_API}/threads/{ref}/files{files['big.bin']['path']}")
        assert big.content == b"0123456789" * 30_000
        [*_, last] = [m for m in messages(a, A_API, boss) if m["role"] == "tool"]
        assert sorted(f["name"] for f in last["attachments"] or []) == ["big.bin", "reply2.txt"]
        for f in last["attachments"]:
            copied = a.get(f"{A_API}/threads/{boss}/files{f['path']}")
            assert copied.status_code == 200 and copied.content in (
                b"got the brief,more facts",
                b"0123456789" * 30_000,
            )


def test_kill_9_while_remote_children_work_delivers_each_result_once(pair: Pair) -> None:
    names = ("k1", "k2", "k3")
    with pair.http_a() as a:
        boss = thread_of(a, "boss")
        for name in names:
            say(a, boss, tool("scout", message=tool("wait_release", name=name)))

        def acknowledged() -> bool:
            children = detail(a, A_API, boss)["children"]
            return len(children) == 3 and all(
                c["status"] in ("submitted", "working") for c in children
            )

        until(acknowledged, "B to acknowledge the three tasks")
    pair.a.proc.kill()  # kill -9: no shutdown of any kind
    pair.a.stop()  # reaps the killed process and closes its output
    pair.a = pair.start_a()
    for name in names:
        pair.release(name)
    with pair.http_a() as a, pair.http_b() as b:
        until(lambda: len(results(a, boss)) >= 3, "three results after the restart", 90)
        until(lambda: not detail(a, A_API, boss)["running"], "the parent to settle")
        children = detail(a, A_API, boss)["children"]
        assert {c["status"] for c in children} == {"terminated"}
        found = sorted(results(a, boss))
        assert [f.rsplit("\n\n", 1)[-1] for f in found] == [
            f"wait_release returned: released {name}" for name in names
        ]
        threads = b.get(f"{B_API}/threads", params={"limit": 100}).json()["threads"]
        sent = [
            m["content"]
            for t in threads
            for m in messages(b, B_API, t["id"])
            if m["role"] == "user"
        ]
        assert sorted(sent) == sorted(tool("wait_release", name=n) for n in names)


def test_the_remote_key_never_shows(pair: Pair) -> None:
    with pair.http_a() as a:
        boss = thread_of(a, "boss")
        say(a, boss, tool("researcher", message=tool("shout", text="quiet")))
        [child] = detail(a, A_API, boss)["children"]
        seen = [
            a.get(f"{A_API}/threads/{boss}").text,
            a.get(f"{A_API}/threads/{child['reference']}").text,
            a.get(f"{A_API}/threads/{boss}/messages", params={"include_silent": "true"}).text,
            a.get(f"{A_API}/threads/{child['reference']}/messages?include_silent=true").text,
            a.get(f"{A_API}/threads/{boss}/logs").text,
            a.get(f"{A_API}/threads/{child['reference']}/logs").text,
            a.get(f"{A_API}/threads", params={"limit": 100}).text,
        ]
    printed = pair.a.output()
    assert f"HTTP Request: POST {pair.b.url}/a2a/bdesk/writer" in printed  # info logs captured
    assert pair.b_key not in printed
    for text in seen:
        assert pair.b_key not in text


SDK_PACK = """
import os
from sa_core import Pack, define_agent, define_model, define_prompt, define_remote_agent

pack = Pack(
    name="adesk",
    agents=[define_agent(name="boss", side_a={"prompt": "boss_main"})],
    prompts=[define_prompt(name="boss_main", model="m", prompt="Boss.", include_chat=True,
                           tools=[{"name": "helper", "blocking": True}])],
    models=[define_model(name="m", provider="openai", model="gpt-4o-mini")],
    remote_agents=[define_remote_agent(name="helper", url=os.environ["SDK_URL"])],
)
"""


def test_push_notifications_wake_the_follower_and_need_the_task_token(tmp_path: Path) -> None:
    """An agent that pushes (and does not stream) is followed by push, never by polling alone.

    Polling is set to once an hour, so the answer can only come this quickly through the
    agent's notification to ``--public-url``; a notification with another token is refused.
    """
    from a2a_sdk_agent import SdkAgent

    (tmp_path / "a_pack.py").write_text(SDK_PACK)
    port = free_port()
    with SdkAgent(streaming=False, push=True) as agent:
        env = offline_env({"SDK_URL": agent.base, "SA_A2A_PUSH_POLL_SECONDS": "3600"})
        a = ServeProcess(
            tmp_path, f"sqlite:///{tmp_path / 'a.db'}", "--pack", str(tmp_path / "a_pack.py"),
            "--test-provider", "--public-url", f"http://127.0.0.1:{port}", env=env, port=port,
        )  # fmt: skip
        try:
            a.wait_line("Try it")
            key = a.printed_key()
            with httpx.Client(
                base_url=a.url, headers={"Authorization": f"Bearer {key}"}, timeout=30
            ) as http:
                boss = thread_of(http, "boss")
                posted = http.post(
                    f"{A_API}/threads/{boss}/messages",
                    json={"content": tool("helper", message="slow p1")},
                )
                assert posted.status_code == 202
                until(lambda: agent.messages, "the agent to get the message")
                [child] = until(lambda: detail(http, A_API, boss)["children"], "the child")
                forged = httpx.post(
                    f"{a.url}/a2a/_push/{child['reference']}",
                    json={},
                    headers={"X-A2A-Notification-Token": "not-the-token"},
                )
                assert forged.status_code == 401
                agent.release("p1")
                until(lambda: not detail(http, A_API, boss)["running"], "the answer")
                [result] = tool_results(http, boss)
        finally:
            a.stop()
    assert result == f"released p1\n\nReference: {child['reference']}"
    assert agent.pushed and set(agent.pushed) == {200}
    assert agent.gets <= 1 + len(agent.pushed)  # a read after the send, then one per wake
