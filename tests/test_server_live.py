"""The HTTP API on a real uvicorn server on 127.0.0.1, started and stopped by each test."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from test_server_packs import REASONING, REPLY, alpha_pack, beta_pack, brain, provider

from sa_core import Runtime
from sa_core.providers import ProviderRequest
from sa_core.server import create_app
from sa_core.server.testing import live_server
from sa_core.testing import FunctionProvider

A = "/api/packages/alpha"
B = "/api/packages/beta"
Frame = dict[str, Any]


@asynccontextmanager
async def serving(
    database_url: str, model: Any = None, graceful_timeout: float = 2
) -> AsyncIterator[tuple[httpx.AsyncClient, Runtime, str]]:
    """A runtime, a live server and an authenticated client, all in the test's loop."""
    runtime = Runtime(
        packs=[alpha_pack(), beta_pack()],
        providers={"test": model or provider()},
        database_url=database_url,
        load_entrypoints=False,
    )
    async with live_server(create_app(runtime), graceful_timeout=graceful_timeout) as base_url:
        keys = await runtime.store.list_api_keys()
        token = "" if keys else (await runtime.store.create_api_key("live"))[0]
        async with httpx.AsyncClient(
            base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=60
        ) as client:
            yield client, runtime, token


async def new_thread(client: httpx.AsyncClient, package: str = "alpha") -> str:
    env = {"BETA_KEY": "b"} if package == "beta" else {}
    response = await client.post(
        f"/api/packages/{package}/threads", json={"agent": "helper", "env": env}
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def sse_frames(response: httpx.Response) -> AsyncIterator[Frame]:
    """Parse server-sent events into frames."""
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            data.append(line[len("data: ") :])
        elif not line and data:
            yield json.loads("\n".join(data))
            data = []


async def collect(frames: AsyncIterator[Frame], done: Callable[[Frame], bool]) -> list[Frame]:
    found = []
    async with asyncio.timeout(60):
        async for frame in frames:
            found.append(frame)
            if done(frame):
                return found
    raise AssertionError(f"stream ended before the final frame: {found[-5:]}")


def final_reply(frame: Frame) -> bool:
    data = frame.get("data") or {}
    return (
        frame["type"] == "message_data"
        and not frame.get("subagent_id")
        and data.get("role") == "assistant"
        and data.get("status") == "completed"
        and bool(data.get("content"))
    )


@pytest.mark.asyncio
async def test_live_thread_message_round_trip_and_two_packs_side_by_side(
    sa_database_url: str,
) -> None:
    async with serving(sa_database_url) as (client, runtime, _):
        packages = (await client.get("/api/packages")).json()["packages"]
        assert [p["name"] for p in packages] == ["alpha", "beta"]
        alpha, beta = await new_thread(client), await new_thread(client, "beta")
        for package, thread_id in (("alpha", alpha), ("beta", beta)):
            posted = await client.post(
                f"/api/packages/{package}/threads/{thread_id}/messages", json={"content": "Hi"}
            )
            assert posted.status_code == 202
        await runtime.wait_idle(60)
        for package, thread_id in (("alpha", alpha), ("beta", beta)):
            page = await client.get(f"/api/packages/{package}/threads/{thread_id}/messages")
            assert [m["content"] for m in page.json()["messages"]] == ["Hi", REPLY]
        assert (await client.get(f"{B}/threads/{alpha}")).status_code == 404
        assert (await client.get(f"{A}/threads/{beta}/messages")).status_code == 404
        assert (await client.get("/api/packages", headers={"Authorization": ""})).status_code == 401
        schema = await client.get("/schema/openapi.json")
        assert f"{B}/threads/{{thread_id}}/messages" in schema.json()["paths"]


@pytest.mark.asyncio
async def test_live_sse_stream_carries_deltas_and_tool_events(sa_database_url: str) -> None:
    async with serving(sa_database_url) as (client, _, token):
        thread_id = await new_thread(client)
        url = f"{A}/threads/{thread_id}/stream"
        async with client.stream(
            "GET", url, params={"access_token": token}, headers={"Authorization": ""}
        ) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            frames = sse_frames(response)
            assert await anext(frames) == {"type": "connected", "thread_id": thread_id}
            await client.post(f"{A}/threads/{thread_id}/messages", json={"content": "Hi"})
            first = await collect(frames, final_reply)
            await client.post(f"{A}/threads/{thread_id}/messages", json={"content": "weather?"})
            second = await collect(frames, final_reply)
    chunks = [f["chunk"] for f in first if f["type"] == "message_chunk"]
    assert len(chunks) > 1 and "".join(chunks) == REPLY
    assert "".join(f["chunk"] for f in first if f["type"] == "reasoning_chunk") == REASONING
    stored = [f["data"]["role"] for f in first if f["type"] == "message_data"]
    assert stored[0] == "user" and stored[-1] == "assistant"
    events = [f["eventType"] for f in second if f["type"] == "event"]
    assert events == ["tool_call_started", "weather_checked", "tool_call_done"]


@pytest.mark.asyncio
async def test_live_sse_refuses_without_key_and_across_packages(sa_database_url: str) -> None:
    async with serving(sa_database_url) as (client, _, _):
        thread_id = await new_thread(client)
        bare = await client.get(f"{A}/threads/{thread_id}/stream", headers={"Authorization": ""})
        assert bare.status_code == 401
        other = await client.get(f"{B}/threads/{thread_id}/stream")
        assert other.status_code == 404 and other.json()["error"] == "thread_not_found"


@pytest.mark.asyncio
async def test_live_websocket_carries_deltas_and_child_events(sa_database_url: str) -> None:
    pytest.importorskip("websockets")
    from websockets.asyncio.client import connect

    async with serving(sa_database_url) as (client, _, token):
        thread_id = await new_thread(client)
        url = str(client.base_url).replace("http://", "ws://") + f"{A}/threads/{thread_id}/ws"

        async def frames(ws: Any) -> AsyncIterator[Frame]:
            while True:
                yield json.loads(await ws.recv())

        async with connect(url, additional_headers={"Authorization": f"Bearer {token}"}) as ws:
            assert json.loads(await ws.recv()) == {"type": "connected", "thread_id": thread_id}
            await ws.send("ping")
            assert await ws.recv() == "pong"
            await client.post(f"{A}/threads/{thread_id}/messages", json={"content": "Hi"})
            first = await collect(frames(ws), final_reply)
            await client.post(f"{A}/threads/{thread_id}/messages", json={"content": "summarize"})
            second = await collect(frames(ws), final_reply)
        assert "".join(f["chunk"] for f in first if f["type"] == "message_chunk") == REPLY
        children = (await client.get(f"{A}/threads/{thread_id}/children")).json()["children"]
        child_frames = [f for f in second if f.get("subagent_id")]
        assert {f["subagent_id"] for f in child_frames} == {children[0]["reference"]}
        kinds = {(f["type"], f.get("eventType")) for f in child_frames}
        assert ("message_data", None) in kinds and ("event", "tool_call_done") in kinds

        async with connect(url.replace("/alpha/", "/beta/")) as refused:
            await refused.wait_closed()
        assert refused.close_code == 4401  # no key: checked before the thread


@pytest.mark.asyncio
async def test_threads_run_concurrently_and_each_thread_one_turn_at_a_time(
    sa_database_url: str,
) -> None:
    active: dict[str, int] = {}
    peak = {"total": 0, "per_thread": 0}
    release = asyncio.Event()  # set once every first turn runs and every second message is in

    async def slow(request: ProviderRequest) -> str:
        thread = str(request.user)
        active[thread] = active.get(thread, 0) + 1
        peak["per_thread"] = max(peak["per_thread"], active[thread])
        peak["total"] = max(peak["total"], sum(active.values()))
        with contextlib.suppress(TimeoutError):  # a serial engine fails below, not here
            async with asyncio.timeout(60):
                await release.wait()
        active[thread] -= 1
        return "ok"

    async with serving(sa_database_url, FunctionProvider(slow)) as (client, runtime, _):
        threads = [await new_thread(client) for _ in range(4)]
        for text in ("one", "two"):
            # "two" is posted while every thread's first turn runs, so it queues behind it
            posts = [
                client.post(f"{A}/threads/{t}/messages", json={"content": text}) for t in threads
            ]
            assert {r.status_code for r in await asyncio.gather(*posts)} == {202}
            deadline = time.monotonic() + 60
            while text == "one" and sum(active.values()) < len(threads):
                assert time.monotonic() < deadline, "the first turns did not all run at once"
                await asyncio.sleep(0.01)
        release.set()
        await runtime.wait_idle(60)
        for thread_id in threads:
            page = (await client.get(f"{A}/threads/{thread_id}/messages")).json()
            assert [m["role"] for m in page["messages"]] == ["user", "assistant"] * 2
    # four turns overlapped (not one after another), never two of one thread: the peaks say so
    # without a wall-clock bound a busy machine could miss
    assert peak == {"total": 4, "per_thread": 1}


@pytest.mark.asyncio
async def test_shutdown_stops_in_flight_turns_and_queued_work_resumes_on_restart(
    sa_database_url: str,
) -> None:
    gate = asyncio.Event()
    called = asyncio.Event()

    async def stuck(request: ProviderRequest) -> str:
        called.set()
        await gate.wait()
        return "never"

    # a server that waited for the open stream would take the whole 30 s grace period
    stuck_model = FunctionProvider(stuck)
    async with serving(sa_database_url, stuck_model, graceful_timeout=30) as (
        client,
        runtime,
        token,
    ):
        thread_id = await new_thread(client)
        await client.post(f"{A}/threads/{thread_id}/messages", json={"content": "first"})
        async with asyncio.timeout(60):
            await called.wait()  # the model step is in flight: "later" queues behind the turn
        assert runtime.is_running(thread_id)
        queued = await client.post(f"{A}/threads/{thread_id}/messages", json={"content": "later"})
        assert queued.status_code == 202
        watcher = httpx.AsyncClient(base_url=client.base_url, headers=client.headers, timeout=60)
        stream = watcher.stream("GET", f"{A}/threads/{thread_id}/stream")
        response = await stream.__aenter__()
        assert (await anext(sse_frames(response)))["type"] == "connected"
        stopping = time.monotonic()  # the server stops with a turn in flight and a stream open
    shutdown_seconds = time.monotonic() - stopping
    await stream.__aexit__(None, None, None)
    await watcher.aclose()
    assert shutdown_seconds < 15
    assert not runtime.is_running(thread_id)

    async with serving(sa_database_url, FunctionProvider(brain)) as (client, runtime, _):
        client.headers["Authorization"] = f"Bearer {token}"
        contents: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            page = (await client.get(f"{A}/threads/{thread_id}/messages")).json()
            contents = [m["content"] for m in page["messages"]]
            if contents and contents[-1] == REPLY:
                break
            await asyncio.sleep(0.025)
        assert contents[-2:] == ["later", REPLY]
        assert contents[0] == "first"
