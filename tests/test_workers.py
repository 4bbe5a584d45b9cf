"""Several real ``sa serve`` workers on one PostgreSQL database.

Each worker is a subprocess on its own loopback port (or ``sa serve --workers N`` sharing one).
The model is a Chat Completions server on loopback in this process: it answers a user message
with a call of the pack's ``record`` tool, and the tool's result with a text answer. The tool
runs in whichever worker executes the turn and appends ``start``/``end`` lines with that
worker's pid to a file, so the tests know which worker executed each step.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_process import ServeProcess

from sa_core.store import open_store

LEASE_SECONDS = "2"

PACK_FILE = """
import asyncio, json, os, time

from pydantic import BaseModel

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool


class Step(BaseModel):
    label: str = ""


def _write(kind, state, label):
    line = {"kind": kind, "pid": os.getpid(), "thread": state.thread_id, "label": label,
            "at": time.time()}
    with open(os.environ["SA_TEST_RECORD"], "a") as out:
        out.write(json.dumps(line) + "\\n")


async def record(state, args):
    _write("start", state, args.label)
    await asyncio.sleep(float(os.environ.get("SA_TEST_TOOL_SECONDS", "0.2")))
    _write("end", state, args.label)
    return "recorded " + args.label


model = define_model(
    name="m", provider="openai_compatible", model="fake",
    provider_options={"base_url": os.environ["SA_TEST_MODEL_URL"]},
)
prompt = define_prompt(name="main", model="m", prompt="Record, then answer.", include_chat=True,
                       tools=["record"])
pack = Pack(
    name="workers_demo",
    agents=[define_agent(name="helper", side_a={"prompt": "main"})],
    prompts=[prompt],
    models=[model],
    tools=[define_tool(name="record", description="Record a step.", args=Step, execute=record)],
)
"""


class FakeModel:
    """A Chat Completions server: a tool call for a user message, an answer for a tool result."""

    def __init__(self) -> None:
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                message = model.reply(body["messages"])
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    delta = {"role": "assistant", **message}
                    if "tool_calls" in delta:
                        delta["tool_calls"] = [{"index": 0, **delta["tool_calls"][0]}]
                    finish = "tool_calls" if "tool_calls" in message else "stop"
                    for chunk in (
                        {"choices": [{"index": 0, "delta": delta}]},
                        {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
                    ):
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.write(b"data: [DONE]\n\n")
                    return
                data = json.dumps(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "model": "fake",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", **message},
                                "finish_reason": "tool_calls"
                                if "tool_calls" in message
                                else "stop",
                            }
                        ],
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def reply(messages: list[dict[str, Any]]) -> dict[str, Any]:
        user = next(m["content"] for m in reversed(messages) if m["role"] == "user")
        if messages[-1]["role"] == "tool":
            return {"content": f"answer to {user}"}
        call = {
            "id": f"call_{uuid.uuid4().hex[:8]}",
            "type": "function",
            "function": {"name": "record", "arguments": json.dumps({"label": user})},
        }
        return {"content": None, "tool_calls": [call]}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Worker(ServeProcess):
    """``sa serve`` with the workers pack, as a subprocess on its own port."""

    def __init__(
        self, tmp_path: Path, db: str, env: dict[str, str], *extra: str, port: int | None = None
    ) -> None:
        pack = ("--pack", str(tmp_path / "workers_pack.py"), "--lease-seconds", LEASE_SECONDS)
        super().__init__(tmp_path, db, *pack, *extra, env={**os.environ, **env}, port=port)


@pytest.fixture
def cluster_env(tmp_path: Path, pg_database_url: str) -> Iterator[dict[str, Any]]:
    (tmp_path / "workers_pack.py").write_text(PACK_FILE)
    model = FakeModel()

    async def key() -> str:
        async with await open_store(pg_database_url) as store:
            return (await store.create_api_key("tests"))[0]

    token = asyncio.run(key())
    record = tmp_path / "record.jsonl"
    record.touch()
    env = {"SA_TEST_MODEL_URL": model.url, "SA_TEST_RECORD": str(record)}
    workers: list[Worker] = []
    try:
        yield {
            "db": pg_database_url,
            "env": env,
            "token": token,
            "record": record,
            "workers": workers,
            "tmp": tmp_path,
        }
    finally:
        for worker in workers:
            worker.stop()
        model.close()


def start_workers(ctx: dict[str, Any], count: int, **env: str) -> list[Worker]:
    started = [Worker(ctx["tmp"], ctx["db"], {**ctx["env"], **env}) for _ in range(count)]
    ctx["workers"].extend(started)
    for worker in started:
        worker.wait_ready()
    return started


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def assert_one_executor_at_a_time(lines: list[dict[str, Any]], killed_at: float = 0) -> None:
    """Per thread, no two workers' tool steps overlap in time."""
    intervals: dict[str, list[tuple[float, float, int]]] = {}
    open_steps: dict[tuple[str, int, str], float] = {}
    for line in lines:
        key = (line["thread"], line["pid"], line["label"])
        if line["kind"] == "start":
            open_steps[key] = line["at"]
        else:
            intervals.setdefault(line["thread"], []).append(
                (open_steps.pop(key), line["at"], line["pid"])
            )
    for (thread, pid, _label), start in open_steps.items():  # killed mid-step
        intervals.setdefault(thread, []).append((start, killed_at, pid))
    for thread, spans in intervals.items():
        spans.sort()
        for (_s1, end1, pid1), (start2, _e2, pid2) in zip(spans, spans[1:], strict=False):
            assert start2 >= end1 or pid1 == pid2, f"thread {thread}: two workers at once {spans}"


def sse_frames(
    client: httpx.Client, url: str, out: list[dict[str, Any]], stop: threading.Event
) -> None:
    with (
        contextlib.suppress(httpx.HTTPError),
        client.stream("GET", url, timeout=httpx.Timeout(60, read=60)) as response,
    ):
        for line in response.iter_lines():
            if line.startswith("data:"):
                out.append(json.loads(line[5:]))
            if stop.is_set():
                return


def wait_for(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


API = "/api/packages/workers_demo"


def test_three_workers_create_post_and_stream_through_different_workers(
    cluster_env: dict[str, Any],
) -> None:
    w1, w2, w3 = start_workers(cluster_env, 3)
    headers = {"Authorization": f"Bearer {cluster_env['token']}"}
    c1, c2, c3 = (httpx.Client(base_url=w.url, headers=headers, timeout=30) for w in (w1, w2, w3))
    threads = [c1.post(f"{API}/threads", json={"agent": "helper"}).json()["id"] for _ in range(3)]
    frames: dict[str, list[dict[str, Any]]] = {t: [] for t in threads}
    stop = threading.Event()
    readers = [
        threading.Thread(
            target=sse_frames, args=(c3, f"{API}/threads/{t}/stream", frames[t], stop), daemon=True
        )
        for t in threads
    ]
    for reader in readers:
        reader.start()
    wait_for(
        lambda: all(f and f[0]["type"] == "connected" for f in frames.values()),
        60,
        "the streams on worker 3",
    )

    def answers(thread_id: str) -> list[str]:
        page = c1.get(f"{API}/threads/{thread_id}/messages", params={"limit": 100}).json()
        return [m["content"] for m in page["messages"] if m["role"] == "assistant"]

    for index in range(3):  # one round at a time: each message gets its own turn
        for thread_id in threads:
            posted = c2.post(f"{API}/threads/{thread_id}/messages", json={"content": f"q{index}"})
            assert posted.status_code == 202, posted.text
        for thread_id in threads:
            wait_for(
                lambda t=thread_id, i=index: f"answer to q{i}" in answers(t),
                60,
                f"the answer to q{index} on {thread_id}",
            )

    def finished(thread_id: str) -> list[dict[str, Any]]:
        page = c1.get(f"{API}/threads/{thread_id}/messages", params={"limit": 100}).json()
        return list(page["messages"])

    for thread_id in threads:
        messages = finished(thread_id)
        assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"] * 3
        users = [m["content"] for m in messages if m["role"] == "user"]
        assert users == ["q0", "q1", "q2"]
        replies = [m["content"] for m in messages if m["role"] == "assistant" and m["content"]]
        assert replies == ["answer to q0", "answer to q1", "answer to q2"]
        # every stored message reached the stream read through worker 3, in its final state
        wait_for(
            lambda t=thread_id: (
                {m["id"] for m in messages}
                <= {f["data"]["id"] for f in frames[t] if f["type"] == "message_data"}
            ),
            60,
            "every message on the stream",
        )
        final: dict[str, dict[str, Any]] = {}
        for frame in frames[thread_id]:
            if frame["type"] == "message_data":
                final.setdefault(frame["data"]["id"], {}).update(frame["data"])
        assert [final[m["id"]].get("content") for m in messages] == [m["content"] for m in messages]
    stop.set()
    lines = records(cluster_env["record"])
    assert len([line for line in lines if line["kind"] == "end"]) == 9
    assert_one_executor_at_a_time(lines)
    w3.stop()  # ends the streams
    for reader in readers:
        reader.join(10)
    for client in (c1, c2, c3):
        client.close()


def test_killing_the_worker_running_a_turn_lets_another_worker_complete_it(
    cluster_env: dict[str, Any],
) -> None:
    w1, w2 = start_workers(cluster_env, 2, SA_TEST_TOOL_SECONDS="4")
    headers = {"Authorization": f"Bearer {cluster_env['token']}"}
    c1 = httpx.Client(base_url=w1.url, headers=headers, timeout=30)
    c2 = httpx.Client(base_url=w2.url, headers=headers, timeout=30)
    thread_id = c1.post(f"{API}/threads", json={"agent": "helper"}).json()["id"]
    assert (
        c1.post(f"{API}/threads/{thread_id}/messages", json={"content": "crash"}).status_code == 202
    )
    first = wait_for(lambda: records(cluster_env["record"]), 30, "the tool step to start")[0]
    victim, survivor, client = (w1, w2, c2) if first["pid"] == w1.proc.pid else (w2, w1, c1)
    assert first["pid"] == victim.proc.pid
    os.kill(victim.proc.pid, signal.SIGKILL)
    killed_at = time.time()
    victim.proc.wait(timeout=60)

    def answered() -> list[dict[str, Any]] | None:
        page = client.get(f"{API}/threads/{thread_id}/messages", params={"limit": 100}).json()
        done = [m for m in page["messages"] if m["content"] == "answer to crash"]
        return page["messages"] if done else None

    messages = wait_for(answered, 60, "the surviving worker to finish the turn")
    assert [m["content"] for m in messages if m["role"] == "user"] == ["crash"]
    assert [m["content"] for m in messages if m["content"] == "answer to crash"] == [
        "answer to crash"
    ]
    lines = records(cluster_env["record"])
    finished_by = {line["pid"] for line in lines if line["kind"] == "end"}
    assert finished_by == {survivor.proc.pid}, lines
    assert_one_executor_at_a_time(lines, killed_at)
    c1.close()
    c2.close()


def test_sa_serve_workers_starts_that_many_workers_on_one_port(
    cluster_env: dict[str, Any],
) -> None:
    worker = Worker(cluster_env["tmp"], cluster_env["db"], cluster_env["env"], "--workers", "2")
    cluster_env["workers"].append(worker)
    worker.wait_ready()

    async def live() -> list[str]:
        async with await open_store(cluster_env["db"]) as store:
            return await store.live_workers(10_000_000)

    assert (
        len(
            wait_for(
                lambda: len(asyncio.run(live())) == 2 and asyncio.run(live()),
                30,
                "two live workers",
            )
        )
        == 2
    )
    for _ in range(6):  # each worker answers readiness for itself, without a key
        health = httpx.get(f"{worker.url}/health", timeout=30)
        assert (health.status_code, health.json()) == (
            200,
            {"status": "ok", "database": "postgresql"},
        )
    headers = {"Authorization": f"Bearer {cluster_env['token']}"}
    with httpx.Client(base_url=worker.url, headers=headers, timeout=30) as client:
        thread_id = client.post(f"{API}/threads", json={"agent": "helper"}).json()["id"]
        client.post(f"{API}/threads/{thread_id}/messages", json={"content": "hi"})
        wait_for(
            lambda: any(
                m["content"] == "answer to hi"
                for m in client.get(f"{API}/threads/{thread_id}/messages").json()["messages"]
            ),
            30,
            "the answer",
        )
    worker.stop()
    assert worker.proc.returncode == 0
    assert asyncio.run(live()) == []


def test_sa_serve_workers_refuses_sqlite_saying_what_to_use(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sa_core.cli",
            "serve",
            "--workers",
            "2",
            "--db",
            f"sqlite:///{tmp_path / 'sa.db'}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--workers above 1 needs a shared PostgreSQL database" in done.stderr


def test_each_worker_gets_the_same_offline_script_as_sa_serve() -> None:
    """``sa serve --workers N --test-provider=SCRIPT`` hands every worker that SCRIPT."""
    import argparse

    from sa_core.cli.workers import worker_command

    base = {
        "host": "127.0.0.1",
        "port": 8000,
        "db": "postgresql://x/y",
        "log_level": "info",
        "packs": [],
        "lease_seconds": None,
        "client_settings": "apply",
    }
    scripted = worker_command(argparse.Namespace(**base, test_provider="answers.yaml"), 5)
    plain = worker_command(argparse.Namespace(**base, test_provider=True), 5)
    real = worker_command(argparse.Namespace(**base, test_provider=False), 5)
    assert "--test-provider=answers.yaml" in scripted and "--test-provider" not in scripted
    assert "--test-provider" in plain
    assert not any(part.startswith("--test-provider") for part in real)


def test_each_worker_gets_the_servers_client_settings_policy() -> None:
    """``sa serve --workers N --client-settings refuse`` hands every worker that policy."""
    import argparse

    from sa_core.cli.workers import worker_command

    args = argparse.Namespace(
        host="127.0.0.1", port=8000, db="postgresql://x/y", log_level="info", packs=[],
        lease_seconds=None, test_provider=False, client_settings="refuse",
    )  # fmt: skip
    command = worker_command(args, 5)
    assert command[command.index("--client-settings") + 1] == "refuse"
