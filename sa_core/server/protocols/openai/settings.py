"""Sampling and length settings a client sends, as the agent's serving policy allows.

A client's ``temperature``, ``top_p``, ``max_tokens`` (``max_completion_tokens``,
``max_output_tokens``), ``seed``, ``stop``, ``frequency_penalty``, ``presence_penalty``,
``reasoning_effort`` (Responses: ``reasoning.effort``) and ``verbosity`` (Responses:
``text.verbosity``) become the turn's ``model_settings`` (``thread.send_message``): they apply
to that turn's model calls over the prompt's own values. The agent's
``ServingPolicy.client_settings`` decides, else the server's default (``sa serve
--client-settings``, ``apply`` unless set):

- ``apply``: checked (types and ranges, every problem named) and applied;
- ``ignore``: accepted and not applied; the response's ``x-sa-ignored-fields`` header names
  them (comma-separated);
- ``refuse``: a 400 naming every one of them (with any other refused field of the request).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from litestar import Request

from sa_core.server.protocols.openai.errors import OpenAIError, Problems, invalid
from sa_core.server.protocols.openai.models import Model
from sa_core.spec.agents import ClientSettingsPolicy
from sa_core.spec.modelsettings import validate_model_settings

IGNORED_HEADER = "x-sa-ignored-fields"
DEFAULT_POLICY: ClientSettingsPolicy = "apply"
POLICY_OPT = "sa_client_settings"
"""The ``/v1`` router's ``opt`` key holding the server's default policy."""

SAMPLING = {name: name for name in ("seed", "stop", "frequency_penalty", "presence_penalty")}
CHAT_SETTINGS: dict[str, str] = {
    "temperature": "temperature",
    "top_p": "top_p",
    "max_tokens": "max_tokens",
    "max_completion_tokens": "max_tokens",
    **SAMPLING,
    "reasoning_effort": "reasoning_effort",
    "verbosity": "verbosity",
}
"""Chat completions' setting fields, each with the ``model_settings`` key it sets, in the
order errors and :data:`IGNORED_HEADER` name them."""
RESPONSES_SETTINGS: dict[str, str] = {
    "temperature": "temperature",
    "top_p": "top_p",
    "max_output_tokens": "max_tokens",
    **SAMPLING,
    "reasoning.effort": "reasoning_effort",
    "text.verbosity": "verbosity",
}
"""The Responses API's setting fields (``reasoning.effort`` and ``text.verbosity`` nested)."""


@dataclass
class ClientSettings:
    """What becomes of a request's settings."""

    applied: dict[str, Any] | None = None
    """The turn's ``model_settings`` (``None``: none to apply)."""
    ignored: list[str] = field(default_factory=list)
    """The fields accepted and not applied (``ignore``), for :data:`IGNORED_HEADER`."""

    def headers(self) -> dict[str, str]:
        """The response headers that say what was ignored."""
        return {IGNORED_HEADER: ",".join(self.ignored)} if self.ignored else {}


def policy_for(model: Model, request: Request[Any, Any, Any]) -> ClientSettingsPolicy:
    """The agent's own ``serving.client_settings``, else the server's default.

    The server's default is the ``/v1`` router's (``sa serve --client-settings``,
    ``create_app(client_settings=...)``), ``apply`` unless set.
    """
    agent, _ = model.scope.agent(model.agent)
    if agent.serving.client_settings is not None:
        return agent.serving.client_settings
    default: ClientSettingsPolicy = request.route_handler.opt.get(POLICY_OPT, DEFAULT_POLICY)
    return default


def asked_settings(body: Mapping[str, Any], fields: Mapping[str, str]) -> dict[str, Any]:
    """The setting fields ``body`` sets (not ``null``), nested ones named ``outer.inner``."""
    asked: dict[str, Any] = {}
    for name in fields:
        outer, _, inner = name.partition(".")
        value = body.get(outer)
        if inner:
            value = value.get(inner) if isinstance(value, dict) else None
        if value is not None:
            asked[name] = value
    return asked


def client_settings(
    asked: Mapping[str, Any],
    fields: Mapping[str, str],
    policy: ClientSettingsPolicy,
    model: Model,
    problems: Problems,
) -> ClientSettings:
    """Apply ``policy`` to the settings a request asked for (problems go to ``problems``).

    Args:
        asked: the request's setting fields and values (:func:`asked_settings`).
        fields: the API's setting fields, with the ``model_settings`` key each sets.
        policy: ``apply``, ``ignore`` or ``refuse`` (:func:`policy_for`).
        model: the model asked for, named in a refusal.
        problems: where refused or invalid settings are recorded.
    """
    if not asked:
        return ClientSettings()
    if policy == "ignore":
        return ClientSettings(ignored=list(asked))
    if policy == "refuse":
        problems.add(refused(list(asked), model))
        return ClientSettings()
    settings: dict[str, Any] = {}
    source: dict[str, str] = {}
    for name, value in asked.items():
        key = fields[name]
        if key in settings and settings[key] != value:
            problems.add(invalid(name, f"it conflicts with '{source[key]}'; send one of them."))
        settings[key] = value
        source[key] = name
    checked, found = validate_model_settings(settings)
    for key, message in found:
        problems.add(invalid(source.get(key, key), f"{message}."))
    return ClientSettings(applied=checked or None)


def refused(names: list[str], model: Model) -> OpenAIError:
    """The 400 naming every setting a ``refuse`` policy turns away."""
    quoted = ", ".join(f"'{name}'" for name in names)
    verb = "is" if len(names) == 1 else "are"
    return OpenAIError(
        400,
        f"{quoted} {verb} not accepted by the model '{model.name}': client settings are "
        "refused for it (client_settings: refuse), so the agent's own settings apply; leave "
        "them out.",
        param=",".join(names),
        code="unsupported",
    )
