"""OpenAI-compatible vendors: one class, configured by name, base URL and key variable.

A vendor that speaks Chat Completions is configuration, not code::

    OpenAICompatibleProvider(
        name="together",
        base_url="https://api.together.xyz/v1",
        key_variable="TOGETHER_API_KEY",
    )

Registered here: ``openrouter`` (``OPENROUTER_API_KEY``), ``groq`` (``GROQ_API_KEY``),
``ollama`` (no key, ``http://127.0.0.1:11434/v1``) and ``openai_compatible``, a generic entry
whose model definitions must set ``provider_options.base_url`` (and may set
``provider_options.key_variable``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sa_hooks import hookimpl
from sa_providers._chat_completions import ChatCompletionsProvider, ChatDialect
from sa_providers._embeddings import OpenAIEmbeddings

if TYPE_CHECKING:
    import httpx

OPENROUTER = ChatDialect(
    reasoning_style="openrouter",
    echo_reasoning_details=True,
    extra_body={"usage": {"include": True}},
)
"""OpenRouter: a ``reasoning`` object, reasoning details sent back, cost reported in usage."""


class OpenAICompatibleProvider(ChatCompletionsProvider, OpenAIEmbeddings):
    """A Chat Completions server at ``base_url``; the key is optional unless ``key_required``.

    Embedding models go to ``POST {base_url}/embeddings`` (ollama, llama.cpp, vLLM and
    OpenRouter have it; a server without it answers an error naming the status).
    """

    name = "openai_compatible"

    def __init__(
        self,
        *,
        name: str | None = None,
        base_url: str | None = None,
        key_variable: str | None = None,
        key_required: bool | None = None,
        dialect: ChatDialect | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 600.0,
    ) -> None:
        super().__init__(
            name=name,
            base_url=base_url,
            key_variable=key_variable,
            key_required=bool(key_variable) if key_required is None else key_required,
            dialect=dialect,
            transport=transport,
            timeout=timeout,
        )


def openrouter(**kwargs: Any) -> OpenAICompatibleProvider:
    """Return the ``openrouter`` provider."""
    return OpenAICompatibleProvider(
        name="openrouter",
        base_url="https://openrouter.ai/api/v1",
        key_variable="OPENROUTER_API_KEY",
        dialect=OPENROUTER,
        **kwargs,
    )


GROQ = ChatDialect(send_prompt_cache_key=False)
"""Groq: caches prompts on its own and rejects request fields it does not know."""


def groq(**kwargs: Any) -> OpenAICompatibleProvider:
    """Return the ``groq`` provider (no ``prompt_cache_key``: see :data:`GROQ`)."""
    kwargs.setdefault("dialect", GROQ)
    return OpenAICompatibleProvider(
        name="groq",
        base_url="https://api.groq.com/openai/v1",
        key_variable="GROQ_API_KEY",
        **kwargs,
    )


def ollama(**kwargs: Any) -> OpenAICompatibleProvider:
    """Return the ``ollama`` provider (a local server; no key)."""
    return OpenAICompatibleProvider(
        name="ollama",
        base_url="http://127.0.0.1:11434/v1",
        **kwargs,
    )


def generic(**kwargs: Any) -> OpenAICompatibleProvider:
    """Return the generic ``openai_compatible`` provider (base URL from ``provider_options``)."""
    return OpenAICompatibleProvider(
        name="openai_compatible",
        key_variable="OPENAI_COMPATIBLE_API_KEY",
        key_required=False,
        **kwargs,
    )


@hookimpl
def sa_register_providers(register: Callable[..., None]) -> None:
    """Register ``openrouter``, ``groq``, ``ollama`` and ``openai_compatible``."""
    for factory in (openrouter, groq, ollama, generic):
        register(factory())


__all__ = [
    "GROQ",
    "OPENROUTER",
    "ChatDialect",
    "OpenAICompatibleProvider",
    "generic",
    "groq",
    "ollama",
    "openrouter",
    "sa_register_providers",
]
