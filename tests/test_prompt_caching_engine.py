"""Prompt caching through a real Runtime: stable prefixes, stable keys, cache-aware cost.

The wire tests drive real threads against a loopback HTTP server that answers with the recorded
responses of real sessions (``tests/fixtures/provider_traffic``), tool-call ids made unique per
step, and keeps the raw bytes of every request body the runtime sent.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from pydantic import BaseModel
from replay import Cassette, Interaction

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool
from sa_core.engine.promptcache import thread_cache_key
from sa_core.testing import FunctionProvider
from sa_providers.anthropic import AnthropicProvider
from sa_providers.openai import OpenAIProvider

_CALL_ID = re.compile(r"\b(toolu|call|fc)_[A-Za-z0-9]{8,}")


@dataclass
class LoopbackServer:
    """Answers request ``i`` with ``pick(i)`` (a recorded interaction) on 127.0.0.1."""

    pick: Callable[[int], Interaction]
    bodies: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                server.bodies.append(self.rfile.read(length))
                index = len(server.bodies) - 1
                interaction = server.pick(index)
                # each step's tool calls get their own ids, as a real model's would
                text = _CALL_ID.sub(lambda m: f"{m.group(1)}_step{index}", interaction.body)
                payload = text.encode()
                self.send_response(interaction.status)
                self.send_header("Content-Type", interaction.content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> LoopbackServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


class Location(BaseModel):
    location: str


WEATHER = define_tool(
    name="weather",
    description="Get weather information for a location",
    args=Location,
    execute=lambda state, args: "40 C",
)


def weather_pack(
    provider: str, model: str, url: str, options: dict[str, Any] | None = None, **fields: Any
) -> Pack:
    """An ``assistant`` agent whose prompt calls ``weather`` with a model served at ``url``."""
    main = define_model(
        name="main",
        provider=provider,
        model=model,
        provider_options={"base_url": url, **(options or {})},
        **fields,
    )
    prompt = define_prompt(
        name="main",
        model="main",
        prompt="You are a helpful assistant",
        include_chat=True,
        tools=["weather"],
    )
    agent = define_agent(name="assistant", side_a={"prompt": "main"})
    return Pack(name="caching", agents=[agent], prompts=[prompt], models=[main], tools=[WEATHER])


# ---------------------------------------------------------------------------------------------
# Anthropic: the prefix is byte-stable over a 20-step tool loop
# ---------------------------------------------------------------------------------------------

MARKER = b', "cache_control"'
"""How a breakpoint starts in a body as the provider serialises it (``json.dumps``)."""


@pytest.mark.asyncio
async def test_request_bytes_before_the_last_breakpoint_are_stable_over_20_steps(
    sa_runtime_factory,
):
    recorded = Cassette.load("TestAnthropicCommon/claude-sonnet-4/tool_streaming.yaml")
    tool_call, answer = recorded.interactions
    with LoopbackServer(lambda i: tool_call if i < 20 else answer) as server:
        pack = weather_pack("anthropic", "claude-sonnet-4-20250514", server.url + "/v1")
        async with sa_runtime_factory(
            packs=[pack],
            providers={"anthropic": AnthropicProvider()},
            env={"ANTHROPIC_API_KEY": "loopback-key"},
        ) as rt:
            thread = await rt.create_thread("assistant")
            await thread.send_message("What's the weather in Florence,Italy?")
            page = await thread.get_messages()
    bodies = server.bodies
    assert len(bodies) == 21 and page.messages[-1].role == "assistant"
    assert sum(1 for m in page.messages if m.role == "tool") == 20
    for step, (body, following) in enumerate(zip(bodies, bodies[1:], strict=False)):
        assert 3 <= body.count(b'"cache_control"') <= 4
        last = body.rfind(MARKER)
        # the last breakpoint sits in the newest message, after the tools and the system prompt
        assert last > body.find(b'"messages"') > body.find(b'"system"') > body.find(b'"tools"')
        # everything before it is sent again, byte for byte, by the next step
        assert following[:last] == body[:last], f"step {step + 1} changed the cached prefix"
        assert following.rfind(MARKER) > last  # and the last breakpoint moved on
    # and every step shares the first step's prefix: tools, system prompt, the user's message
    first_cut = bodies[0].rfind(MARKER)
    assert all(b[:first_cut] == bodies[0][:first_cut] for b in bodies)


# ---------------------------------------------------------------------------------------------
# OpenAI: one prompt_cache_key per thread, on every step and after a restart
# ---------------------------------------------------------------------------------------------

OPENAI = {
    "chat": ("TestOpenAICommon/openai-gpt-4o-mini/tool_streaming.yaml", "gpt-4o-mini", {}),
    "responses": (
        "TestOpenAIResponsesCommon/openai-gpt-4o/tool_streaming.yaml",
        "gpt-4o",
        {"api": "responses"},
    ),
}


@pytest.mark.asyncio
@pytest.mark.parametrize("api", sorted(OPENAI))
async def test_prompt_cache_key_is_the_threads_on_every_step_and_after_restart(
    sa_runtime_factory, api: str
):
    path, model, options = OPENAI[api]
    recorded = Cassette.load(path)
    with LoopbackServer(lambda i: recorded.interactions[i % 2]) as server:
        pack = weather_pack("openai", model, server.url + "/v1", options)
        providers = {"openai": OpenAIProvider()}
        env = {"OPENAI_API_KEY": "loopback-key"}
        async with sa_runtime_factory(packs=[pack], providers=providers, env=env) as rt:
            first = await rt.create_thread("assistant")
            await first.send_message("What's the weather in Florence,Italy?")
            other = await rt.create_thread("assistant")
            await other.send_message("What's the weather in Florence,Italy?")
        # a new runtime on the same database: the same thread, the same key
        async with sa_runtime_factory(packs=[pack], providers=providers, env=env) as rt:
            again = await rt.get_thread(first.thread_id)
            await again.send_message("And tomorrow?")
    keys = [json.loads(body)["prompt_cache_key"] for body in server.bodies]
    mine, theirs = thread_cache_key(first.thread_id), thread_cache_key(other.thread_id)
    assert keys == [mine, mine, theirs, theirs, mine, mine]
    assert mine != theirs
    assert mine.startswith("sa-") and first.thread_id not in mine and len(mine) <= 64


@pytest.mark.asyncio
async def test_a_model_can_turn_caching_off(sa_runtime_factory):
    recorded = Cassette.load("TestOpenAICommon/openai-gpt-4o-mini/tool_streaming.yaml")
    with LoopbackServer(lambda i: recorded.interactions[i % 2]) as server:
        pack = weather_pack("openai", "gpt-4o-mini", server.url + "/v1", prompt_caching=False)
        async with sa_runtime_factory(
            packs=[pack], providers={"openai": OpenAIProvider()}, env={"OPENAI_API_KEY": "k"}
        ) as rt:
            thread = await rt.create_thread("assistant")
            await thread.send_message("What's the weather in Florence,Italy?")
    assert server.bodies and all(
        "prompt_cache_key" not in json.loads(body) for body in server.bodies
    )
