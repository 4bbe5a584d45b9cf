"""A turn's own model settings on each model call of the turn.

The user message that starts a turn may carry ``metadata.model_settings``
(``send_message(model_settings=...)``, checked when it was sent by
:mod:`sa_core.spec.modelsettings`), beside its output schema. The flow reads both with the
turn's message (:func:`turn_asks`) and every model request of the turn's top-level steps gets it
(:func:`apply_turn_settings`): over the model's ``max_tokens`` and the prompt's reasoning
effort, and over the same settings in the merged ``provider_options``, which are dropped so the
turn's value is the one sent. A turn without settings costs nothing here: the next turn reads
its own message, so the prompt's values come back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sa_core.engine.model.structured import TURN_SCHEMA
from sa_core.providers import ProviderRequest, ReasoningConfig

TURN_SETTINGS = "model_settings"
"""The user message's metadata key holding the turn's settings."""

SAMPLING = frozenset(
    {"temperature", "top_p", "seed", "frequency_penalty", "presence_penalty", "verbosity"}
)
"""Settings copied as they are onto the request's field of the same name."""

_GENERATION = "generationConfig"
OPTION_PATHS: dict[str, tuple[tuple[str, ...], ...]] = {
    "temperature": (("temperature",), (_GENERATION, "temperature")),
    "top_p": (("top_p",), ("topP",), (_GENERATION, "topP")),
    "max_tokens": (
        ("max_tokens",), ("max_completion_tokens",), ("max_output_tokens",),
        ("maxOutputTokens",), (_GENERATION, "maxOutputTokens"),
    ),
    "seed": (("seed",), (_GENERATION, "seed")),
    "stop": (("stop",), ("stop_sequences",), ("stopSequences",), (_GENERATION, "stopSequences")),
    "frequency_penalty": (
        ("frequency_penalty",), ("frequencyPenalty",), (_GENERATION, "frequencyPenalty"),
    ),
    "presence_penalty": (
        ("presence_penalty",), ("presencePenalty",), (_GENERATION, "presencePenalty"),
    ),
    "reasoning_effort": (
        ("reasoning_effort",), ("reasoning", "effort"), ("thinking",),
        (_GENERATION, "thinkingConfig"),
    ),
    "verbosity": (("verbosity",), ("text", "verbosity")),
}  # fmt: skip
"""Where each setting may also sit in ``provider_options``, in the built-in providers' bodies
(Chat Completions, Responses, Anthropic Messages, Gemini): a turn's setting drops these."""


def turn_asks(messages: Sequence[Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """What the flow's last top-level user message asks of its turn, if anything.

    Returns:
        ``(output schema, model settings)`` from the message's metadata
        (``send_message(output_schema=..., model_settings=...)``), each ``None`` when unset.
    """
    for message in reversed(messages):
        if message.role == "user" and message.depth == 0:
            if not message.metadata:
                return None, None
            schema = message.metadata.get(TURN_SCHEMA)
            settings = message.metadata.get(TURN_SETTINGS)
            return (
                schema if isinstance(schema, dict) else None,
                settings if isinstance(settings, dict) and settings else None,
            )
    return None, None


def apply_turn_settings(request: ProviderRequest, settings: Mapping[str, Any]) -> None:
    """Set a turn's ``settings`` on one model ``request``, over its own values."""
    for name, value in settings.items():
        if name in SAMPLING:
            setattr(request, name, value)
        elif name == "stop":
            request.stop = list(value)
        elif name == "max_tokens":
            request.max_tokens = value
        elif name == "reasoning_effort":
            prior = request.reasoning
            request.reasoning = ReasoningConfig(value, None, prior.exclude if prior else False)
    if request.provider_options:
        request.provider_options = without_settings(request.provider_options, settings)


def without_settings(options: dict[str, Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` without the entries that set any of ``settings`` (a copy when any goes)."""
    result = options
    for name in settings:
        for path in OPTION_PATHS.get(name, ()):
            result = _without(result, path)
    return result


def _without(options: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    head, rest = path[0], path[1:]
    if head not in options:
        return options
    if not rest:
        return {k: v for k, v in options.items() if k != head}
    inner = options[head]
    if not isinstance(inner, dict):
        return options
    trimmed = _without(inner, rest)
    if trimmed is inner:
        return options
    return {**options, head: trimmed}
