"""Embeddings: how a pack's store turns text into vectors through a provider plugin.

A provider that has an embeddings API implements one more method beside ``generate`` and
``stream``::

    async def embed(self, request: EmbeddingRequest) -> EmbeddingResponse

The built-in ``openai`` and ``openai_compatible`` providers call ``POST /embeddings``, ``google``
calls ``batchEmbedContents``, and the test provider (:mod:`sa_core.testing`) returns
deterministic vectors offline. A provider without the method (``anthropic`` has no embeddings
API) cannot serve a model defined with ``kind="embedding"``: :func:`embed_with` says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from sa_core.errors import ProviderError
from sa_core.providers import Usage

Purpose = Literal["document", "query"]
"""What the text is: something stored (``document``) or a search's query (``query``).

Some APIs embed the two differently (Gemini's ``taskType``); others ignore it."""


def _process_env(name: str) -> str | None:
    import os

    return os.environ.get(name)


@dataclass(slots=True)
class EmbeddingRequest:
    """Texts to embed with one model.

    Attributes:
        model: The provider's model id (``ModelDefinition.model``).
        inputs: The texts, one vector each, in order.
        purpose: ``document`` (stored) or ``query`` (searched for).
        provider_options: The model definition's ``provider_options`` (``base_url``,
            ``dimensions`` ...).
        env: Resolves a variable (API keys), as :class:`~sa_core.providers.ProviderRequest`.
    """

    model: str
    inputs: list[str]
    purpose: Purpose = "document"
    provider_options: dict[str, Any] = field(default_factory=dict)
    env: Callable[[str], str | None] = field(default=_process_env, repr=False)


@dataclass(slots=True)
class EmbeddingResponse:
    """One vector per input, in order, and the tokens it cost."""

    vectors: list[list[float]]
    usage: Usage = field(default_factory=Usage)


@runtime_checkable
class EmbeddingProvider(Protocol):
    """A provider with an embeddings API."""

    @property
    def name(self) -> str:
        """The name model definitions use in their ``provider`` field."""
        ...

    async def embed(self, request: EmbeddingRequest) -> EmbeddingResponse:
        """One vector per input text."""
        ...


def check_vectors(provider: str, request: EmbeddingRequest, vectors: Any) -> list[list[float]]:
    """The answer's vectors, checked: one per input, all of one length, finite numbers.

    Raises:
        ProviderError: naming the provider and what is wrong with its answer.
    """
    problems = None
    if not isinstance(vectors, list) or len(vectors) != len(request.inputs):
        count = len(vectors) if isinstance(vectors, list) else type(vectors).__name__
        problems = f"{count} vectors for {len(request.inputs)} inputs"
    elif vectors and (
        not all(isinstance(v, list) and v for v in vectors)
        or len({len(v) for v in vectors}) != 1
        or not all(isinstance(x, int | float) and math.isfinite(x) for v in vectors for x in v)
    ):
        problems = "vectors that are not lists of finite numbers of one length"
    if problems is not None:
        raise ProviderError(
            f"{provider}: the embeddings of model '{request.model}' came back as {problems}.",
            "unknown",
            provider=provider,
        )
    return [[float(x) for x in vector] for vector in vectors]


async def embed_with(provider: object, request: EmbeddingRequest) -> list[list[float]]:
    """Embed ``request.inputs`` with ``provider``; checked vectors, one per input.

    Raises:
        ProviderError: the provider has no embeddings API (code ``invalid_request``), or the
            call failed, or its answer is malformed.
    """
    name = str(getattr(provider, "name", type(provider).__name__))
    if not isinstance(provider, EmbeddingProvider):
        raise ProviderError(
            f"Provider '{name}' has no embeddings API, so model '{request.model}' cannot be "
            f"an embedding model (kind='embedding'); use a provider that has one (openai, "
            f"openai_compatible, google).",
            "invalid_request",
            provider=name,
        )
    if not request.inputs:
        return []
    response = await provider.embed(request)
    return check_vectors(name, request, response.vectors)


__all__ = [
    "EmbeddingProvider",
    "EmbeddingRequest",
    "EmbeddingResponse",
    "Purpose",
    "check_vectors",
    "embed_with",
]
