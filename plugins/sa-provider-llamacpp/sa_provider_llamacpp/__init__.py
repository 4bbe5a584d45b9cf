"""A llama.cpp server as a standard-agents provider.

``llama-server`` speaks OpenAI Chat Completions, so this plugin is pure configuration of the
built-in :class:`~sa_providers.openai_compatible.OpenAICompatibleProvider`: a name, a default
base URL, an optional key variable (for servers started with ``--api-key``) and a dialect that
sends the model's reasoning back as ``reasoning_content``, which llama.cpp's chat templates use to
keep a reasoning model's thoughts across tool calls.

Use it from a model definition::

    define_model(name="local", provider="llamacpp", model="openai/gpt-oss-20b")

and point it elsewhere with ``provider_options={"base_url": "http://gpu-box:8080/v1"}``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sa_hooks import hookimpl
from sa_providers.openai_compatible import ChatDialect, OpenAICompatibleProvider

NAME = "llamacpp"
DEFAULT_BASE_URL = "http://127.0.0.1:8080/v1"
KEY_VARIABLE = "LLAMACPP_API_KEY"
DIALECT = ChatDialect(echo_reasoning_content=True)


def llamacpp_provider(**kwargs: Any) -> OpenAICompatibleProvider:
    """Return the ``llamacpp`` provider; ``kwargs`` (``transport=``, ``base_url=``...) override."""
    options: dict[str, Any] = {
        "name": NAME,
        "base_url": DEFAULT_BASE_URL,
        "key_variable": KEY_VARIABLE,
        "key_required": False,
        "dialect": DIALECT,
    }
    return OpenAICompatibleProvider(**(options | kwargs))


@hookimpl
def sa_register_providers(register: Callable[..., None]) -> None:
    """Register the ``llamacpp`` provider."""
    register(llamacpp_provider())


__all__ = ["DEFAULT_BASE_URL", "KEY_VARIABLE", "NAME", "llamacpp_provider", "sa_register_providers"]
