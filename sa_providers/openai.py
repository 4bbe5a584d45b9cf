"""The ``openai`` provider: Chat Completions by default, the Responses API on request.

A model definition picks the Responses API with ``provider_options={"api": "responses"}``::

    define_model(name="o4", provider="openai", model="o4-mini",
                 provider_options={"api": "responses"})

An embedding model for a pack's store (``define_model(..., model="text-embedding-3-small",
kind="embedding")``) is called at ``POST /embeddings``.

The key comes from ``OPENAI_API_KEY``; ``provider_options["base_url"]`` points the provider at
another deployment (Azure-style proxies, a local gateway).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Any

from sa_core.providers import ProviderRequest, ProviderResponse, StreamChunk
from sa_hooks import hookimpl
from sa_providers._chat_completions import ChatCompletionsProvider, ChatDialect
from sa_providers._embeddings import OpenAIEmbeddings
from sa_providers._responses import (
    parse_responses_response,
    responses_body,
    responses_stream_chunks,
)
from sa_providers._stream import closing


class OpenAIProvider(ChatCompletionsProvider, OpenAIEmbeddings):
    """OpenAI's API over httpx: Chat Completions, or Responses when the model asks for it.

    Embedding models (``kind="embedding"``) go to ``POST /embeddings``.
    """

    name = "openai"
    key_variable = "OPENAI_API_KEY"
    default_base_url = "https://api.openai.com/v1"
    dialect = ChatDialect(max_tokens_field="auto", send_user=True)

    @staticmethod
    def uses_responses(request: ProviderRequest) -> bool:
        """Whether ``request`` goes to the Responses API."""
        return request.provider_options.get("api") == "responses"

    def responses_body(self, request: ProviderRequest, *, stream: bool) -> dict[str, Any]:
        """Build the full Responses request body, ``provider_options`` merged."""
        return self.passthrough(responses_body(request, stream=stream), request)

    async def generate(self, request: ProviderRequest) -> ProviderResponse:
        """One call, to Chat Completions or Responses."""
        if not self.uses_responses(request):
            return await super().generate(request)
        endpoint = self.endpoint(request)
        data = await self.post_json(
            endpoint, "/responses", self.responses_body(request, stream=False)
        )
        return parse_responses_response(data, self.name)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamChunk]:
        """One streamed call, to Chat Completions or Responses."""
        if not self.uses_responses(request):
            async with closing(super().stream(request)) as chat:
                async for chunk in chat:
                    yield chunk
            return
        endpoint = self.endpoint(request)
        body = self.responses_body(request, stream=True)
        bad = partial(self.bad_response, endpoint)
        async with (
            closing(self.post_sse(endpoint, "/responses", body)) as events,
            closing(responses_stream_chunks(events, self.name, bad)) as chunks,
        ):
            async for chunk in chunks:
                yield chunk


@hookimpl
def sa_register_providers(register: Callable[..., None]) -> None:
    """Register the ``openai`` provider."""
    register(OpenAIProvider())


__all__ = ["OpenAIProvider", "sa_register_providers"]
