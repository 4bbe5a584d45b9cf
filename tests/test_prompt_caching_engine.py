"""Prompt caching through a real Runtime: stable prefixes, stable keys, cache-aware cost.

The wire tests drive real threads against a loopback HTTP server that answers with the recorded
responses of real sessions (``tests/fixtures/provider_traffic``), tool-call ids made unique per
step, and keeps the raw bytes of every request body the runtime sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from loopback import HTTPLoopback, send
from pydantic import BaseModel
from replay import Cassette, Interaction
from subagent_tree import research_tree

from sa_core import Pack, define_agent, define_model, define_prompt, define_tool
from sa_core.engine.model.promptcache import thread_cache_key
from sa_core.testing import FunctionProvider
from sa_providers.anthropic import AnthropicProvider
from sa_providers.openai import OpenAIProvider

_CALL_ID = re.compile(r"\b(toolu|call|fc)_[A-Za-z0-9]{8,}")


@dataclass
class LoopbackServer(HTTPLoopback):
    """Answers request ``i`` with ``pick(i)`` (a recorded interaction) on 127.0.0.1."""

    pick: Callable[[int], Interaction]
    bodies: list[bytes] = field(default_factory=list)

    def reply(self, request: BaseHTTPRequestHandler, body: bytes) -> None:
        self.bodies.append(body)
        index = len(self.bodies) - 1
        interaction = self.pick(index)
        # each step's tool calls get their own ids, as a real model's would
        text = _CALL_ID.sub(lambda m: f"{m.group(1)}_step{index}", interaction.body)
        send(request, interaction.status, interaction.content_type, text.encode())


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


# ---------------------------------------------------------------------------------------------
# Lifetimes, child keys, and the cache figures rolled up over the tree
# ---------------------------------------------------------------------------------------------


def tree_pack() -> Pack:
    """The lead and its blocking ``researcher`` subagent (:func:`subagent_tree.research_tree`).

    Prices, USD per million: input 1, output 2, cache reads 0.10, cache writes 1.25.
    """
    prices = {"input_price": 1.0, "output_price": 2.0, "cached_price": 0.1}
    return research_tree(
        "tree",
        define_model(
            name="lead_model", provider="test", model="lead", **prices, cache_write_price=1.25
        ),
        define_model(
            name="worker_model", provider="test", model="worker", **prices, cache_write_price=1.25
        ),
    )


# every call: 10,000 prompt tokens of which 8,000 read from the cache and 1,000 written to it
CACHED_USAGE = {
    "prompt_tokens": 10_000,
    "completion_tokens": 100,
    "total_tokens": 10_100,
    "cached_tokens": 8_000,
    "cache_write_tokens": 1_000,
}
CALL_COST = (1_000 * 1.0 + 8_000 * 0.1 + 1_000 * 1.25 + 100 * 2.0) / 1e6  # 0.00325 USD


def tree_provider() -> FunctionProvider:
    def answer(request: Any) -> Any:
        if request.model == "worker":
            return {
                "tool_calls": [{"name": "approve", "arguments": {"summary": "sunny"}}],
                "usage": CACHED_USAGE,
            }
        if not any(m.role == "tool" for m in request.messages):
            return {
                "tool_calls": [{"name": "researcher", "arguments": {"task": "weather"}}],
                "usage": CACHED_USAGE,
            }
        return {"content": "It is sunny.", "usage": CACHED_USAGE}

    return FunctionProvider(answer)


@pytest.mark.asyncio
async def test_children_have_their_own_key_and_a_waiting_parent_the_long_lifetime(
    sa_runtime_factory,
):
    provider = tree_provider()
    async with sa_runtime_factory(packs=[tree_pack()], providers={"test": provider}) as rt:
        lead = await rt.create_thread("lead")
        await lead.send_message("research")
        await rt.wait_idle(60)
        child_id = lead.children[0].reference
    lead_requests = [r for r in provider.requests if r.model == "lead"]
    worker_requests = [r for r in provider.requests if r.model == "worker"]
    assert len(lead_requests) == 2 and len(worker_requests) == 1
    assert {r.prompt_cache.key for r in lead_requests} == {thread_cache_key(lead.thread_id)}
    assert worker_requests[0].prompt_cache.key == thread_cache_key(child_id)
    # the lead offers a blocking subagent: it may wait long, so its entries live an hour
    assert {r.prompt_cache.ttl for r in lead_requests} == {"1h"}
    assert worker_requests[0].prompt_cache.ttl == "5m"


@pytest.mark.asyncio
async def test_cache_figures_roll_up_over_the_tree_priced_at_cache_prices(sa_runtime_factory):
    async with sa_runtime_factory(packs=[tree_pack()], providers={"test": tree_provider()}) as rt:
        lead = await rt.create_thread("lead")
        await lead.send_message("research")
        await rt.wait_idle(60)
        usage = await lead.usage()
        logs = [log for log in await lead.get_logs() if log.type == "llm_call"]
    tree = usage.tree
    assert tree is not None and tree.model_calls == 3
    assert (tree.input_tokens, tree.cached_tokens, tree.cache_write_tokens) == (
        30_000,
        24_000,
        3_000,
    )
    assert tree.cost_usd == pytest.approx(3 * CALL_COST)
    assert tree.by_model["worker_model"].cache_write_tokens == 1_000
    assert usage.thread.cached_tokens == 16_000
    assert logs[0].data["cache_write_tokens"] == 1_000 and logs[0].data["cached_tokens"] == 8_000
