"""ModelDefinition: a named LLM configuration that prompts refer to."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from sa_core.spec.base import SpecModel
from sa_core.spec.caching import PromptCaching


class ModelCapabilities(SpecModel):
    """What a model supports; ``False`` strips images or tools from requests."""

    supports_images: bool = True
    supports_tool_calls: bool = True
    supports_streaming: bool = True
    supports_json_mode: bool | None = None
    max_context_tokens: int | None = None
    max_output_tokens: int | None = None
    reasoning_levels: list[str] | None = None
    vision: bool | None = None


class ModelDefinition(SpecModel):
    """A model definition.

    Attributes:
        name: the name prompts use in their ``model`` field.
        provider: the registered provider name (``openai``, ``anthropic``, ``test`` ...).
        model: the provider's model id sent on the wire.
        fallbacks: other model definition names tried in order when this one fails.
        input_price / output_price: USD per million tokens, for cost tracking.
        cached_price: USD per million prompt tokens read from the provider's cache; unset,
            cache reads cost ``input_price``.
        cache_write_price: USD per million prompt tokens written to the provider's cache
            (Anthropic reports them: 1.25x the input price for 5-minute entries, 2x for 1-hour
            ones); unset, cache writes cost ``input_price``.
        provider_options: provider-specific options; ``base_url`` overrides the endpoint.
        prompt_caching: prompt caching of this model's requests (on by default: see
            :class:`~sa_core.spec.caching.PromptCaching`); ``False`` turns it off.
        max_context_tokens: accepted as a keyword of :func:`define_model` and stored as
            ``capabilities.max_context_tokens``: the model's context window, the ceiling no
            request of a thread exceeds (see docs/context-cost.md).
        kind: ``chat`` (the default: a model prompts talk to) or ``embedding`` (a model that
            turns text into vectors, for a pack store's search by meaning; see
            docs/store.md). An embedding model cannot be a prompt's model, a compaction
            model or a chat model's fallback.
        record: record this model's calls (the request's hash and the full answer) so a
            thread can be replayed without calling the model (see docs/time-travel.md; on
            unless the process turns recording off, ``sa serve --no-record``); ``False`` keeps
            this model's calls out of the recording.
    """

    name: str
    provider: str
    model: str
    kind: Literal["chat", "embedding"] = "chat"
    fallbacks: list[str] = Field(default_factory=list)
    included_providers: list[str] = Field(default_factory=list)
    provider_tools: list[str] = Field(default_factory=list)
    input_price: float | None = None
    output_price: float | None = None
    cached_price: float | None = Field(None, ge=0)
    cache_write_price: float | None = Field(None, ge=0)
    capabilities: ModelCapabilities = Field(default_factory=ModelCapabilities)
    provider_options: dict[str, Any] = Field(default_factory=dict)
    max_tokens: int | None = None
    prompt_caching: PromptCaching = Field(default_factory=PromptCaching)
    record: bool = True

    @model_validator(mode="before")
    @classmethod
    def _context_window(cls, data: Any) -> Any:
        """Move a top-level ``max_context_tokens`` into ``capabilities``."""
        if not isinstance(data, dict):
            return data
        key = next((k for k in ("max_context_tokens", "maxContextTokens") if k in data), None)
        if key is None:
            return data
        data = dict(data)
        window = data.pop(key)
        capabilities = data.get("capabilities") or {}
        if isinstance(capabilities, ModelCapabilities):
            capabilities = capabilities.model_dump()
        data["capabilities"] = {**capabilities, "max_context_tokens": window}
        return data


def define_model(**fields: Any) -> ModelDefinition:
    """Define a model. Example: ``define_model(name="fast", provider="openai", model="gpt-4o")``.

    An embedding model for the pack's store:
    ``define_model(name="embed", provider="openai", model="text-embedding-3-small",
    kind="embedding")``.
    """
    return ModelDefinition(**fields)
