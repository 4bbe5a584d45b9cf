"""Replay the whole shared corpus of recorded provider traffic through our response parsers.

The corpus lives outside the repository (``../shared/provider-traffic``); this module is skipped
when it is absent. Every recorded response goes through the matching provider's real HTTP path
(``generate`` for JSON bodies, ``stream`` for server-sent events) and must parse into content or
tool calls.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from replay import Cassette, Interaction, env_of

from sa_core.providers import (
    BaseProvider,
    ProviderMessage,
    ProviderRequest,
    ProviderResponse,
    collect_stream,
)
from sa_providers.anthropic import AnthropicProvider
from sa_providers.google import GoogleProvider
from sa_providers.openai import OpenAIProvider
from sa_providers.openai_compatible import OpenAICompatibleProvider

CORPUS = Path(__file__).parents[2] / "shared" / "provider-traffic"

if not CORPUS.is_dir():
    pytest.skip(f"no provider-traffic corpus at {CORPUS}", allow_module_level=True)

CASSETTES = sorted(CORPUS.rglob("*.yaml"))


def _provider(interaction: Interaction) -> tuple[BaseProvider, dict[str, str]]:
    transport = httpx.MockTransport(
        lambda request: httpx.Response(
            interaction.status,
            headers={"content-type": interaction.content_type},
            content=interaction.body.encode(),
        )
    )
    url = interaction.url
    if "/chat/completions" in url:
        base = "http://replay.test/v1"
        return OpenAICompatibleProvider(name="replay", base_url=base, transport=transport), {}
    if url.endswith("/responses"):
        return OpenAIProvider(transport=transport), {"api": "responses"}
    if "/messages" in url or "RawPredict" in url or "rawPredict" in url:
        return AnthropicProvider(transport=transport), {}
    if "generateContent" in url or "GenerateContent" in url:
        return GoogleProvider(transport=transport), {}
    raise AssertionError(f"no provider speaks {url}")


async def _replay(interaction: Interaction) -> ProviderResponse:
    provider, options = _provider(interaction)
    request = ProviderRequest(
        model="replayed-model",
        messages=[ProviderMessage("user", "hello")],
        provider_options=options,
        env=env_of(OPENAI_API_KEY="k", ANTHROPIC_API_KEY="k", GOOGLE_API_KEY="k"),
    )
    if interaction.is_sse:
        return await collect_stream(provider.stream(request))
    return await provider.generate(request)


def test_the_corpus_is_not_empty() -> None:
    assert len(CASSETTES) > 100


@pytest.mark.asyncio
@pytest.mark.parametrize("path", CASSETTES, ids=[str(p.relative_to(CORPUS)) for p in CASSETTES])
async def test_every_recorded_response_parses(path: Path) -> None:
    cassette = Cassette.load(path)
    for interaction in cassette.interactions:
        response = await _replay(interaction)
        assert response.content or response.tool_calls, interaction.url
        for call in response.tool_calls:
            assert call.id and call.name
            assert "_raw" not in call.arguments, call.arguments
        if response.tool_calls:
            assert response.finish_reason == "tool_calls"
        assert response.usage.prompt_tokens > 0
