"""The built-in provider plugins, one module per wire protocol.

- :mod:`sa_providers.openai`: OpenAI Chat Completions and the Responses API (``openai``).
- :mod:`sa_providers.anthropic`: the Anthropic Messages API (``anthropic``).
- :mod:`sa_providers.google`: Gemini ``generateContent`` (``google``).
- :mod:`sa_providers.openai_compatible`: OpenAI-compatible servers configured by base URL and key
  variable (``openrouter``, ``groq``, ``ollama``, ``openai_compatible``).

Each module registers its providers through the ``sa_register_providers`` hook. Importing this
package imports none of them.
"""
