"""Prompt caching on the wire: what each provider asks for and reads back, on recorded traffic.

The requests are the recorded conversations of real sessions (``tests/fixtures/provider_traffic``)
with a :class:`PromptCache` on them; the responses are the recorded responses, with the cache
counters a caching session reports (the recordings were made on cold caches, so the counts are
zero there) written into the very fields the provider returned.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from replay import Cassette, Replay, canonical, first_request, run_conversation

from sa_core.providers import PromptCache, ProviderMessage, ProviderRequest, Usage, compute_cost
from sa_providers.anthropic import AnthropicProvider, add_cache_breakpoints, anthropic_body
from sa_providers.google import GoogleProvider
from sa_providers.openai import OpenAIProvider
from sa_providers.openai_compatible import groq

KEY = "sa-0123456789abcdef0123456789abcdef"
ANTHROPIC = "TestAnthropicCommon/claude-sonnet-4"


def _strip_markers(value: Any) -> Any:
    """A body without its ``cache_control`` markers."""
    if isinstance(value, list):
        return [_strip_markers(item) for item in value]
    if isinstance(value, dict):
        return {k: _strip_markers(v) for k, v in value.items() if k != "cache_control"}
    return value


def _marked(body: dict[str, Any]) -> list[str]:
    """Where the breakpoints of a Messages body are, as readable paths."""
    out = [f"tools[{i}]" for i, t in enumerate(body.get("tools", [])) if "cache_control" in t]
    out += [f"system[{i}]" for i, b in enumerate(body.get("system", [])) if "cache_control" in b]
    for m, message in enumerate(body["messages"]):
        out += [
            f"messages[{m}][{b}]"
            for b, block in enumerate(message["content"])
            if "cache_control" in block
        ]
    return out


def _patched(cassette: Cassette, *swaps: tuple[str, str]) -> Cassette:
    """The cassette with its response bodies edited (cache counters written in)."""
    interactions = []
    for interaction in cassette.interactions:
        body = interaction.body
        for old, new in swaps:
            assert old in body, old
            body = body.replace(old, new)
        interactions.append(replace(interaction, body=body))
    return replace(cassette, interactions=tuple(interactions))


# ---------------------------------------------------------------------------------------------
# Anthropic: cache_control breakpoints
# ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True])
async def test_anthropic_marks_the_stable_prefix_and_moves_the_last_breakpoint(
    stream: bool,
) -> None:
    cassette = Cassette.load(f"{ANTHROPIC}/tool{'_streaming' if stream else ''}.yaml")
    replay = Replay(cassette)
    request = first_request(cassette, parallel_tool_calls=True, prompt_cache=PromptCache(KEY))
    await run_conversation(AnthropicProvider(transport=replay.transport), request, stream=stream)
    first, second = replay.sent_bodies
    # tools, system prompt, and the newest message; the last one moved to the new newest message
    assert _marked(first) == ["tools[0]", "system[0]", "messages[0][0]"]
    assert _marked(second) == ["tools[0]", "system[0]", "messages[2][0]"]
    assert second["messages"][2]["content"][0]["type"] == "tool_result"
    for body in (first, second):
        markers = [b["cache_control"] for b in [*body["tools"], *body["system"]]]
        assert markers == [{"type": "ephemeral"}] * 2
    # apart from the markers the requests are exactly the recorded ones
    for sent, recorded in zip(replay.sent_bodies, replay.recorded_bodies, strict=True):
        assert canonical(_strip_markers(sent)) == canonical(recorded)


@pytest.mark.asyncio
async def test_anthropic_sends_no_breakpoint_without_a_cache_request() -> None:
    cassette = Cassette.load(f"{ANTHROPIC}/tool.yaml")
    replay = Replay(cassette)
    request = first_request(cassette, parallel_tool_calls=True)
    await run_conversation(AnthropicProvider(transport=replay.transport), request, stream=False)
    assert "cache_control" not in json.dumps(replay.sent_bodies)


def test_anthropic_uses_at_most_four_breakpoints_with_the_long_lifetime() -> None:
    body: dict[str, Any] = {
        "tools": [{"name": "a"}, {"name": "b"}],
        "system": [{"type": "text", "text": "prompt"}, {"type": "text", "text": "children"}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "ok"},
                    {"type": "thinking", "thinking": "...", "signature": "s"},
                ],
            },
        ],
    }
    add_cache_breakpoints(body, PromptCache(KEY, ttl="1h"))
    # a thinking block may not carry a breakpoint: the text before it does
    assert _marked(body) == ["tools[1]", "system[0]", "system[1]", "messages[1][0]"]
    assert body["tools"][1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


# ---------------------------------------------------------------------------------------------
# OpenAI (chat and Responses) and compatible servers: prompt_cache_key
# ---------------------------------------------------------------------------------------------

OPENAI_CASES = {
    "chat": ("TestOpenAICommon/openai-gpt-4o-mini/tool_streaming.yaml", {}),
    "responses": (
        "TestOpenAIResponsesCommon/openai-gpt-4o/tool_streaming.yaml",
        {"api": "responses"},
    ),
}


@pytest.mark.asyncio
@pytest.mark.parametrize("api", sorted(OPENAI_CASES))
async def test_openai_sends_the_thread_key_on_every_request(api: str) -> None:
    path, options = OPENAI_CASES[api]
    cassette = Cassette.load(path)
    replay = Replay(cassette)
    request = first_request(
        cassette, parallel_tool_calls=True, provider_options=options, prompt_cache=PromptCache(KEY)
    )
    await run_conversation(OpenAIProvider(transport=replay.transport), request, stream=True)
    assert len(replay.sent_bodies) == 2
    assert [b["prompt_cache_key"] for b in replay.sent_bodies] == [KEY, KEY]


@pytest.mark.asyncio
async def test_the_key_stays_off_the_wire_when_turned_off_or_for_groq() -> None:
    cassette = Cassette.load("TestOpenAICommon/openai-gpt-4o-mini/simple.yaml")
    replay = Replay(cassette)
    off = first_request(cassette, prompt_cache=PromptCache(KEY, send_key=False))
    await OpenAIProvider(transport=replay.transport).generate(off)
    assert "prompt_cache_key" not in replay.sent_bodies[0]
    groq_cassette = Cassette.load("TestOpenAICompatibleCommon/groq-kimi-k2/simple.yaml")
    groq_replay = Replay(groq_cassette)
    on = first_request(groq_cassette, prompt_cache=PromptCache(KEY))
    await groq(transport=groq_replay.transport).generate(on)
    assert "prompt_cache_key" not in groq_replay.sent_bodies[0]


# ---------------------------------------------------------------------------------------------
# Cache reads and writes from each provider's response shapes
# ---------------------------------------------------------------------------------------------

Expected = tuple[int | None, int, int]
USAGE_CASES: dict[str, tuple[str, Any, tuple[tuple[str, str], ...], Expected]] = {
    # (cassette, provider, swaps, expected (prompt tokens, cache reads, cache writes))
    "anthropic": (
        f"{ANTHROPIC}/simple.yaml",
        AnthropicProvider,
        (
            ('"cache_creation_input_tokens":0', '"cache_creation_input_tokens":300'),
            ('"cache_read_input_tokens":0', '"cache_read_input_tokens":1200'),
        ),
        (None, 1200, 300),
    ),
    "openai-chat": (
        "TestOpenAICommon/openai-gpt-4o-mini/simple.yaml",
        OpenAIProvider,
        (('"cached_tokens": 0', '"cached_tokens": 8'),),
        (None, 8, 0),
    ),
    "openai-responses": (
        "TestOpenAIResponsesCommon/openai-gpt-4o/simple.yaml",
        OpenAIProvider,
        (('"cached_tokens": 0', '"cached_tokens": 8'),),
        (None, 8, 0),
    ),
    "google": (
        "TestGoogleCommon/gemini-2.5-flash/simple.yaml",
        GoogleProvider,
        (('"promptTokenCount": 11,', '"promptTokenCount": 11, "cachedContentTokenCount": 8,'),),
        (11, 8, 0),
    ),
}


def _stream_swaps(swaps: tuple[tuple[str, str], ...], body: str) -> tuple[tuple[str, str], ...]:
    """Recorded streams write JSON without spaces after colons; match either spelling."""
    out = []
    for old, new in swaps:
        if old in body:
            out.append((old, new))
        else:
            out.append((old.replace(": ", ":"), new.replace(": ", ":")))
    return tuple(out)


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("case", sorted(USAGE_CASES))
async def test_cache_reads_and_writes_parse_from_real_responses(case: str, stream: bool) -> None:
    path, factory, swaps, (prompt, reads, writes) = USAGE_CASES[case]
    if stream:
        path = path.replace("simple.yaml", "simple_streaming.yaml")
    cassette = Cassette.load(path)
    cassette = _patched(cassette, *_stream_swaps(swaps, cassette.interactions[0].body))
    replay = Replay(cassette)
    options = {"api": "responses"} if case == "openai-responses" else {}
    request = first_request(cassette, provider_options=options)
    (response,) = await run_conversation(
        factory(transport=replay.transport), request, stream=stream
    )
    usage = response.usage
    assert (usage.cached_tokens, usage.cache_write_tokens) == (reads, writes)
    if prompt is not None:
        assert usage.prompt_tokens == prompt
    if case == "anthropic":  # input_tokens counts neither: the prompt is all three
        assert usage.prompt_tokens > reads + writes
    assert usage.prompt_tokens >= reads + writes


def test_cost_prices_cache_reads_and_writes_at_their_own_prices() -> None:
    usage = Usage(prompt_tokens=10_000, completion_tokens=100, cached_tokens=8_000)
    usage.cache_write_tokens = 1_000
    # 1,000 plain x $1 + 8,000 read x $0.10 + 1,000 written x $1.25 + 100 out x $2 (per million)
    assert compute_cost(usage, 1.0, 2.0, 0.1, 1.25) == pytest.approx(3250 / 1e6)
    # unset cache prices fall back to the input price
    assert compute_cost(usage, 1.0, 2.0) == pytest.approx(10_200 / 1e6)


def test_the_neutral_message_list_is_untouched_by_breakpoints() -> None:
    """Marking a body never edits the provider messages it came from (they are reused)."""
    messages = [ProviderMessage("system", "S"), ProviderMessage("user", "U")]
    request = ProviderRequest("m", messages, prompt_cache=PromptCache(KEY))
    first = json.dumps(anthropic_body(request, stream=False))
    second = json.dumps(anthropic_body(request, stream=False))
    assert first == second and first.count("cache_control") == 2
