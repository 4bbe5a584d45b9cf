"""Models: every entry agent of every mounted pack, named ``{package}/{agent}``.

Each model also answers to ``{package}:{agent}``, an id without ``/``: clients that read a
``/`` in a model name as a provider prefix (the OpenAI Agents SDK's string model names) take
that one. ``GET /v1/models`` lists the ``/`` names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sa_core.registry import PackScope
from sa_core.runtime import Runtime
from sa_core.server.protocols.openai.errors import OpenAIError
from sa_core.store import ApiKeyRow


@dataclass(frozen=True)
class Model:
    """A model of the API: one entry agent of one package."""

    scope: PackScope
    agent: str

    @property
    def package(self) -> str:
        """The package the agent belongs to."""
        return self.scope.package

    @property
    def name(self) -> str:
        """The model name clients send: ``{package}/{agent}``."""
        return f"{self.scope.package}/{self.agent}"


def all_models(runtime: Runtime, key: ApiKeyRow | None = None) -> list[Model]:
    """Every entry agent of every package the runtime hosts (that ``key`` opens), in order."""
    return [
        Model(scope, agent)
        for _, scope in sorted(runtime.registry.scopes.items())
        if key is None or key.allows(scope.package)
        for agent in scope.pack.entry_agent_names()
    ]


def model_object(model: Model, created: int) -> dict[str, Any]:
    """A model as ``GET /v1/models`` lists it."""
    return {"id": model.name, "object": "model", "created": created, "owned_by": model.package}


def resolve_model(
    runtime: Runtime,
    name: Any,
    param: str = "model",
    unknown_status: int = 400,
    key: ApiKeyRow | None = None,
) -> Model:
    """The model a request names.

    Args:
        runtime: the runtime whose packs are served.
        name: the model name, ``{package}/{agent}`` or ``{package}:{agent}``.
        param: the request field that named it, for the error.
        unknown_status: the status of an unknown model: 400 when a request body names it
            (``POST /v1/chat/completions``, ``/v1/responses``), 404 for ``GET /v1/models/{id}``.
        key: the request's API key; a key limited to some packages gets 404 for every model
            it cannot use, as OpenAI answers for a model a key cannot access.

    Raises:
        OpenAIError: 400 when ``model`` is missing or not text, ``unknown_status`` when no
            package has that entry agent (the message lists the models there are).
    """
    if not isinstance(name, str) or not name:
        raise OpenAIError(
            400, f"'{param}' is required: a model name '{{package}}/{{agent}}'.", param=param
        )
    package, _, agent = name.partition("/" if "/" in name else ":")
    scope = runtime.registry.scopes.get(package)
    opened = key is None or key.allows(package)
    if opened and scope is not None and agent in scope.pack.entry_agent_names():
        return Model(scope, agent)
    known = ", ".join(m.name for m in all_models(runtime, key)) or "none"
    if key is not None and key.packages is not None:
        raise OpenAIError(
            404,
            f"The model '{name}' does not exist or you do not have access to it (this API "
            f"key's models: {known}).",
            param=param,
            code="model_not_found",
        )
    raise OpenAIError(
        unknown_status,
        f"The model '{name}' does not exist: models are entry agents named "
        f"'{{package}}/{{agent}}' or '{{package}}:{{agent}}' (this server has: {known}).",
        param=param,
        code="model_not_found",
    )
