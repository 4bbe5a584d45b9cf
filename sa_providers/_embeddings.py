"""Embeddings over HTTP: OpenAI's ``POST /embeddings`` and Gemini's ``batchEmbedContents``.

:class:`OpenAIEmbeddings` gives the ``openai`` and OpenAI-compatible providers their ``embed``
method; :class:`GeminiEmbeddings` gives ``google`` its own. Both answer
:class:`~sa_core.embeddings.EmbeddingResponse`, one vector per input in order; a failure is a
:class:`~sa_core.errors.ProviderError` like a chat call's (see :mod:`sa_providers._http`).
"""

from __future__ import annotations

from typing import Any

from sa_core.embeddings import EmbeddingRequest, EmbeddingResponse
from sa_core.providers import ProviderRequest, Usage
from sa_providers._http import HTTPProvider

GEMINI_TASKS = {"document": "RETRIEVAL_DOCUMENT", "query": "RETRIEVAL_QUERY"}
"""Gemini's ``taskType`` for what the text is."""


def as_provider_request(request: EmbeddingRequest) -> ProviderRequest:
    """A chat request carrying the embedding request's options and env (for the endpoint)."""
    return ProviderRequest(
        model=request.model,
        messages=[],
        provider_options=request.provider_options,
        env=request.env,
    )


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    prompt = int(raw.get("prompt_tokens") or 0)
    return Usage(prompt_tokens=prompt, total_tokens=int(raw.get("total_tokens") or prompt))


def parse_openai_embeddings(data: Any) -> EmbeddingResponse | None:
    """The vectors of an OpenAI embeddings answer, by ``index``; ``None`` when unreadable."""
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        return None
    ordered = sorted(items, key=lambda item: int(item.get("index") or 0))
    vectors = [item.get("embedding") for item in ordered]
    return EmbeddingResponse(vectors=vectors, usage=_usage(data.get("usage")))


class OpenAIEmbeddings(HTTPProvider):
    """``embed`` through ``POST {base_url}/embeddings`` (OpenAI and compatible servers)."""

    async def embed(self, request: EmbeddingRequest) -> EmbeddingResponse:
        """One embeddings call for every input; ``provider_options`` (``dimensions`` ...) merged."""
        chat = as_provider_request(request)
        endpoint = self.endpoint(chat)
        body = {"model": request.model, "input": request.inputs, "encoding_format": "float"}
        data = await self.post_json(endpoint, "/embeddings", self.passthrough(body, chat))
        response = parse_openai_embeddings(data)
        if response is None:
            raise self.bad_response(endpoint, str(data))
        return response


class GeminiEmbeddings(HTTPProvider):
    """``embed`` through ``POST /models/{model}:batchEmbedContents`` (Gemini)."""

    async def embed(self, request: EmbeddingRequest) -> EmbeddingResponse:
        """One batch call; each text is a request with the ``taskType`` of its purpose.

        ``provider_options`` other than the reserved ones (``outputDimensionality`` ...) go
        into every request of the batch.
        """
        chat = as_provider_request(request)
        endpoint = self.endpoint(chat)
        model = f"models/{request.model.removeprefix('models/')}"
        requests = [
            self.passthrough(
                {
                    "model": model,
                    "content": {"parts": [{"text": text}]},
                    "taskType": GEMINI_TASKS[request.purpose],
                },
                chat,
            )
            for text in request.inputs
        ]
        path = f"/{model}:batchEmbedContents"
        data = await self.post_json(endpoint, path, {"requests": requests})
        items = data.get("embeddings") if isinstance(data, dict) else None
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise self.bad_response(endpoint, str(data))
        return EmbeddingResponse(vectors=[item.get("values") for item in items])


__all__ = [
    "GEMINI_TASKS",
    "GeminiEmbeddings",
    "OpenAIEmbeddings",
    "as_provider_request",
    "parse_openai_embeddings",
]
