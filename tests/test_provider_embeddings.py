"""Embedding models through the provider plugins: the wire format of each API, and errors."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from sa_core.embeddings import EmbeddingRequest, embed_with
from sa_core.errors import ProviderError
from sa_providers.anthropic import AnthropicProvider
from sa_providers.google import GoogleProvider
from sa_providers.openai import OpenAIProvider
from sa_providers.openai_compatible import ollama

pytestmark = pytest.mark.asyncio


def recording(answer: Any, seen: list[httpx.Request], status: int = 200) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, json=answer)

    return httpx.MockTransport(handler)


def env(values: dict[str, str]) -> Any:
    return values.get


async def test_openai_embeds_every_input_in_one_call_in_index_order() -> None:
    seen: list[httpx.Request] = []
    answer = {
        "data": [{"index": 1, "embedding": [0.0, 1.0]}, {"index": 0, "embedding": [1.0, 0.0]}],
        "usage": {"prompt_tokens": 5, "total_tokens": 5},
    }
    provider = OpenAIProvider(transport=recording(answer, seen))
    request = EmbeddingRequest(
        model="text-embedding-3-small",
        inputs=["green tea", "black coffee"],
        provider_options={"dimensions": 2},
        env=env({"OPENAI_API_KEY": "sk-test"}),
    )
    assert await embed_with(provider, request) == [[1.0, 0.0], [0.0, 1.0]]
    sent = seen[0]
    assert str(sent.url) == "https://api.openai.com/v1/embeddings"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert json.loads(sent.content) == {
        "model": "text-embedding-3-small",
        "input": ["green tea", "black coffee"],
        "encoding_format": "float",
        "dimensions": 2,
    }


async def test_an_openai_compatible_server_is_called_at_its_base_url() -> None:
    seen: list[httpx.Request] = []
    answer = {"data": [{"index": 0, "embedding": [0.5, 0.5, 0.5]}]}
    provider = ollama(transport=recording(answer, seen))
    request = EmbeddingRequest(model="nomic-embed-text", inputs=["hello"])
    assert await embed_with(provider, request) == [[0.5, 0.5, 0.5]]
    assert str(seen[0].url) == "http://127.0.0.1:11434/v1/embeddings"


async def test_google_batches_the_texts_with_the_task_type_of_their_purpose() -> None:
    seen: list[httpx.Request] = []
    answer = {"embeddings": [{"values": [0.1, 0.2]}, {"values": [0.3, 0.4]}]}
    provider = GoogleProvider(transport=recording(answer, seen))
    request = EmbeddingRequest(
        model="text-embedding-004",
        inputs=["a", "b"],
        purpose="query",
        provider_options={"outputDimensionality": 2},
        env=env({"GOOGLE_API_KEY": "g-key"}),
    )
    assert await embed_with(provider, request) == [[0.1, 0.2], [0.3, 0.4]]
    sent = seen[0]
    assert sent.url.path == "/v1beta/models/text-embedding-004:batchEmbedContents"
    assert sent.headers["x-goog-api-key"] == "g-key"
    body = json.loads(sent.content)
    assert body["requests"][1] == {
        "model": "models/text-embedding-004",
        "content": {"parts": [{"text": "b"}]},
        "taskType": "RETRIEVAL_QUERY",
        "outputDimensionality": 2,
    }


async def test_failures_and_malformed_answers_are_provider_errors() -> None:
    seen: list[httpx.Request] = []
    failing = OpenAIProvider(transport=recording({"error": {"message": "bad"}}, seen, 400))
    request = EmbeddingRequest(model="m", inputs=["x"], env=env({"OPENAI_API_KEY": "sk-secret"}))
    with pytest.raises(ProviderError) as caught:
        await embed_with(failing, request)
    assert caught.value.code == "invalid_request" and "sk-secret" not in str(caught.value)
    short = OpenAIProvider(transport=recording({"data": []}, seen))
    with pytest.raises(ProviderError, match="came back as 0 vectors for 1 inputs"):
        await embed_with(short, request)
    with pytest.raises(ProviderError, match="Provider 'anthropic' has no embeddings API"):
        await embed_with(AnthropicProvider(), request)
