"""Per-turn model settings: sampling and length a caller asks of one turn's model calls.

``thread.send_message(..., model_settings={"temperature": 0.2, "max_tokens": 200})`` applies
them to the model calls of that turn (over the prompt's and the model's own values), and to no
later turn. The served protocols (OpenAI ``/v1``) pass a client's ``temperature``,
``max_tokens``, ... this way, as the agent's serving policy allows (``ServingPolicy``).

The settings are checked here, once, when the message is sent; the engine reads the stored
dict (``metadata.model_settings`` of the user message) as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

Level = Literal["low", "medium", "high"]


class ModelSettings(BaseModel):
    """Sampling and length settings for one turn; every field is optional.

    Attributes:
        temperature: sampling temperature, 0 to 2.
        top_p: nucleus sampling mass, 0 to 1.
        max_tokens: the most tokens an answer may have (at least 1).
        seed: a seed for providers that sample deterministically with one.
        stop: up to 16 sequences that end the answer (a single string is one sequence).
        frequency_penalty: -2 to 2.
        presence_penalty: -2 to 2.
        reasoning_effort: ``low``, ``medium`` or ``high``; replaces the prompt's reasoning
            effort (or token budget) for the turn.
        verbosity: ``low``, ``medium`` or ``high`` (OpenAI models that take it).
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    seed: int | None = None
    stop: list[str] | None = Field(default=None, min_length=1, max_length=16)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    reasoning_effort: Level | None = None
    verbosity: Level | None = None

    @field_validator("stop", mode="before")
    @classmethod
    def _one_stop(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


SETTING_NAMES: tuple[str, ...] = tuple(ModelSettings.model_fields)
"""Every setting's name, in the order :class:`ModelSettings` declares them."""


Problem = tuple[str, str]
"""``(setting, message)``."""


def validate_model_settings(value: Mapping[str, Any]) -> tuple[dict[str, Any], list[Problem]]:
    """Check ``value`` against :class:`ModelSettings`.

    Returns:
        ``(settings, problems)``: the settings that are set (``None`` values dropped, ``stop``
        as a list), or ``{}`` when there are problems; each problem is ``(setting, message)``,
        every one found.
    """
    try:
        settings = ModelSettings.model_validate(dict(value))
    except ValidationError as exc:
        problems: list[Problem] = []
        for error in exc.errors():
            name = str(error["loc"][0]) if error["loc"] else "model_settings"
            if error["type"] == "extra_forbidden":
                message = f"unknown setting (the settings are {', '.join(SETTING_NAMES)})"
            else:
                message = f"{error['msg']} (got {error['input']!r})"
            problems.append((name, message))
        return {}, problems
    return settings.model_dump(exclude_none=True), []


def check_model_settings(value: Any) -> dict[str, Any]:
    """The settings ``value`` (a dict or :class:`ModelSettings`) asks for, checked.

    Raises:
        ValueError: naming every problem (``model_settings.temperature: ...``).
    """
    if isinstance(value, ModelSettings):
        return value.model_dump(exclude_none=True)
    if not isinstance(value, Mapping):
        raise ValueError(
            "model_settings must be a dict such as {'temperature': 0.2, 'max_tokens': 500}"
        )
    settings, problems = validate_model_settings(value)
    if problems:
        raise ValueError("; ".join(f"model_settings.{name}: {text}" for name, text in problems))
    return settings
