"""``state.emit`` payloads reach live subscribers (SSE, WebSocket) with secret values redacted."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool
from sa_core.testing import TestProvider, TestScript

SECRET = "sk-live-0123456789abcdef"


class Empty(BaseModel):
    pass


class Report(BaseModel):
    token: str
    note: str


def _leaky(state: Any, args: Empty) -> str:
    key = state.env("API_KEY")
    state.emit(
        "debug",
        {"key": key, "nested": [f"Bearer {key}", {key: 1}], "model": Report(token=key, note="ok")},
    )
    state.emit("raw", f"using {key}")
    state.emit("count", 3)
    return "done"


def leaky_pack() -> Pack:
    tool = define_tool(
        name="leaky",
        description="Emits its key.",
        args=Empty,
        execute=_leaky,
        variables=[{"name": "API_KEY", "type": "secret", "required": True}],
    )
    return Pack(
        name="leak",
        agents=[define_agent(name="helper", side_a={"prompt": "main"})],
        prompts=[define_prompt(name="main", model="m", prompt="Hi.", tools=["leaky"])],
        models=[define_model(name="m", provider="test", model="m")],
        tools=[tool],
    )


@pytest.mark.asyncio
async def test_emitted_payloads_never_carry_secret_values(sa_runtime_factory) -> None:
    script = (
        TestScript()
        .add_tool_call_response([{"name": "leaky", "arguments": {}}])
        .add_text_response("ok")
    )
    async with sa_runtime_factory(
        packs=[leaky_pack()], providers={"test": TestProvider(script)}
    ) as rt:
        thread = await rt.create_thread("helper", env={"API_KEY": SECRET})
        async with rt.events.subscribe(thread.thread_id) as queue:
            await thread.send_message("go")
            await rt.wait_idle(60)
            frames = []
            while not queue.empty():
                frames.append(queue.get_nowait())
    events = {f["eventType"]: f["data"] for f in frames if f["type"] == "event"}
    assert events["debug"] == {
        "key": "[redacted]",
        "nested": ["Bearer [redacted]", {"[redacted]": 1}],
        "model": {"token": "[redacted]", "note": "ok"},
    }
    assert events["raw"] == "using [redacted]"
    assert events["count"] == 3
    assert SECRET not in repr(frames)


@pytest.mark.asyncio
async def test_payloads_without_secrets_are_published_unchanged(sa_runtime_factory) -> None:
    async with sa_runtime_factory(packs=[leaky_pack()]) as rt:
        thread = await rt.create_thread("helper", env={"API_KEY": SECRET})
        payload = {"pct": 50, "items": ["a"]}
        async with rt.events.subscribe(thread.thread_id) as queue:
            thread.emit("progress", payload)
            frame = await asyncio.wait_for(queue.get(), 60)
    assert frame["data"] is payload
